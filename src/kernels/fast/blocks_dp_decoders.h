// The weight decoders of the avx512bf16 table's GGUF block families (gemm_blocks_dp.h): each
// turns a block of its ggml type into bf16 word vectors for VDPBF16PS, in registers.
//
// A decoder: kElems values and kBytes bytes per block (a Q8_0/Q4_0/Q5_0 "block" here is two ggml
// blocks: one 64-value unit); header() reads a block's scales (kMins: `mins`, the negated min of
// each of its 16-value groups in order; kBlockScales: `scale0`/`scale1`, the lane scales of
// every unit's first and second vector); unit(c) decodes its c-th 64 words into two word vectors
// and (unless kBlockScales) their lane scales (kOneScale: one vector for both); element(slot) is
// the block element that word slot 64c + 32v + w holds (prepare_kq stores the activations so).
//
// Included only by gemm_blocks_dp.h, inside an anonymous namespace like every kernels/fast header.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/fast/dp512.h"
#include "kernels/fast/gemm.h"
#include "kernels/fast/gemm_blocks.h"
#include "kernels/ggml_blocks.h"

namespace cedar::kernels::fast {
namespace {

// bf16 bits of a small integer (exact; |v| < 256)
constexpr uint16_t bf16_of_int(int v) {
  return uint16_t((v < 0 ? 0x8000 : 0) | int_word(v < 0 ? -v : v));
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

// The element a word slot of a 64-value unit holds in the layout of the byte-run decoders above
// (Q8_0, Q4_0, Q5_0) and of Q3_K, Q5_K and Q6_K: vector v's words 0-15 are values 16v..16v+15,
// words 16-31 values 32+16v..32+16v+15.
constexpr int run_element(int slot) {
  const int v = (slot / 32) % 2, w = slot % 32;
  return 64 * (slot / 64) + (w < 16 ? 16 * v + w : 32 + 16 * v + (w - 16));
}

struct KqQ8_0 {
  static constexpr uint32_t kType = ggml::kQ8_0;
  static constexpr int kElems = 64, kBytes = 68;
  static constexpr bool kMins = false, kOneScale = true, kBlockScales = false;
  struct Header {
    float d[2];
  };
  CEDAR_ALWAYS_INLINE static Header header(const uint8_t* b) {
    return {{f16c_half(ggml::u16_at(b)), f16c_half(ggml::u16_at(b + 34))}};
  }
  static constexpr int element(int slot) { return run_element(slot); }
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
  CEDAR_ALWAYS_INLINE void unit(const uint8_t* b, const Header& h, int, __m512i* w,
                                __m512* s) const {
    w[0] = words(b + 2, b + 36);
    w[1] = words(b + 18, b + 52);
    s[0] = lane_scales(h.d[0], h.d[1]);
  }
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
  static constexpr bool kMins = false, kOneScale = true, kBlockScales = false;
  __m512i table = nibble_table(kFive ? -16 : -8, kFive ? 32 : 16);
  __m512i lane_bit = _mm512_set_epi16(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14,
                                      13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  struct Header {
    float d[2];
  };
  CEDAR_ALWAYS_INLINE static Header header(const uint8_t* b) {
    return {{f16c_half(ggml::u16_at(b)), f16c_half(ggml::u16_at(b + kBlock))}};
  }
  static constexpr int element(int slot) { return run_element(slot); }
  CEDAR_ALWAYS_INLINE void unit(const uint8_t* b, const Header& h, int, __m512i* w,
                                __m512* s) const {
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
};

// a scale vector's lanes from a header vector: lane i takes h[idx[i]]
inline __m512 lanes_of(__m512 h, __m512i idx) {
  return _mm512_mask_permutexvar_ps(h, __mmask16(0xFFFF), idx, h);
}
// [a x8 | b x8] as lane indices
inline __m512i idx_halves(int a, int b) {
  return _mm512_mask_blend_epi32(__mmask16(0xFF00), _mm512_set1_epi32(a), _mm512_set1_epi32(b));
}

// Q4_K / Q5_K scales: the 12 bytes at b + 4 hold eight 6-bit scales sc_j and eight 6-bit mins
// m_j (ggml::k_scale_min); returns lanes 2j = d x sc_j and 2j + 1 = -(dmin x m_j), each the
// reference's product (negated exactly: the rows add the mins' terms). Reads b .. b + 19.
CEDAR_ALWAYS_INLINE __m512 k_scales_mins(const uint8_t* b) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4));
  // a = the byte with the low bits; t = the byte whose top two bits become bits 4-5 (j >= 4)
  const __m128i a =
      _mm_shuffle_epi8(q, _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 8, 9, 9, 10, 10, 11, 11));
  const __m128i t =
      _mm_shuffle_epi8(q, _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 1, 5, 2, 6, 3, 7));
  const __m128i low6 = _mm_and_si128(a, _mm_set1_epi8(63));
  // j >= 4: the scale's low nibble, the min's high nibble (the 16-bit shift's carry from the
  // next byte is masked off)
  const __m128i nib = _mm_and_si128(_mm_mask_blend_epi8(__mmask16(0xAA00), a, _mm_srli_epi16(a, 4)),
                                    _mm_set1_epi8(15));
  const __m128i top = _mm_srli_epi16(_mm_and_si128(t, _mm_set1_epi8(char(0xC0))), 2);
  const __m128i codes = _mm_mask_blend_epi8(__mmask16(0xFF00), low6, _mm_or_si128(nib, top));
  const __m512 f = _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF),
                                            _mm512_maskz_cvtepu8_epi32(__mmask16(0xFFFF), codes));
  // [d, -dmin] x8 from the two halves (dmin's sign flipped in its bits)
  const __m512 d = _mm512_maskz_cvtph_ps(
      __mmask16(0xFFFF),
      _mm256_set1_epi32(
          int((ggml::u16_at(b) | (uint32_t(ggml::u16_at(b + 2)) << 16)) ^ 0x80000000u)));
  return _mm512_mul_ps(f, d);
}
// each of the block's sixteen 16-value groups' (negated) min
inline __m512 k_group_mins(__m512 sm) {
  return lanes_of(sm, _mm512_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15));
}

