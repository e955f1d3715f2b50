// The avx512 table's decode step over GGUF block weights (Q8_0, Q4_0, Q2_K..Q6_K): up to four
// activation rows against each weight row, the row's values decoded sixteen at a time straight
// into registers instead of through the buffer family's L1 chunk (gemm_blocks.h), with 16-lane
// decoders instead of its eight-lane ones.
//
// Arithmetic: exactly the buffer family's. Vector v of a block holds its values 16v..16v+15,
// each computed by the same operation on the same operands as the eight-lane decoder (d x q, or
// one fmsub dl x q - ml), and goes into accumulator v % 2 by fma(x, w, acc) in K order, as the
// buffer family's vector t into t % 2 (its chunks start at even vectors); then the same hsum and
// bf16 rounding. So a row's result does not depend on which path computed it (batch invariance,
// tests/unit/kernels/block_gemm_test.cpp).
//
// Included only by the avx512 table's translation unit, inside an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/gemm_blocks.h"
#include "kernels/fast/vec512.h"
#include "kernels/ggml_blocks.h"
#include "kernels/kernel_table.h"

namespace cedar::kernels::fast {
namespace {

// sixteen bytes as sixteen int32 lanes
inline __m512i u8x16i(const uint8_t* p) {
  return _mm512_maskz_cvtepu8_epi32(__mmask16(0xFFFF),
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512 to_ps16(__m512i v) { return _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), v); }
inline __m512i srli16(__m512i v, int n) { return _mm512_maskz_srli_epi32(__mmask16(0xFFFF), v, n); }
inline __m512i and16(__m512i v, int m) { return _mm512_and_si512(v, _mm512_set1_epi32(m)); }

// A block's scales, read once per block; vec(b, h, v) is vector v's sixteen values.
template <uint32_t T>
struct Dec16;

template <>
struct Dec16<ggml::kQ8_0> {
  struct Header {
    float d;
  };
  static Header header(const uint8_t* b) { return {f16c_half(ggml::u16_at(b))}; }
  static __m512 vec(const uint8_t* b, const Header& h, int v) {
    const __m512i q = _mm512_maskz_cvtepi8_epi32(
        __mmask16(0xFFFF), _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * v)));
    return _mm512_mul_ps(_mm512_set1_ps(h.d), to_ps16(q));
  }
};

template <>
struct Dec16<ggml::kQ4_0> {
  struct Header {
    float d;
  };
  static Header header(const uint8_t* b) { return {f16c_half(ggml::u16_at(b))}; }
  // v 0: the low nibbles of qs[0..15] (values 0-15), v 1: the high ones (16-31); minus 8
  static __m512 vec(const uint8_t* b, const Header& h, int v) {
    const __m512i raw = u8x16i(b + 2);
    const __m512i q = _mm512_sub_epi32(v ? srli16(raw, 4) : and16(raw, 15), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_set1_ps(h.d), to_ps16(q));
  }
};

template <>
struct Dec16<ggml::kQ2_K> {
  struct Header {
    float d, dmin;
  };
  static Header header(const uint8_t* b) {
    return {f16c_half(ggml::u16_at(b + 80)), f16c_half(ggml::u16_at(b + 82))};
  }
  // values 128h + 32p + 16hf + l: bit plane p of qs[32h + 16hf + l], scale byte 8h + 2p + hf
  static __m512 vec(const uint8_t* b, const Header& hd, int v) {
    const int h = v / 8, p = (v / 2) % 4, hf = v % 2;
    const uint8_t s = b[8 * h + 2 * p + hf];
    const __m512i q = and16(srli16(u8x16i(b + 16 + 32 * h + 16 * hf), 2 * p), 3);
    return _mm512_fmsub_ps(_mm512_set1_ps(hd.d * float(s & 15)), to_ps16(q),
                           _mm512_set1_ps(hd.dmin * float(s >> 4)));
  }
};

