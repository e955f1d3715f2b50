// The avx512bf16 table's families for GGUF block weights computed in place (Q8_0, Q4_0, Q4_K):
// the weight's integer codes become bf16 words in registers (byte tables, VPERMW, or int -> fp32
// -> bf16) and VDPBF16PS multiplies them with the bf16 activations, 32 pairs per instruction; the
// blocks' scales multiply the lanes afterwards. No decoded buffer, so a decode step reads the
// weight at close to the FP8/FP4 families' speed (docs/KERNELS.md "Block families").
//
// Arithmetic (every output the same operations whatever M, so results are batch-invariant):
// the activation row is act_quant'ed (q x s, exact in bf16) and stored as bf16 words, a 64-value
// unit as two vectors: vector v's words 0-15 are values 16v..16v+15, words 16-31 values
// 32+16v..32+16v+15 (so lanes 0-7 hold the first 32 values, lanes 8-15 the next 32: the order
// nibble and byte expansions give), with the fp32 sum of each 32 values (summed in double,
// rounded once). Per 64-value
// unit and output: t = VDPBF16PS(VDPBF16PS(0, w0, x0), w1, x1), acc = fma(t, [dl_a x8 | dl_b x8],
// acc); formats with a min (Q4_K: value = dl q - ml) add ml_a * sum_a + ml_b * sum_b to a scalar
// fp32 accumulator in unit order; the output is bf16(hsum16(acc) - min). Every product of a code
// and an activation is exact; the fp32 sums differ from the reference's exact 32-value sums as
// the FP8 family's do.
//
// Rows whose width is not a multiple of 64 take the buffer family (gemm_blocks.h) for every M.
// Included only by the avx512bf16 table's translation unit, inside an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cmath>
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
// a 32-word VPERMW table: entry i (and i + 16) = bf16(i + bias)
inline __m512i nibble_table(int bias) {
  alignas(64) uint16_t t[32];
  for (int i = 0; i < 32; ++i) t[i] = bf16_of_int(i % 16 + bias);
  return _mm512_load_si512(t);
}
// [a x8 | b x8]
inline __m512 lane_scales(float a, float b) {
  return _mm512_mask_blend_ps(__mmask16(0xFF00), _mm512_set1_ps(a), _mm512_set1_ps(b));
}
// 16 bytes as 32 words: the bytes, then the same bytes again
inline __m512i bytes_twice(const uint8_t* p) {
  return _mm512_cvtepu8_epi16(
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// A format: kElems values and kBytes bytes per block (a Q8_0/Q4_0 "block" here is two ggml blocks:
// one 64-value unit); header() reads a block's scales, unit(c) decodes its c-th 64 values.
struct KqQ8_0 {
  static constexpr uint32_t kType = ggml::kQ8_0;
  static constexpr int kElems = 64, kBytes = 68;
  static constexpr bool kMins = false;
  struct Header {
    float d[2];
  };
  static void header(const uint8_t* b, Header* h) {
    h->d[0] = f16c_half(ggml::u16_at(b));
    h->d[1] = f16c_half(ggml::u16_at(b + 34));
  }
  // int8 codes -> fp32 -> bf16 (exact)
  static __m512i words(const uint8_t* a, const uint8_t* c) {
    const __m512 lo = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))));
    const __m512 hi = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))));
    return __m512i(_mm512_cvtne2ps_pbh(hi, lo));
  }
  void unit(const uint8_t* b, const Header& h, int, __m512i* w, __m512* s) const {
    w[0] = words(b + 2, b + 36);
    w[1] = words(b + 18, b + 52);
    *s = lane_scales(h.d[0], h.d[1]);
  }
  float min(const Header&, int) const { return 0.0f; }
};

struct KqQ4_0 {
  static constexpr uint32_t kType = ggml::kQ4_0;
  static constexpr int kElems = 64, kBytes = 36;
  static constexpr bool kMins = false;
  __m512i table = nibble_table(-8);
  struct Header {
    float d[2];
  };
  static void header(const uint8_t* b, Header* h) {
    h->d[0] = f16c_half(ggml::u16_at(b));
    h->d[1] = f16c_half(ggml::u16_at(b + 18));
  }
  // element j < 16 of a block: low nibble of qs[j]; j + 16: its high nibble
  void unit(const uint8_t* b, const Header& h, int, __m512i* w, __m512* s) const {
    const __m512i both = _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2)))),
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 20))), 1);
    w[0] = perm_words(both, table);  // (VPERMW reads index bits 0-4: the table repeats at 16)
    w[1] = perm_words(_mm512_srli_epi16(both, 4), table);
    *s = lane_scales(h.d[0], h.d[1]);
  }
  float min(const Header&, int) const { return 0.0f; }
};