// Q4_K: qs[32c + l] holds value 64c + l (sub-block 2c) in its low nibble and 64c + 32 + l (2c + 1)
// in its high one. Two vectors V_h = bytes 16h..16h+15 of each of the four 32-byte chunks (one
// 128-bit quarter per chunk, VSHUFI64X2 of two 64-byte loads); like the FP4 decoder, shifts of 0,
// 4, 8 and 12 bring a word's four nibbles into a 16-periodic VPERMW table. Every vector's lanes
// 4k..4k+3 are then chunk k: low nibbles sub-block 2k, high nibbles 2k + 1 -- so all the block's
// low-nibble vectors share one scale vector and all its high-nibble vectors another
// (kBlockScales). Unit c: V_(c/2), the even (c%2 = 0) or odd bytes, low and high nibbles.
// Value dl q - ml.
struct KqQ4_K {
  static constexpr uint32_t kType = ggml::kQ4_K;
  static constexpr int kElems = 256, kBytes = 144;
  static constexpr bool kMins = true, kOneScale = false, kBlockScales = true;
  __m512i table = nibble_table(0, 16);
  struct Header {
    __m512i v0, v1;
    __m512 scale0, scale1, mins;
  };
  CEDAR_ALWAYS_INLINE static Header header(const uint8_t* b) {
    const __m512 sm = k_scales_mins(b);
    const __m512i lo = _mm512_loadu_si512(b + 16), hi = _mm512_loadu_si512(b + 80);
    return {_mm512_mask_shuffle_i64x2(lo, __mmask8(0xFF), lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
            _mm512_mask_shuffle_i64x2(lo, __mmask8(0xFF), lo, hi, _MM_SHUFFLE(3, 1, 3, 1)),
            lanes_of(sm, _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12)),
            lanes_of(sm, _mm512_setr_epi32(2, 2, 2, 2, 6, 6, 6, 6, 10, 10, 10, 10, 14, 14, 14, 14)),
            k_group_mins(sm)};
  }
  static constexpr int element(int slot) {
    const int c = slot / 64, i = 2 * (slot % 32) + c % 2;  // byte of V_(c/2)
    return 64 * (i / 16) + 32 * ((slot / 32) % 2) + 16 * (c / 2) + i % 16;
  }
  CEDAR_ALWAYS_INLINE void unit(const uint8_t*, const Header& h, int c, __m512i* w, __m512*) const {
    const __m512i v = c < 2 ? h.v0 : h.v1;
    const int e = 8 * (c % 2);
    w[0] = perm_words(e ? _mm512_srli_epi16(v, e) : v, table);
    w[1] = perm_words(_mm512_srli_epi16(v, e + 4), table);
  }
};