template <>
struct Dec16<ggml::kQ4_K> {
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
  // values 64c + 32hf + 16i + l: the low (hf 0) or high nibble of qs[32c + 16i + l]
  static __m512 vec(const uint8_t* b, const Header& h, int v) {
    const int c = v / 4, hf = (v / 2) % 2, i = v % 2;
    const __m512i raw = u8x16i(b + 16 + 32 * c + 16 * i);
    const __m512i q = hf ? srli16(raw, 4) : and16(raw, 15);
    return _mm512_fmsub_ps(_mm512_set1_ps(h.dl[2 * c + hf]), to_ps16(q),
                           _mm512_set1_ps(h.ml[2 * c + hf]));
  }
};

template <>
struct Dec16<ggml::kQ3_K> {
  struct Header {
    float dl[16];
  };
  static Header header(const uint8_t* b) {
    Header h;
    const uint8_t* s = b + 96;
    const float d = f16c_half(ggml::u16_at(b + 108));
    for (int i = 0; i < 16; ++i) h.dl[i] = d * float(ggml::q3_k_scale(s, i));
    return h;
  }
  // values 128h + 32p + 16hf + l: bit plane p of qs[32h + 16hf + l] minus 4 unless bit 4h + p
  // of hmask[16hf + l]; scale 8h + 2p + hf
  static __m512 vec(const uint8_t* b, const Header& hd, int v) {
    const int h = v / 8, p = (v / 2) % 4, hf = v % 2;
    const __m512i q2 = and16(srli16(u8x16i(b + 32 + 32 * h + 16 * hf), 2 * p), 3);
    const __m512i hi = and16(srli16(u8x16i(b + 16 * hf), 4 * h + p), 1);
    const __m512i q = _mm512_sub_epi32(
        q2,
        _mm512_maskz_slli_epi32(__mmask16(0xFFFF), _mm512_xor_si512(hi, _mm512_set1_epi32(1)), 2));
    return _mm512_mul_ps(_mm512_set1_ps(hd.dl[8 * h + 2 * p + hf]), to_ps16(q));
  }
};

template <>
struct Dec16<ggml::kQ5_K> {
  using Header = Dec16<ggml::kQ4_K>::Header;
  static Header header(const uint8_t* b) { return Dec16<ggml::kQ4_K>::header(b); }
  // Q4_K's nibbles (qs at b + 48) with bit 2c + hf of qh[16i + l] on top
  static __m512 vec(const uint8_t* b, const Header& h, int v) {
    const int c = v / 4, hf = (v / 2) % 2, i = v % 2;
    const __m512i raw = u8x16i(b + 48 + 32 * c + 16 * i);
    const __m512i bit = and16(srli16(u8x16i(b + 16 + 16 * i), 2 * c + hf), 1);
    const __m512i q = _mm512_add_epi32(hf ? srli16(raw, 4) : and16(raw, 15),
                                       _mm512_maskz_slli_epi32(__mmask16(0xFFFF), bit, 4));
    return _mm512_fmsub_ps(_mm512_set1_ps(h.dl[2 * c + hf]), to_ps16(q),
                           _mm512_set1_ps(h.ml[2 * c + hf]));
  }
};

template <>
struct Dec16<ggml::kQ6_K> {
  struct Header {
    float d;
  };
  static Header header(const uint8_t* b) { return {f16c_half(ggml::u16_at(b + 208))}; }
  // values 128h + 32k + 16s + l: nibble k/2 of ql[64h + 32(k%2) + 16s + l], bits 2k of
  // qh[32h + 16s + l] on top, minus 32; scale sc[8h + 2k + s]
  static __m512 vec(const uint8_t* b, const Header& hd, int v) {
    const int h = v / 8, k = (v / 2) % 4, s = v % 2;
    const __m512i lo = u8x16i(b + 64 * h + 32 * (k % 2) + 16 * s);
    const __m512i nib = k / 2 ? srli16(lo, 4) : and16(lo, 15);
    const __m512i hi = and16(srli16(u8x16i(b + 128 + 32 * h + 16 * s), 2 * k), 3);
    const __m512i q =
        _mm512_sub_epi32(_mm512_or_si512(nib, _mm512_maskz_slli_epi32(__mmask16(0xFFFF), hi, 4)),
                         _mm512_set1_epi32(32));
    const float sc = float(int8_t(b[192 + 8 * h + 2 * k + s]));
    return _mm512_mul_ps(_mm512_set1_ps(hd.d * sc), to_ps16(q));
  }
};

