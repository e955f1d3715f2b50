// The avx512bf16 table's families for GGUF block weights computed in place (Q8_0, Q4_0, Q5_0,
// Q2_K .. Q6_K): the weight's integer codes become bf16 words in registers (nibble/bit planes
// through VPERMW/VPERMI2W tables, int8 through fp32) and VDPBF16PS multiplies them with the bf16
// activations, 32 pairs per instruction; the blocks' scales multiply the lanes afterwards. No
// decoded buffer, so a decode step reads the weight at close to the FP8/FP4 families' speed
// (docs/KERNELS.md "Block families").
//
// Arithmetic (every output the same operations whatever M, so results are batch-invariant):
// the activation row is act_quant'ed (q x s, exact in bf16) and stored as bf16 words, a 64-value
// unit as two vectors: vector v's words 0-15 are values 16v..16v+15, words 16-31 values
// 32+16v..32+16v+15 (lanes 0-7 hold the first 32 values, lanes 8-15 the next 32: the order the
// nibble and bit-plane expansions give), then the fp32 sum of every 16 values (summed in double,
// rounded once). Per 64-value unit and output: formats with one scale per 32 values (Q8_0, Q4_0,
// Q5_0, Q4_K, Q5_K) t = VDPBF16PS(VDPBF16PS(0, w0, x0), w1, x1), acc = fma(t, [dl_a x8 | dl_b x8],
// acc); formats with one per 16 (Q2_K, Q3_K, Q6_K) each vector's VDPBF16PS(0, wv, xv) into its
// own accumulator with its own lane scales, the two added at the end. Formats with a min (value =
// dl q - ml: Q2_K, Q4_K, Q5_K) add the unit's four 16-value mins times the activation's sums
// into four fp32 lanes. The output is bf16(hsum16(acc) - ((m0 + m1) + (m2 + m3))). Every product
// of a code and an activation is exact; the fp32 sums differ from the reference's exact 32-value
// sums as the FP8 family's do.
//
// Rows whose width is not a multiple of 64 take the buffer family (gemm_blocks.h) for every M.
// Included only by the avx512bf16 table's translation unit, inside an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/fast/dp512.h"
#include "kernels/fast/gemm_blocks.h"
#include "kernels/fast/gemm_dp.h"
#include "kernels/fast/vec512.h"
#include "kernels/ggml_blocks.h"