// Q5_K: unit c is the block's 64-value chunk c (qs[32c..32c+31]: sub-block 2c in the low nibbles,
// 2c + 1 in the high ones; bit 2c (2c + 1) of qh[l] on top), so the unit's halves are exactly the
// two sub-blocks; value dl q - ml.
struct KqQ5_K {
  static constexpr uint32_t kType = ggml::kQ5_K;
  static constexpr int kElems = 256, kBytes = 176;
  static constexpr bool kMins = true, kOneScale = true, kBlockScales = false;
  __m512i table = nibble_table(0, 32);
  __m512i shifts = words_split(0, 4);
  struct Header {
    __m512 sm, mins;
  };
  CEDAR_ALWAYS_INLINE static Header header(const uint8_t* b) {
    const __m512 sm = k_scales_mins(b);
    return {sm, k_group_mins(sm)};
  }
  static constexpr int element(int slot) { return run_element(slot); }
  CEDAR_ALWAYS_INLINE void unit(const uint8_t* b, const Header& h, int c, __m512i* w,
                                __m512* s) const {
    const uint8_t* q = b + 48 + 32 * c;
    for (int v = 0; v < 2; ++v) {
      const __m512i idx = _mm512_srlv_epi16(bytes_twice(q + 16 * v), shifts);
      const __m512i hb =
          _mm512_srlv_epi16(bytes_twice(b + 16 + 16 * v), words_split(2 * c, 2 * c + 1));
      w[v] = perm_words(_mm512_or_si512(and_words(idx, 15), _mm512_slli_epi16(and_words(hb, 1), 4)),
                        table);
    }
    s[0] = lanes_of(h.sm, idx_halves(4 * c, 4 * c + 2));
  }
};

// Q2_K: qs[32h + l] holds values 128h + 32p + l in its bit planes p = 0..3 (scale and min per 16
// values: sub-block 8h + 2p + l/16). One 64-byte load of all 64 qs bytes; a word's eight 2-bit
// codes come down by shifts of 2p (its even byte) and 8 + 2p (its odd byte) into a 4-periodic
// VPERMW table. Unit c = plane c, even and odd bytes: a vector's lane groups of four are then
// sub-blocks 2c, 2c + 1, 8 + 2c, 9 + 2c, the same in both vectors. Value dl q - ml.
struct KqQ2_K {
  static constexpr uint32_t kType = ggml::kQ2_K;
  static constexpr int kElems = 256, kBytes = 84;
  static constexpr bool kMins = true, kOneScale = true, kBlockScales = false;
  __m512i table = nibble_table(0, 4);
  struct Header {
    __m512 dl, mins;
  };
  CEDAR_ALWAYS_INLINE static Header header(const uint8_t* b) {
    const __m512i sc = _mm512_maskz_cvtepu8_epi32(
        __mmask16(0xFFFF), _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
    const auto f = [](__m512i v) { return _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), v); };
    return {_mm512_mul_ps(f(_mm512_and_si512(sc, _mm512_set1_epi32(15))),
                          _mm512_set1_ps(f16c_half(ggml::u16_at(b + 80)))),
            _mm512_mul_ps(f(_mm512_maskz_srli_epi32(__mmask16(0xFFFF), sc, 4)),
                          _mm512_set1_ps(-f16c_half(ggml::u16_at(b + 82))))};
  }
  static constexpr int element(int slot) {
    const int i = 2 * (slot % 32) + (slot / 32) % 2;  // byte of qs
    return 128 * (i / 32) + 32 * (slot / 64) + i % 32;
  }
  CEDAR_ALWAYS_INLINE void unit(const uint8_t* b, const Header& h, int c, __m512i* w,
                                __m512* s) const {
    const __m512i q = _mm512_loadu_si512(b + 16);
    w[0] = perm_words(_mm512_srli_epi16(q, 2 * c), table);
    w[1] = perm_words(_mm512_srli_epi16(q, 8 + 2 * c), table);
    const __m512i g = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 8, 8, 8, 8, 9, 9, 9, 9);
    s[0] = lanes_of(h.dl, _mm512_add_epi32(g, _mm512_set1_epi32(2 * c)));
  }
};

