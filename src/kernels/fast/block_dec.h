// One vector decoder per GGUF block format (Q8_0, Q4_0, Q2_K..Q6_K), written once over the
// lanes of a vector layer: BlockDec<V, T>::vec(b, header, v) is the block's values N v ..
// N v + N - 1 (K order, N = V::N: 8 or 16), each computed by the same operation on the same
// operands as the scalar definition in kernels/ggml_blocks.h (d x q, or one fmsub dl x q - ml,
// with dl and ml the scalar products), so every width gives the same values. Used by the buffer
// families (gemm_blocks.h: stored into the L1 chunk, eight lanes) and the fused decode steps
// (gemm_blocks_fused.h: straight into FMAs, eight or sixteen lanes): the paths of a table
// compute each output from the same values in the same order (batch invariance).
//
// Included only by the fast tables' translation units, inside an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/vec256.h"
#include "kernels/ggml_blocks.h"
#if defined(__AVX512F__)
#include "kernels/fast/vec512.h"
#endif

namespace cedar::kernels::fast {
namespace {

inline float f16c_half(uint16_t h) { return _cvtsh_ss(h); }

// The integer side of a vector layer: N bytes widened to N int32 lanes, shifts, masks, the
// conversion to fp32.
template <class V>
struct BlockLanes;

template <>
struct BlockLanes<V8> {
  using F = __m256;
  using I = __m256i;
  static constexpr int N = 8;
  static I u8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I i8(const uint8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static F to_ps(I v) { return _mm256_cvtepi32_ps(v); }
  static I srl(I v, int n) { return _mm256_srli_epi32(v, n); }
  static I sll(I v, int n) { return _mm256_slli_epi32(v, n); }
  static I mask(I v, int m) { return _mm256_and_si256(v, _mm256_set1_epi32(m)); }
  static I add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub(I a, int b) { return _mm256_sub_epi32(a, _mm256_set1_epi32(b)); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static I xor_(I a, int b) { return _mm256_xor_si256(a, _mm256_set1_epi32(b)); }
  static F mul(float s, I q) { return _mm256_mul_ps(_mm256_set1_ps(s), to_ps(q)); }
  static F fmsub(float s, I q, float m) {
    return _mm256_fmsub_ps(_mm256_set1_ps(s), to_ps(q), _mm256_set1_ps(m));
  }
};

#if defined(__AVX512F__)
// (GCC 12 warns about the unmasked forms of some AVX-512 intrinsics: the masked ones with every
// lane selected compute the same)
template <>
struct BlockLanes<V16> {
  using F = __m512;
  using I = __m512i;
  static constexpr int N = 16;
  static constexpr __mmask16 kAll = 0xFFFF;
  static I u8(const uint8_t* p) {
    return _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I i8(const uint8_t* p) {
    return _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F to_ps(I v) { return _mm512_maskz_cvtepi32_ps(kAll, v); }
  static I srl(I v, int n) { return _mm512_maskz_srli_epi32(kAll, v, unsigned(n)); }
  static I sll(I v, int n) { return _mm512_maskz_slli_epi32(kAll, v, unsigned(n)); }
  static I mask(I v, int m) { return _mm512_and_si512(v, _mm512_set1_epi32(m)); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub(I a, int b) { return _mm512_sub_epi32(a, _mm512_set1_epi32(b)); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static I xor_(I a, int b) { return _mm512_xor_si512(a, _mm512_set1_epi32(b)); }
  static F mul(float s, I q) { return _mm512_mul_ps(_mm512_set1_ps(s), to_ps(q)); }
  static F fmsub(float s, I q, float m) {
    return _mm512_fmsub_ps(_mm512_set1_ps(s), to_ps(q), _mm512_set1_ps(m));
  }
};
#endif

// A block's scales are read once (header(b)); vec(b, h, v) is vector v. j0 = N v is the vector's
// first value; every format's runs of 16 values share their bytes' positions, so N = 8 or 16
// lanes always come from one run.
template <class V, uint32_t T>
struct BlockDec;

// ref: ggml-common.h block_q8_0 {d; qs[32]}
template <class V>
struct BlockDec<V, ggml::kQ8_0> {
  using L = BlockLanes<V>;
  struct Header {
    float d;
  };
  static Header header(const uint8_t* b) { return {f16c_half(ggml::u16_at(b))}; }
  static typename L::F vec(const uint8_t* b, const Header& h, int v) {
    return L::mul(h.d, L::i8(b + 2 + L::N * v));
  }
};

// block_q4_0 {d; qs[16]}: value j < 16 the low nibble of qs[j], j + 16 its high nibble; minus 8
template <class V>
struct BlockDec<V, ggml::kQ4_0> {
  using L = BlockLanes<V>;
  using Header = typename BlockDec<V, ggml::kQ8_0>::Header;
  static Header header(const uint8_t* b) { return {f16c_half(ggml::u16_at(b))}; }
  static typename L::F vec(const uint8_t* b, const Header& h, int v) {
    const int j0 = L::N * v;
    const auto raw = L::u8(b + 2 + j0 % 16);
    return L::mul(h.d, L::sub(j0 < 16 ? L::mask(raw, 15) : L::srl(raw, 4), 8));
  }
};

// block_q2_K {scales[16]; qs[64]; d; dmin}: values 128h + 32p + 16hf + l are bit plane p of
// qs[32h + 16hf + l], scale byte 8h + 2p + hf (low nibble x d, high nibble x dmin)
template <class V>
struct BlockDec<V, ggml::kQ2_K> {
  using L = BlockLanes<V>;
  struct Header {
    float d, dmin;
  };
  static Header header(const uint8_t* b) {
    return {f16c_half(ggml::u16_at(b + 80)), f16c_half(ggml::u16_at(b + 82))};
  }
  static typename L::F vec(const uint8_t* b, const Header& hd, int v) {
    const int j0 = L::N * v, h = j0 / 128, p = (j0 / 32) % 4, hf = (j0 / 16) % 2, l0 = j0 % 16;
    const uint8_t s = b[8 * h + 2 * p + hf];
    const auto q = L::mask(L::srl(L::u8(b + 16 + 32 * h + 16 * hf + l0), 2 * p), 3);
    return L::fmsub(hd.d * float(s & 15), q, hd.dmin * float(s >> 4));
  }
};

// block_q3_K {hmask[32]; qs[64]; scales[12]; d}: values 128h + 32p + 16hf + l are bit plane p of
// qs[32h + 16hf + l] minus 4 unless bit 4h + p of hmask[16hf + l]; scale 8h + 2p + hf
template <class V>
struct BlockDec<V, ggml::kQ3_K> {
  using L = BlockLanes<V>;
  struct Header {
    float dl[16];
  };
  static Header header(const uint8_t* b) {
    Header h;
    const float d = f16c_half(ggml::u16_at(b + 108));
    for (int i = 0; i < 16; ++i) h.dl[i] = d * float(ggml::q3_k_scale(b + 96, i));
    return h;
  }
  static typename L::F vec(const uint8_t* b, const Header& hd, int v) {
    const int j0 = L::N * v, h = j0 / 128, p = (j0 / 32) % 4, hf = (j0 / 16) % 2, l0 = j0 % 16;
    const auto q2 = L::mask(L::srl(L::u8(b + 32 + 32 * h + 16 * hf + l0), 2 * p), 3);
    const auto hi = L::mask(L::srl(L::u8(b + 16 * hf + l0), 4 * h + p), 1);
    // q2 - (hi ? 0 : 4) = q2 - 4 * (1 - hi)
    return L::mul(hd.dl[8 * h + 2 * p + hf], L::sub(q2, L::sll(L::xor_(hi, 1), 2)));
  }
};

// block_q4_K {d; dmin; scales[12]; qs[128]} (kFive: block_q5_K with qh[32] before qs): values
// 64c + 32hf + 16i + l are the low (hf 0) or high nibble of qs[32c + 16i + l] (Q5_K: bit 2c + hf
// of qh[16i + l] on top); scale and min 2c + hf
template <class V, bool kFive>
struct BlockDecQ45K {
  using L = BlockLanes<V>;
  struct Header {
    float dl[8], ml[8];
  };
  static Header header(const uint8_t* b) {
    Header h;
    const float d = f16c_half(ggml::u16_at(b)), dmin = f16c_half(ggml::u16_at(b + 2));
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      ggml::k_scale_min(b + 4, j, &sc, &m);
      h.dl[j] = d * float(sc);
      h.ml[j] = dmin * float(m);
    }
    return h;
  }
  static typename L::F vec(const uint8_t* b, const Header& h, int v) {
    const int j0 = L::N * v, c = j0 / 64, hf = (j0 / 32) % 2, i = (j0 / 16) % 2, l0 = j0 % 16;
    const auto raw = L::u8(b + (kFive ? 48 : 16) + 32 * c + 16 * i + l0);
    auto q = hf ? L::srl(raw, 4) : L::mask(raw, 15);
    if constexpr (kFive)
      q = L::add(q, L::sll(L::mask(L::srl(L::u8(b + 16 + 16 * i + l0), 2 * c + hf), 1), 4));
    return L::fmsub(h.dl[2 * c + hf], q, h.ml[2 * c + hf]);
  }
};
template <class V>
struct BlockDec<V, ggml::kQ4_K> : BlockDecQ45K<V, false> {};
template <class V>
struct BlockDec<V, ggml::kQ5_K> : BlockDecQ45K<V, true> {};

// block_q6_K {ql[128]; qh[64]; scales[16]; d}: values 128h + 32k + 16s + l are nibble k/2 of
// ql[64h + 32(k%2) + 16s + l] with bits 2k of qh[32h + 16s + l] on top, minus 32; scale
// sc[8h + 2k + s]
template <class V>
struct BlockDec<V, ggml::kQ6_K> {
  using L = BlockLanes<V>;
  using Header = typename BlockDec<V, ggml::kQ8_0>::Header;
  static Header header(const uint8_t* b) { return {f16c_half(ggml::u16_at(b + 208))}; }
  static typename L::F vec(const uint8_t* b, const Header& hd, int v) {
    const int j0 = L::N * v, h = j0 / 128, k = (j0 / 32) % 4, s = (j0 / 16) % 2, l0 = j0 % 16;
    const auto lo = L::u8(b + 64 * h + 32 * (k % 2) + 16 * s + l0);
    const auto nib = k / 2 ? L::srl(lo, 4) : L::mask(lo, 15);
    const auto hi = L::mask(L::srl(L::u8(b + 128 + 32 * h + 16 * s + l0), 2 * k), 3);
    const float sc = float(int8_t(b[192 + 8 * h + 2 * k + s]));
    return L::mul(hd.d * sc, L::sub(L::or_(nib, L::sll(hi, 4)), 32));
  }
};

// The formats BlockDec covers (the others keep their own decoders).
template <uint32_t T>
constexpr bool kHasBlockDec =
    T == ggml::kQ8_0 || T == ggml::kQ4_0 || T == ggml::kQ2_K || T == ggml::kQ3_K ||
    T == ggml::kQ4_K || T == ggml::kQ5_K || T == ggml::kQ6_K;

}  // namespace
}  // namespace cedar::kernels::fast