namespace cedar::kernels::fast {
namespace {

// bf16 bits of a small integer (exact)
constexpr uint16_t bf16_of_int(int v) {
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int a = v < 0 ? -v : v, e = 0;
  while (a >> (e + 1)) ++e;  // a = 1.f x 2^e
  const int mant = (a << (7 - e)) & 0x7F;
  return uint16_t(sign | ((e + 127) << 7) | mant);
}
// a 32-word VPERMW table: entry i = bf16(i % period + bias) (a period below 32 lets VPERMW's
// 5-bit index ignore the bits above the code)
inline __m512i nibble_table(int bias, int period) {
  alignas(64) uint16_t t[32];
  for (int i = 0; i < 32; ++i) t[i] = bf16_of_int(i % period + bias);
  return _mm512_load_si512(t);
}
// [a x8 | b x8]
inline __m512 lane_scales(float a, float b) {
  return _mm512_mask_blend_ps(__mmask16(0xFF00), _mm512_set1_ps(a), _mm512_set1_ps(b));
}
// 16 bytes as 32 words: the bytes, then the same bytes again
inline __m512i bytes_twice(const uint8_t* p) {
  return _mm512_maskz_cvtepu8_epi16(
      __mmask32(0xFFFFFFFFu),
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// A format: kElems values and kBytes bytes per block (a Q8_0/Q4_0/Q5_0 "block" here is two ggml
// blocks: one 64-value unit); header() reads a block's scales; unit(c) decodes its c-th 64 values
// into two word vectors and their lane scales (kOneScale: one vector for both); min16(h, c, g)
// is the min of the unit's 16-value group g (formats with kMins).
struct KqQ8_0 {
  static constexpr uint32_t kType = ggml::kQ8_0;
  static constexpr int kElems = 64, kBytes = 68;
  static constexpr bool kMins = false, kOneScale = true;
  struct Header {
    float d[2];
  };
  static void header(const uint8_t* b, Header* h) {
    h->d[0] = f16c_half(ggml::u16_at(b));
    h->d[1] = f16c_half(ggml::u16_at(b + 34));
  }
  // int8 codes -> fp32 -> bf16 (exact)
  static __m512i words(const uint8_t* a, const uint8_t* c) {
    const __m512 lo = _mm512_maskz_cvtepi32_ps(
        __mmask16(0xFFFF),
        _mm512_maskz_cvtepi8_epi32(__mmask16(0xFFFF),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(a))));
    const __m512 hi = _mm512_maskz_cvtepi32_ps(
        __mmask16(0xFFFF),
        _mm512_maskz_cvtepi8_epi32(__mmask16(0xFFFF),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(c))));
    return __m512i(_mm512_cvtne2ps_pbh(hi, lo));
  }
  void unit(const uint8_t* b, const Header& h, int, __m512i* w, __m512* s) const {
    w[0] = words(b + 2, b + 36);
    w[1] = words(b + 18, b + 52);
    s[0] = lane_scales(h.d[0], h.d[1]);
  }
  float min16(const Header&, int, int) const { return 0.0f; }
};

// two 16-byte runs as 32 words
inline __m512i bytes_pair(const uint8_t* a, const uint8_t* c) {
  // (the masked forms: GCC 12 warns on the unmasked ones' undefined merge source)
  return _mm512_maskz_cvtepu8_epi16(
      __mmask32(0xFFFFFFFFu),
      _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(c)), 1));
}
// words 0-15 a, words 16-31 b
inline __m512i words_split(int a, int b) {
  return _mm512_mask_blend_epi16(__mmask32(0xFFFF0000u), _mm512_set1_epi16(short(a)),
                                 _mm512_set1_epi16(short(b)));
}
inline __m512i and_words(__m512i v, int m) {
  return _mm512_and_si512(v, _mm512_set1_epi16(short(m)));
}