// Q3_K: unit c = values 64c.. of a block = half h = c/2, 2-bit planes p0 = 2(c%2) and p1 = p0 + 1
// of qs[32h..32h+31] (first half: plane p0; second: p1), the hmask bit 4h + p on top; a scale per
// 16 values (sub-block 8h + 2p + hf), so each vector has its own lane scales; value dl (q - 4 + 4
// hmask bit).
struct KqQ3_K {
  static constexpr uint32_t kType = ggml::kQ3_K;
  static constexpr int kElems = 256, kBytes = 110;
  static constexpr bool kMins = false, kOneScale = false, kBlockScales = false;
  __m512i table = nibble_table(-4, 8);
  struct Header {
    __m512 dl;
  };
  CEDAR_ALWAYS_INLINE static Header header(const uint8_t* b) {
    const uint8_t* sc = b + 96;
    const float d = f16c_half(ggml::u16_at(b + 108));
    alignas(64) float dl[16];
    for (int i = 0; i < 16; ++i) dl[i] = d * float(ggml::q3_k_scale(sc, i));
    return {_mm512_load_ps(dl)};
  }
  static constexpr int element(int slot) { return run_element(slot); }
  CEDAR_ALWAYS_INLINE void unit(const uint8_t* b, const Header& h, int c, __m512i* w,
                                __m512* s) const {
    const int hh = c / 2, p0 = 2 * (c % 2), p1 = p0 + 1;
    const uint8_t* qs = b + 32 + 32 * hh;
    const __m512i planes = words_split(2 * p0, 2 * p1);
    for (int v = 0; v < 2; ++v) {
      __m512i idx = and_words(_mm512_srlv_epi16(bytes_twice(qs + 16 * v), planes), 3);
      const __m512i hb =
          _mm512_srlv_epi16(bytes_twice(b + 16 * v), words_split(4 * hh + p0, 4 * hh + p1));
      idx = _mm512_or_si512(idx, _mm512_slli_epi16(and_words(hb, 1), 2));
      w[v] = perm_words(idx, table);
      s[v] = lanes_of(h.dl, idx_halves(8 * hh + 2 * p0 + v, 8 * hh + 2 * p1 + v));
    }
  }
};

// Q6_K: unit c = half h = c/2, quarters k0 = 2(c%2) and k1 = k0 + 1 (values 128h + 32k + l);
// q = nibble of ql | 2 bits of qh << 4, minus 32, a 64-entry table (VPERMI2W); int8 scale per 16.
struct KqQ6_K {
  static constexpr uint32_t kType = ggml::kQ6_K;
  static constexpr int kElems = 256, kBytes = 210;
  static constexpr bool kMins = false, kOneScale = false, kBlockScales = false;
  __m512i lo = nibble_table(-32, 32), hi = nibble_table(0, 32);
  struct Header {
    __m512 dl;
  };
  CEDAR_ALWAYS_INLINE static Header header(const uint8_t* b) {
    const __m512 sc = _mm512_maskz_cvtepi32_ps(
        __mmask16(0xFFFF),
        _mm512_maskz_cvtepi8_epi32(__mmask16(0xFFFF),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192))));
    return {_mm512_mul_ps(sc, _mm512_set1_ps(f16c_half(ggml::u16_at(b + 208))))};
  }
  static constexpr int element(int slot) { return run_element(slot); }
  CEDAR_ALWAYS_INLINE void unit(const uint8_t* b, const Header& h, int c, __m512i* w,
                                __m512* s) const {
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
      s[v] = lanes_of(h.dl, idx_halves(8 * hh + v + 2 * k0, 8 * hh + v + 2 * k1));
    }
  }
};