// Q4_K: unit c of a block is its 64-value chunk c (qs[32c..32c+31]: sub-block 2c in the low
// nibbles, 2c + 1 in the high ones), so the FP8 order's halves are exactly the two sub-blocks.
struct KqQ4_K {
  static constexpr uint32_t kType = ggml::kQ4_K;
  static constexpr int kElems = 256, kBytes = 144;
  static constexpr bool kMins = true;
  __m512i table = nibble_table(0);
  __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
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
    const uint8_t* q = b + 16 + 32 * c;
    w[0] = perm_words(_mm512_srlv_epi16(bytes_twice(q), shifts), table);
    w[1] = perm_words(_mm512_srlv_epi16(bytes_twice(q + 16), shifts), table);
    *s = lane_scales(h.dl[2 * c], h.dl[2 * c + 1]);
  }
  // the min of the unit's 32-value half `half`
  float min(const Header& h, int sub) const { return h.ml[sub]; }
};

// ---- activations: K bf16 words in the unit order above, then the sum of every 32 values ----

int kq_act_floats(int K) { return K % 64 ? act_floats_blocks(K) : K / 2 + K / 32; }

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
        double s = 0;
        for (int i = 0; i < 32; ++i) s += v[32 * b + i];
        sums[2 * u + b] = float(s);
        store_bf16(h + 32 * b, v + 32 * b);
      }
      for (int slot = 0; slot < 64; ++slot) {
        const int vec = slot / 32, w = slot % 32;
        words[64 * u + slot] = h[w < 16 ? 16 * vec + w : 32 + 16 * vec + (w - 16)];
      }
    }
  }
}

// MR activation rows against one weight row.
template <class D, int MR>
void kq_rows(const D& dec, const uint8_t* row, const float* act, int lda, int K, float* out,
             int ldo) {
  const float* sums = act + K / 2;
  __m512 acc[MR];
  float mn[MR];
  CEDAR_UNROLL for (int m = 0; m < MR; ++m) {
    acc[m] = _mm512_setzero_ps();
    mn[m] = 0.0f;
  }
  for (int b = 0; b < K / D::kElems; ++b) {
    const uint8_t* bp = row + size_t(b) * D::kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(bp + 2048), _MM_HINT_T0);
    typename D::Header h;
    D::header(bp, &h);
    for (int c = 0; c < D::kElems / 64; ++c) {
      const int u = (b * D::kElems) / 64 + c;
      __m512i w[2];
      __m512 s;
      dec.unit(bp, h, c, w, &s);
      CEDAR_UNROLL for (int m = 0; m < MR; ++m) {
        const float* x = act + size_t(m) * lda;
        const __m512 t = dp(dp(_mm512_setzero_ps(), w[0], load_words(x, 64 * u)), w[1],
                            load_words(x, 64 * u + 32));
        acc[m] = _mm512_fmadd_ps(t, s, acc[m]);
        if constexpr (D::kMins) {
          const float* sm = sums + size_t(m) * lda;
          mn[m] = std::fma(dec.min(h, 2 * c), sm[2 * u], mn[m]);
          mn[m] = std::fma(dec.min(h, 2 * c + 1), sm[2 * u + 1], mn[m]);
        }
      }
    }
  }
  CEDAR_UNROLL for (int m = 0; m < MR; ++m) out[size_t(m) * ldo] =
      bf16_round(hsum16(acc[m]) - mn[m]);
}

template <class D, int MR>
void kq_rows_upto(const D& dec, int M, const uint8_t* row, const float* act, int lda, int K,
                  float* out, int ldo) {
  if (M == MR)
    kq_rows<D, MR>(dec, row, act, lda, K, out, ldo);
  else if constexpr (MR > 1)
    kq_rows_upto<D, MR - 1>(dec, M, row, act, lda, K, out, ldo);
}

// Each weight row once, decoded per group of up to kRows activation rows.
template <class D>
void gemm_kq(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
             float* out, int ldo) {
  if (K % 64) return gemm_blocks<V16, D::kType>(act, M, K, w, ws, n0, n1, out, ldo);
  constexpr int kRows = 8;
  static const D dec;
  const int lda = kq_act_floats(K);
  const size_t rb = size_t(K / D::kElems) * D::kBytes;
  for (int n = n0; n < n1; ++n)
    for (int m0 = 0; m0 < M; m0 += kRows)
      kq_rows_upto<D, kRows>(dec, M - m0 < kRows ? M - m0 : kRows, w + size_t(n) * rb,
                             act + size_t(m0) * lda, lda, K,
                             out + size_t(m0) * ldo + size_t(n - n0), ldo);
}

template <class D>
GemmKernels kq_family() {
  return {kq_act_floats, prepare_kq, gemm_kq<D>, 1};
}

// The formats with a register family here, over fill_block_families' buffer families.
void fill_block_families_dp(KernelTable& k) {
  fill_block_families<V16>(k);
  k.gemm[int(WeightFormat::kQ8_0)] = kq_family<KqQ8_0>();
  k.gemm[int(WeightFormat::kQ4_0)] = kq_family<KqQ4_0>();
  k.gemm[int(WeightFormat::kQ4_K)] = kq_family<KqQ4_K>();
}

}  // namespace
}  // namespace cedar::kernels::fast