// Q4_0 / Q5_0: element j < 16 of a block in the low nibble of qs[j], j + 16 in its high nibble
// (Q5_0: bit j of the u32 qh on top), minus 8 (16)
template <bool kFive>
struct KqQ45_0 {
  static constexpr uint32_t kType = kFive ? ggml::kQ5_0 : ggml::kQ4_0;
  static constexpr int kBlock = kFive ? 22 : 18, kElems = 64, kBytes = 2 * kBlock;
  static constexpr bool kMins = false, kOneScale = true;
  __m512i table = nibble_table(kFive ? -16 : -8, kFive ? 32 : 16);
  __m512i lane_bit = _mm512_set_epi16(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14,
                                      13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  struct Header {
    float d[2];
  };
  static void header(const uint8_t* b, Header* h) {
    h->d[0] = f16c_half(ggml::u16_at(b));
    h->d[1] = f16c_half(ggml::u16_at(b + kBlock));
  }
  void unit(const uint8_t* b, const Header& h, int, __m512i* w, __m512* s) const {
    const int q = kFive ? 6 : 2;
    const __m512i both = bytes_pair(b + q, b + kBlock + q);
    __m512i idx[2] = {and_words(both, 15), _mm512_srli_epi16(both, 4)};
    if constexpr (kFive) {
      uint32_t qh0, qh1;
      std::memcpy(&qh0, b + 2, 4);
      std::memcpy(&qh1, b + kBlock + 2, 4);
      for (int v = 0; v < 2; ++v) {
        const __m512i hw =
            words_split(int(uint16_t(qh0 >> (16 * v))), int(uint16_t(qh1 >> (16 * v))));
        idx[v] = _mm512_or_si512(
            idx[v], _mm512_slli_epi16(and_words(_mm512_srlv_epi16(hw, lane_bit), 1), 4));
      }
    }
    w[0] = perm_words(idx[0], table);
    w[1] = perm_words(idx[1], table);
    s[0] = lane_scales(h.d[0], h.d[1]);
  }
  float min16(const Header&, int, int) const { return 0.0f; }
};

// Q4_K / Q5_K: unit c of a block is its 64-value chunk c (qs[32c..32c+31]: sub-block 2c in the
// low nibbles, 2c + 1 in the high ones; Q5_K: bit 2c (2c + 1) of qh[l] on top), so the unit's
// halves are exactly the two sub-blocks; value dl q - ml.
template <bool kFive>
struct KqQ45_K {
  static constexpr uint32_t kType = kFive ? ggml::kQ5_K : ggml::kQ4_K;
  static constexpr int kElems = 256, kBytes = kFive ? 176 : 144;
  static constexpr bool kMins = true, kOneScale = true;
  __m512i table = nibble_table(0, kFive ? 32 : 16);
  __m512i shifts = words_split(0, 4);
  struct Header {
    float dl[8], ml[8];
  };
  static void header(const uint8_t* b, Header* h) {
    const float d = f16c_half(ggml::u16_at(b)), dmin = f16c_half(ggml::u16_at(b + 2));
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      ggml::k_scale_min(b + 4, j, &sc, &m);
      h->dl[j] = d * float(sc);
      h->ml[j] = dmin * float(m);
    }
  }
  void unit(const uint8_t* b, const Header& h, int c, __m512i* w, __m512* s) const {
    const uint8_t* q = b + (kFive ? 48 : 16) + 32 * c;
    for (int v = 0; v < 2; ++v) {
      __m512i idx = _mm512_srlv_epi16(bytes_twice(q + 16 * v), shifts);
      if constexpr (kFive) {
        const __m512i hb =
            _mm512_srlv_epi16(bytes_twice(b + 16 + 16 * v), words_split(2 * c, 2 * c + 1));
        idx = _mm512_or_si512(and_words(idx, 15), _mm512_slli_epi16(and_words(hb, 1), 4));
      }
      w[v] = perm_words(idx, table);  // (Q4_K: VPERMW reads index bits 0-4, the table repeats)
    }
    s[0] = lane_scales(h.dl[2 * c], h.dl[2 * c + 1]);
  }
  float min16(const Header& h, int c, int g) const { return h.ml[2 * c + g / 2]; }
};

// Q2_K / Q3_K: unit c = values 64c.. of a block = half h = c/2, 2-bit planes p0 = 2(c%2) and
// p1 = p0 + 1 of qs[32h..32h+31] (first half: plane p0; second: p1); a scale per 16 values
// (sub-block 8h + 2p + hf), so each vector has its own lane scales. Q2_K: value dl q - ml;
// Q3_K: dl (q - 4 + 4 hmask bit), no min.
template <bool kThree>
struct KqQ23_K {
  static constexpr uint32_t kType = kThree ? ggml::kQ3_K : ggml::kQ2_K;
  static constexpr int kElems = 256, kBytes = kThree ? 110 : 84;
  static constexpr bool kMins = !kThree, kOneScale = false;
  __m512i table = nibble_table(kThree ? -4 : 0, kThree ? 8 : 4);
  struct Header {
    float dl[16], ml[16];
  };
  static void header(const uint8_t* b, Header* h) {
    if constexpr (kThree) {
      const uint8_t* sc = b + 96;
      const float d = f16c_half(ggml::u16_at(b + 108));
      for (int i = 0; i < 16; ++i) {
        const int low = i < 8 ? (sc[i] & 15) : (sc[i - 8] >> 4);
        const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
        h->dl[i] = d * float((low | (high << 4)) - 32);
      }
    } else {
      const float d = f16c_half(ggml::u16_at(b + 80)), dmin = f16c_half(ggml::u16_at(b + 82));
      for (int i = 0; i < 16; ++i) {
        h->dl[i] = d * float(b[i] & 15);
        h->ml[i] = dmin * float(b[i] >> 4);
      }
    }
  }
  void unit(const uint8_t* b, const Header& h, int c, __m512i* w, __m512* s) const {
    const int hh = c / 2, p0 = 2 * (c % 2), p1 = p0 + 1;
    const uint8_t* qs = b + (kThree ? 32 : 16) + 32 * hh;
    const __m512i planes = words_split(2 * p0, 2 * p1);
    for (int v = 0; v < 2; ++v) {
      __m512i idx = and_words(_mm512_srlv_epi16(bytes_twice(qs + 16 * v), planes), 3);
      if constexpr (kThree) {
        const __m512i hb =
            _mm512_srlv_epi16(bytes_twice(b + 16 * v), words_split(4 * hh + p0, 4 * hh + p1));
        idx = _mm512_or_si512(idx, _mm512_slli_epi16(and_words(hb, 1), 2));
      }
      w[v] = perm_words(idx, table);
      s[v] = lane_scales(h.dl[8 * hh + 2 * p0 + v], h.dl[8 * hh + 2 * p1 + v]);
    }
  }
  float min16(const Header& h, int c, int g) const {
    const int hh = c / 2, p = 2 * (c % 2) + g / 2;
    return h.ml[8 * hh + 2 * p + g % 2];
  }
};