// IQ2_XXS: eight 32-value groups of 8 bytes: four grid indices (one per 8-value run: eight
// magnitudes, each 8, 25 or 43), then a u32 of four 7-bit sign-pattern indices and the group
// scale s in its top 4 bits, d (0.5 + s) / 4 (ggml::iq2_xxs). The header turns the block into
// 32-word vectors indexed by run r = 4g + k: the grid entries' magnitudes as 2-bit codes (8 ->
// 0, 25 -> 1, 43 -> 2) packed in 16 bits, looked up with four 64-entry VPERMI2W tables selected by
// the index's top two bits; the runs' 8-bit sign masks (ksigns through VPERMI2B); the scales. A
// vector j (0..7) is then position j of every run: its magnitude code shifted down into a
// 4-periodic VPERMW table, its sign bit moved to bit 15. Lanes are run pairs, so lanes 2g and
// 2g + 1 are group g in every vector: one scale vector for the block (kBlockScales). Unit c:
// positions 2c and 2c + 1.
struct KqIQ2_XXS {
  static constexpr uint32_t kType = ggml::kIQ2_XXS;
  static constexpr int kElems = 256, kBytes = 66;
  static constexpr bool kMins = false, kOneScale = false, kBlockScales = true;
  __m512i grid[8], magnitudes, ksigns[2];
  // byte indices into the 64 bytes after d: each run's grid index (word r), the two bytes
  // holding its sign index (word r) and that index's shift in them, each group's scale byte
  // (dword lanes 2g and 2g + 1)
  __m512i run_index, sign_bytes, sign_shift, scale_byte;
  KqIQ2_XXS() {
    alignas(64) uint16_t codes[256], shift[32];
    alignas(64) uint8_t ri[64] = {}, sb[64], sc[64] = {};
    for (int i = 0; i < 256; ++i) {
      codes[i] = 0;
      for (int j = 0; j < 8; ++j) {
        const int m = int(ggml::tables::kIq2xxsGrid[i] >> (8 * j)) & 255;
        codes[i] = uint16_t(codes[i] | ((m == 25 ? 1 : m == 43 ? 2 : 0) << (2 * j)));
      }
    }
    for (int t = 0; t < 8; ++t) grid[t] = _mm512_load_si512(codes + 32 * t);
    constexpr int kMagnitude[4] = {8, 25, 43, 0};  // (code 3 unused)
    alignas(64) uint16_t mag[32];
    for (int i = 0; i < 32; ++i) mag[i] = bf16_of_int(kMagnitude[i % 4]);
    magnitudes = _mm512_load_si512(mag);
    ksigns[0] = _mm512_loadu_si512(ggml::tables::kKsignsIq2xs);
    ksigns[1] = _mm512_loadu_si512(ggml::tables::kKsignsIq2xs + 64);
    for (int r = 0; r < 32; ++r) {
      const int g = r / 4, k = r % 4, first = 4 + 8 * g + 7 * k / 8;
      ri[2 * r] = uint8_t(8 * g + k);
      sb[2 * r] = uint8_t(first);
      sb[2 * r + 1] = uint8_t(first + 1);
      shift[r] = uint16_t(7 * k % 8);
    }
    for (int l = 0; l < 16; ++l) sc[4 * l] = uint8_t(7 + 8 * (l / 2));
    run_index = _mm512_loadu_si512(ri);
    sign_bytes = _mm512_loadu_si512(sb);
    sign_shift = _mm512_load_si512(shift);
    scale_byte = _mm512_loadu_si512(sc);
  }
  struct Header {
    __m512i codes, signs;
    __m512 scale0, scale1;
  };
  CEDAR_ALWAYS_INLINE Header header(const uint8_t* b) const {
    const __m512i q = _mm512_loadu_si512(b + 2);
    const __mmask64 low = 0x5555555555555555ull;  // the low byte of every word
    const __m512i idx = _mm512_maskz_permutexvar_epi8(low, run_index, q);
    const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x40)),
                    b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x80));
    const __m512i codes = _mm512_mask_blend_epi16(
        b7,
        _mm512_mask_blend_epi16(b6, _mm512_permutex2var_epi16(grid[0], idx, grid[1]),
                                _mm512_permutex2var_epi16(grid[2], idx, grid[3])),
        _mm512_mask_blend_epi16(b6, _mm512_permutex2var_epi16(grid[4], idx, grid[5]),
                                _mm512_permutex2var_epi16(grid[6], idx, grid[7])));
    const __m512i si = and_words(
        _mm512_srlv_epi16(_mm512_maskz_permutexvar_epi8(~0ull, sign_bytes, q), sign_shift), 127);
    const __m512i signs = _mm512_maskz_permutex2var_epi8(low, ksigns[0], si, ksigns[1]);
    const __m512i sc = _mm512_maskz_srli_epi32(
        __mmask16(0xFFFF), _mm512_maskz_permutexvar_epi8(0x1111111111111111ull, scale_byte, q), 4);
    // d (0.5 + s) / 4 = (0.5 + s) x (d / 4): both products exact, as the reference's
    const __m512 scale = _mm512_mul_ps(
        _mm512_add_ps(_mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), sc), _mm512_set1_ps(0.5f)),
        _mm512_set1_ps(f16c_half(ggml::u16_at(b)) * 0.25f));
    return {codes, signs, scale, scale};
  }
  static constexpr int element(int slot) {
    return 8 * (slot % 32) + 2 * (slot / 64) + (slot / 32) % 2;
  }
  CEDAR_ALWAYS_INLINE void unit(const uint8_t*, const Header& h, int c, __m512i* w, __m512*) const {
    for (int v = 0; v < 2; ++v) {
      const int j = 2 * c + v;
      const __m512i mag = perm_words(j ? _mm512_srli_epi16(h.codes, 2 * j) : h.codes, magnitudes);
      // mag ^ (sign bit j moved to bit 15)
      w[v] = _mm512_ternarylogic_epi32(mag, _mm512_slli_epi16(h.signs, 15 - j),
                                       _mm512_set1_epi16(short(0x8000)), 0x78);
    }
  }
};