// R activation rows against weight row `wr`: the bf16-rounded outputs out[r * ldo]
template <uint32_t T, int R>
void gemv_blocks16_rows(const float* act, int K, const uint8_t* wr, float* out, int ldo) {
  using D = Dec16<T>;
  constexpr int kElems = ggml::Block<T>::elems, kBytes = ggml::Block<T>::bytes;
  __m512 acc[R][2];
  CEDAR_UNROLL for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int b = 0; b < K / kElems; ++b) {
    const uint8_t* bp = wr + size_t(b) * kBytes;
    const typename D::Header h = D::header(bp);
    CEDAR_UNROLL for (int v = 0; v < kElems / 16; ++v) {
      const __m512 w = D::vec(bp, h, v);
      CEDAR_UNROLL for (int r = 0; r < R; ++r) {
        const float* x = act + size_t(r) * size_t(K) + size_t(b) * kElems + 16 * v;
        acc[r][v % 2] = _mm512_fmadd_ps(_mm512_loadu_ps(x), w, acc[r][v % 2]);
      }
    }
  }
  CEDAR_UNROLL for (int r = 0; r < R; ++r) out[size_t(r) * size_t(ldo)] =
      bf16_round(V16::hsum(_mm512_add_ps(acc[r][0], acc[r][1])));
}

// Up to kRows16 rows: the fused path; more: the buffer family, whose panel of decoded values the
// rows share.
constexpr int kRows16 = 4;
template <uint32_t T>
void gemm_blocks16(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0,
                   int n1, float* out, int ldo) {
  if (M > kRows16) return gemm_blocks<V16, T>(act, M, K, w, ws, n0, n1, out, ldo);
  const size_t row_bytes = size_t(K / ggml::Block<T>::elems) * ggml::Block<T>::bytes;
  for (int n = n0; n < n1; ++n) {
    const uint8_t* wr = w + size_t(n) * row_bytes;
    float* o = out + size_t(n - n0);
    switch (M) {
      case 1:
        gemv_blocks16_rows<T, 1>(act, K, wr, o, ldo);
        break;
      case 2:
        gemv_blocks16_rows<T, 2>(act, K, wr, o, ldo);
        break;
      case 3:
        gemv_blocks16_rows<T, 3>(act, K, wr, o, ldo);
        break;
      default:
        gemv_blocks16_rows<T, 4>(act, K, wr, o, ldo);
    }
  }
}

// The buffer families, with the fused decode step for the formats above.
void fill_block_families16(KernelTable& k) {
  fill_block_families<V16>(k);
  const auto fused = [&k](WeightFormat f, decltype(GemmKernels::gemm) gemm) {
    k.gemm[int(f)] = {act_floats_blocks, prepare_blocks, gemm, 1};
  };
  fused(WeightFormat::kQ8_0, gemm_blocks16<ggml::kQ8_0>);
  fused(WeightFormat::kQ4_0, gemm_blocks16<ggml::kQ4_0>);
  fused(WeightFormat::kQ2_K, gemm_blocks16<ggml::kQ2_K>);
  fused(WeightFormat::kQ3_K, gemm_blocks16<ggml::kQ3_K>);
  fused(WeightFormat::kQ4_K, gemm_blocks16<ggml::kQ4_K>);
  fused(WeightFormat::kQ5_K, gemm_blocks16<ggml::kQ5_K>);
  fused(WeightFormat::kQ6_K, gemm_blocks16<ggml::kQ6_K>);
}

}  // namespace
}  // namespace cedar::kernels::fast