// Q6_K: unit c = half h = c/2, quarters k0 = 2(c%2) and k1 = k0 + 1 (values 128h + 32k + l);
// q = nibble of ql | 2 bits of qh << 4, minus 32, a 64-entry table (VPERMI2W); int8 scale per 16.
struct KqQ6_K {
  static constexpr uint32_t kType = ggml::kQ6_K;
  static constexpr int kElems = 256, kBytes = 210;
  static constexpr bool kMins = false, kOneScale = false;
  __m512i lo = nibble_table(-32, 32), hi = nibble_table(0, 32);
  struct Header {
    float dl[16];
  };
  static void header(const uint8_t* b, Header* h) {
    const float d = f16c_half(ggml::u16_at(b + 208));
    for (int i = 0; i < 16; ++i) h->dl[i] = d * float(int8_t(b[192 + i]));
  }
  void unit(const uint8_t* b, const Header& h, int c, __m512i* w, __m512* s) const {
    const int hh = c / 2, k0 = 2 * (c % 2), k1 = k0 + 1;
    const uint8_t* ql = b + 64 * hh;
    const __m512i planes = words_split(2 * k0, 2 * k1);
    for (int v = 0; v < 2; ++v) {
      const __m512i low =
          and_words(_mm512_srli_epi16(bytes_pair(ql + 16 * v, ql + 32 + 16 * v), 4 * (c % 2)), 15);
      const __m512i high =
          and_words(_mm512_srlv_epi16(bytes_twice(b + 128 + 32 * hh + 16 * v), planes), 3);
      const __m512i idx = _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
      w[v] = _mm512_permutex2var_epi16(lo, idx, hi);
      s[v] = lane_scales(h.dl[8 * hh + v + 2 * k0], h.dl[8 * hh + v + 2 * k1]);
    }
  }
  float min16(const Header&, int, int) const { return 0.0f; }
};

// ---- activations: K bf16 words in the unit order above, then the sum of every 32 values ----

int kq_act_floats(int K) { return K % 64 ? act_floats_blocks(K) : K / 2 + K / 16; }

void prepare_kq(const float* x, int rows, int K, float* act) {
  if (K % 64) return prepare_blocks(x, rows, K, act);
  const int lda = kq_act_floats(K);
  alignas(64) float v[64];
  alignas(64) uint16_t h[64];
  for (int m = 0; m < rows; ++m) {
    const float* xr = x + size_t(m) * K;
    uint16_t* words = reinterpret_cast<uint16_t*>(act + size_t(m) * lda);
    float* sums = act + size_t(m) * lda + K / 2;
    for (int u = 0; u < K / 64; ++u) {
      for (int b = 0; b < 2; ++b) {
        act_quant_block(xr + 64 * u + 32 * b, nullptr, v + 32 * b);
        store_bf16(h + 32 * b, v + 32 * b);
      }
      for (int g = 0; g < 4; ++g) {
        double s = 0;
        for (int i = 0; i < 16; ++i) s += v[16 * g + i];
        sums[4 * u + g] = float(s);
      }
      for (int slot = 0; slot < 64; ++slot) {
        const int vec = slot / 32, w = slot % 32;
        words[64 * u + slot] = h[w < 16 ? 16 * vec + w : 32 + 16 * vec + (w - 16)];
      }
    }
  }
}