// IQ1_S / IQ1_M: 32 runs of eight values g + delta (g in {-1, 0, 1} from a 2,048-entry grid,
// delta = +-1/8 per group or half-group) times an odd 3-bit scale. The grid entries' values as
// 2-bit codes (g + 1) packed in 16 bits: 4 KiB, too large for register tables, so the block's 32
// 11-bit indices gather them (two VPGATHERDD of 16). Vector j is position j of every run, as
// IQ2_XXS: the code and the run's delta sign (bit 2) index an 8-periodic VPERMW table of the six
// values g + delta (each exact in bf16). Lanes are run pairs: lane l holds runs 2l and 2l + 1, of
// group l/2 and (IQ1_M) half-group l. One scale vector per block (kBlockScales). The headers
// give each run's index and sign in word r = 4g + k and the lanes' scales.
struct Iq1Grid {
  alignas(64) uint16_t codes[2048 + 32];  // (a gather reads 4 bytes at entry 2047)
  __m512i values, low_words;
  Iq1Grid() {
    for (int i = 0; i < 2048 + 32; ++i) {
      codes[i] = 0;
      for (int j = 0; i < 2048 && j < 8; ++j)
        codes[i] = uint16_t(codes[i] | ((int8_t(ggml::tables::kIq1sGrid[i] >> (8 * j)) + 1) & 3)
                                           << (2 * j));
    }
    // index (sign << 2) | code: g + delta, delta = +1/8 (sign 0) or -1/8; code 3 unused
    const float v[8] = {-0.875f, 0.125f, 1.125f, 0.0f, -1.125f, -0.125f, 0.875f, 0.0f};
    alignas(64) uint16_t t[32], lw[32];
    for (int i = 0; i < 32; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &v[i % 8], 4);
      t[i] = uint16_t(bits >> 16);  // (exact: at most 4 significant bits)
      lw[i] = uint16_t(i < 16 ? 2 * i : 32 + 2 * (i - 16));
    }
    values = _mm512_load_si512(t);
    low_words = _mm512_load_si512(lw);
  }
  // 32 words of 11-bit grid indices -> their 32 packed code words
  CEDAR_ALWAYS_INLINE __m512i gather(__m512i idx) const {
    const __m512i z = _mm512_setzero_si512();
    const __m512i i0 = _mm512_maskz_cvtepu16_epi32(
        __mmask16(0xFFFF), _mm512_mask_extracti64x4_epi64(_mm256_setzero_si256(), 0xF, idx, 0));
    const __m512i i1 = _mm512_maskz_cvtepu16_epi32(
        __mmask16(0xFFFF), _mm512_mask_extracti64x4_epi64(_mm256_setzero_si256(), 0xF, idx, 1));
    const __m512i g0 = _mm512_mask_i32gather_epi32(z, __mmask16(0xFFFF), i0, codes, 2);
    const __m512i g1 = _mm512_mask_i32gather_epi32(z, __mmask16(0xFFFF), i1, codes, 2);
    return _mm512_permutex2var_epi16(g0, low_words, g1);  // each dword's low word
  }
  // position j of every run: (code j | sign) through the value table
  CEDAR_ALWAYS_INLINE __m512i position(__m512i codes, __m512i sign4, int j) const {
    const __m512i c = j ? _mm512_srli_epi16(codes, 2 * j) : codes;
    return perm_words(_mm512_ternarylogic_epi32(c, _mm512_set1_epi16(3), sign4, 0xEA), values);
  }
  // the word of run r's 11-bit index: the low byte from `low`, the 3 high bits from `high`'s low
  // bits
  static __m512i index(__m512i low, __m512i high) {
    return _mm512_ternarylogic_epi32(low, _mm512_slli_epi16(high, 8), _mm512_set1_epi16(0x700),
                                     0xF8);
  }
  // odd scales: d (2 s + 1) per dword lane of s
  static __m512 odd_scales(__m512i s, float d) {
    const __m512 f = _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), s);
    return _mm512_mul_ps(_mm512_fmadd_ps(f, _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f)),
                         _mm512_set1_ps(d));
  }
};
// byte-index vectors from a generator: byte i = f(i), or zero where f gives -1 (maskz users)
template <class F>
__m512i byte_indices(F f) {
  alignas(64) int8_t b[64];
  for (int i = 0; i < 64; ++i) b[i] = int8_t(f(i) < 0 ? 0 : f(i));
  return _mm512_load_si512(b);
}
inline __m512i word_shifts(int (*f)(int)) {
  alignas(64) uint16_t w[32];
  for (int r = 0; r < 32; ++r) w[r] = uint16_t(f(r));
  return _mm512_load_si512(w);
}