// A weight row's units as the products consume them: each(f) calls f(u, w, s, mins) for every
// 64-value unit u in K order -- decoded in registers (RegisterUnits) or read back from a panel
// the row was decoded into once (PanelUnits). The same values either way, so the same results.
template <class D>
struct RegisterUnits {
  const D& dec;
  const uint8_t* row;
  int K;
  template <class F>
  void each(F&& f) const {
    for (int b = 0; b < K / D::kElems; ++b) {
      const uint8_t* bp = row + size_t(b) * D::kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(bp + 2048), _MM_HINT_T0);
      typename D::Header h;
      D::header(bp, &h);
      for (int c = 0; c < D::kElems / 64; ++c) {
        __m512i w[2];
        __m512 s[2];
        dec.unit(bp, h, c, w, s);
        __m128 mins = _mm_setzero_ps();
        if constexpr (D::kMins)
          mins = _mm_setr_ps(dec.min16(h, c, 0), dec.min16(h, c, 1), dec.min16(h, c, 2),
                             dec.min16(h, c, 3));
        f((b * D::kElems) / 64 + c, w, s, mins);
      }
    }
  }
};

// Per unit: two word vectors and two scale vectors (16 floats each), then the four mins.
constexpr int kPanelUnitFloats = 16 * 4 + 4;
template <class D>
struct PanelUnits {
  const float* panel;
  int K;
  // decodes `row` into `panel` (K / 64 units of kPanelUnitFloats)
  static void fill(const D& dec, const uint8_t* row, int K, float* panel) {
    RegisterUnits<D>{dec, row, K}.each([&](int u, const __m512i* w, const __m512* s, __m128 mins) {
      float* p = panel + size_t(u) * kPanelUnitFloats;
      _mm512_storeu_si512(p, w[0]);
      _mm512_storeu_si512(p + 16, w[1]);
      _mm512_storeu_ps(p + 32, s[0]);
      _mm512_storeu_ps(p + 48, D::kOneScale ? s[0] : s[1]);
      _mm_storeu_ps(p + 64, mins);
    });
  }
  template <class F>
  void each(F&& f) const {
    for (int u = 0; u < K / 64; ++u) {
      const float* p = panel + size_t(u) * kPanelUnitFloats;
      const __m512i w[2] = {_mm512_loadu_si512(p), _mm512_loadu_si512(p + 16)};
      const __m512 s[2] = {_mm512_loadu_ps(p + 32), _mm512_loadu_ps(p + 48)};
      f(u, w, s, _mm_loadu_ps(p + 64));
    }
  }
};