// Both IQ1 types: the element order and the units of the shared header.
struct KqIq1 : Iq1Grid {
  static constexpr int kElems = 256;
  static constexpr bool kMins = false, kOneScale = false, kBlockScales = true;
  struct Header {
    __m512i codes, sign4;
    __m512 scale0, scale1;
  };
  static constexpr int element(int slot) {
    return 8 * (slot % 32) + 2 * (slot / 64) + (slot / 32) % 2;
  }
  CEDAR_ALWAYS_INLINE void unit(const uint8_t*, const Header& h, int c, __m512i* w, __m512*) const {
    w[0] = position(h.codes, h.sign4, 2 * c);
    w[1] = position(h.codes, h.sign4, 2 * c + 1);
  }
};

// IQ1_S {d; qs[32]; qh[8] (u16)}: run r = 4g + k: index qs[r] | ((qh[g] >> 3k) & 7) << 8;
// qh[g] bits 12-14 the group's s, bit 15 its delta sign.
struct KqIQ1_S : KqIq1 {
  static constexpr uint32_t kType = ggml::kIQ1_S;
  static constexpr int kBytes = 50;
  __m512i qs = byte_indices([](int i) { return i % 2 ? -1 : 2 + i / 2; }),
          qh = byte_indices([](int i) { return 34 + 2 * (i / 8) + i % 2; }),
          shift = word_shifts([](int r) { return 3 * (r % 4); }),
          qh_lanes = byte_indices([](int i) { return i % 4 < 2 ? 34 + 2 * (i / 8) + i % 4 : -1; });
  CEDAR_ALWAYS_INLINE Header header(const uint8_t* b) const {
    const __m512i q = _mm512_maskz_loadu_epi8(~0ull >> (64 - kBytes), b);  // (not past the block)
    const __m512i h = _mm512_maskz_permutexvar_epi8(~0ull, qh, q);         // word r: qh[r / 4]
    const __m512i idx = index(_mm512_maskz_permutexvar_epi8(0x5555555555555555ull, qs, q),
                              _mm512_srlv_epi16(h, shift));
    const __m512i sign4 = and_words(_mm512_srli_epi16(h, 13), 4);
    const __m512i s =
        _mm512_and_si512(_mm512_maskz_srli_epi32(
                             __mmask16(0xFFFF),
                             _mm512_maskz_permutexvar_epi8(0x3333333333333333ull, qh_lanes, q), 12),
                         _mm512_set1_epi32(7));
    const __m512 scale = odd_scales(s, f16c_half(ggml::u16_at(b)));
    return {gather(idx), sign4, scale, scale};
  }
};

// IQ1_M {qs[32]; qh[16]; scales[8] (4 u16)}: run r = 4g + k: nibble k%2 of qh[2g + k/2] holds
// the index's 3 high bits and (bit 3) the delta sign; half-group 2g + k/2 has s = bits 6(g%2) +
// 3(k/2) of scale word g/2; d is the four scale words' top nibbles.
struct KqIQ1_M : KqIq1 {
  static constexpr uint32_t kType = ggml::kIQ1_M;
  static constexpr int kBytes = 56;
  __m512i qs = byte_indices([](int i) { return i % 2 ? -1 : i / 2; }),
          qh = byte_indices([](int i) { return i % 2 ? -1 : 32 + 2 * (i / 8) + (i / 2) % 4 / 2; }),
          nibble = word_shifts([](int r) { return 4 * (r % 2); }),
          sc_lanes = byte_indices([](int i) { return i % 4 < 2 ? 48 + 2 * (i / 16) + i % 4 : -1; });
  __m512i sc_shift = _mm512_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9);
  CEDAR_ALWAYS_INLINE Header header(const uint8_t* b) const {
    const __m512i q = _mm512_maskz_loadu_epi8(~0ull >> (64 - kBytes), b);
    const __m512i nib =
        _mm512_srlv_epi16(_mm512_maskz_permutexvar_epi8(0x5555555555555555ull, qh, q), nibble);
    const __m512i idx = index(_mm512_maskz_permutexvar_epi8(0x5555555555555555ull, qs, q), nib);
    const __m512i sign4 = and_words(_mm512_srli_epi16(nib, 1), 4);
    const __m512i s = _mm512_and_si512(
        _mm512_maskz_srlv_epi32(__mmask16(0xFFFF),
                                _mm512_maskz_permutexvar_epi8(0x3333333333333333ull, sc_lanes, q),
                                sc_shift),
        _mm512_set1_epi32(7));
    uint16_t sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = ggml::u16_at(b + 48 + 2 * i);
    const float d = f16c_half(uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                       ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
    const __m512 scale = odd_scales(s, d);
    return {gather(idx), sign4, scale, scale};
  }
};

}  // namespace
}  // namespace cedar::kernels::fast