// MR activation rows against one weight row's units.
template <class D, int MR, class Units>
void kq_rows(const Units& units, const float* act, int lda, int K, float* out, int ldo) {
  const float* sums = act + K / 2;
  // two lane accumulators (the vectors of a unit with two scale vectors go to separate chains)
  // and four min lanes per row, summed at the end in a fixed order
  __m512 acc[MR][2];
  __m128 mn[MR];
  CEDAR_UNROLL for (int m = 0; m < MR; ++m) {
    acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    mn[m] = _mm_setzero_ps();
  }
  units.each([&](int u, const __m512i* w, const __m512* s, __m128 mins) {
    CEDAR_UNROLL for (int m = 0; m < MR; ++m) {
      const float* x = act + size_t(m) * lda;
      const __m512 z = _mm512_setzero_ps();
      if constexpr (D::kOneScale) {
        const __m512 t = dp(dp(z, w[0], load_words(x, 64 * u)), w[1], load_words(x, 64 * u + 32));
        acc[m][0] = _mm512_fmadd_ps(t, s[0], acc[m][0]);
      } else {
        acc[m][0] = _mm512_fmadd_ps(dp(z, w[0], load_words(x, 64 * u)), s[0], acc[m][0]);
        acc[m][1] = _mm512_fmadd_ps(dp(z, w[1], load_words(x, 64 * u + 32)), s[1], acc[m][1]);
      }
      if constexpr (D::kMins)
        mn[m] = _mm_fmadd_ps(mins, _mm_loadu_ps(sums + size_t(m) * lda + 4 * u), mn[m]);
    }
  });
  CEDAR_UNROLL for (int m = 0; m < MR; ++m) {
    float total = hsum16(D::kOneScale ? acc[m][0] : _mm512_add_ps(acc[m][0], acc[m][1]));
    if constexpr (D::kMins) {
      alignas(16) float l[4];
      _mm_store_ps(l, mn[m]);
      total -= (l[0] + l[1]) + (l[2] + l[3]);
    }
    out[size_t(m) * ldo] = bf16_round(total);
  }
}

template <class D, int MR, class Units>
void kq_rows_upto(const Units& units, int M, const float* act, int lda, int K, float* out,
                  int ldo) {
  if (M == MR)
    kq_rows<D, MR>(units, act, lda, K, out, ldo);
  else if constexpr (MR > 1)
    kq_rows_upto<D, MR - 1>(units, M, act, lda, K, out, ldo);
}

// Up to kRows activation rows: each weight row decoded in registers as it streams by (a decode
// step). More: each weight row decoded once into a panel, then read back per kRows rows.
template <class D>
void gemm_kq(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
             float* out, int ldo) {
  if (K % 64) return gemm_blocks<V16, D::kType>(act, M, K, w, ws, n0, n1, out, ldo);
  constexpr int kRows = 8;
  static const D dec;
  const int lda = kq_act_floats(K);
  const size_t rb = size_t(K / D::kElems) * D::kBytes;
  float* panel = M > kRows ? dp_buffer(0, size_t(K / 64) * kPanelUnitFloats) : nullptr;
  for (int n = n0; n < n1; ++n) {
    const uint8_t* row = w + size_t(n) * rb;
    float* o = out + size_t(n - n0);
    if (!panel) {
      kq_rows_upto<D, kRows>(RegisterUnits<D>{dec, row, K}, M, act, lda, K, o, ldo);
      continue;
    }
    PanelUnits<D>::fill(dec, row, K, panel);
    const PanelUnits<D> units{panel, K};
    for (int m0 = 0; m0 < M; m0 += kRows)
      kq_rows_upto<D, kRows>(units, M - m0 < kRows ? M - m0 : kRows, act + size_t(m0) * lda, lda, K,
                             o + size_t(m0) * ldo, ldo);
  }
}

template <class D>
GemmKernels kq_family() {
  return {kq_act_floats, prepare_kq, gemm_kq<D>, 1};
}

// The formats with a register family here, over fill_block_families' buffer families.
void fill_block_families_dp(KernelTable& k) {
  fill_block_families<V16>(k);
  k.gemm[int(WeightFormat::kQ8_0)] = kq_family<KqQ8_0>();
  k.gemm[int(WeightFormat::kQ4_0)] = kq_family<KqQ45_0<false>>();
  k.gemm[int(WeightFormat::kQ5_0)] = kq_family<KqQ45_0<true>>();
  k.gemm[int(WeightFormat::kQ2_K)] = kq_family<KqQ23_K<false>>();
  k.gemm[int(WeightFormat::kQ3_K)] = kq_family<KqQ23_K<true>>();
  k.gemm[int(WeightFormat::kQ4_K)] = kq_family<KqQ45_K<false>>();
  k.gemm[int(WeightFormat::kQ5_K)] = kq_family<KqQ45_K<true>>();
  k.gemm[int(WeightFormat::kQ6_K)] = kq_family<KqQ6_K>();
}

}  // namespace
}  // namespace cedar::kernels::fast
