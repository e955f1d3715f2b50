// The fast GEMM families over weights stored as ggml blocks (WeightFormat kQ8_0 .. kIQ1_M: GGUF
// files computed in place; docs/NUMERICS.md "GGUF weights in place"), over a vector layer V (V8 or
// V16).
//
// prepare(): the bit-exact act_quant, then each value times its block's scale (exact), in K
// order. gemm(): each weight row is decoded by the format's definition (kernels/ggml_blocks.h,
// the reference's decoder, so the same values) 2,048 values at a time into an L1 buffer, and
// every activation row of the call runs its FMAs over it (four rows per weight vector load):
// output (m, n) is
// fma(x[k..k+N), w[k..k+N), acc[t % 2]) over the K vectors t in order, the two accumulators added
// at the end, then V::hsum's fixed tree and bf16 rounding. The same operations whatever M and the
// column range, so results are batch-invariant; they differ from the reference (per 32-block
// sums rounded once) only in the order and rounding of the sums.
// The block decoders are eight-lane AVX2 versions of the scalar definitions (the same values). Up
// to four rows, the avx2 and avx512 tables run the fused decode step instead
// (gemm_blocks_fused.h: the same decoders, the same FMAs in the same order, no L1 chunk).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/block_dec.h"
#include "kernels/fast/gemm.h"
#include "kernels/fast/quant.h"
#include "kernels/fast/vmath.h"
#include "kernels/ggml_blocks.h"
#include "kernels/kernel_table.h"

namespace cedar::kernels::fast {
namespace {

int act_floats_blocks(int K) { return K; }

// act_quant each row, then store q * s (exact) in K order
void prepare_blocks(const float* x, int rows, int K, float* act) {
  uint8_t codes[256], scales[8];
  for (int m = 0; m < rows; ++m)
    for (int k0 = 0; k0 < K; k0 += 256) {
      const int n = K - k0 < 256 ? K - k0 : 256;
      act_quant(x + size_t(m) * size_t(K) + size_t(k0), n, codes, scales);
      float* a = act + size_t(m) * size_t(K) + size_t(k0);
      for (int i = 0; i < n; ++i) a[i] = e4m3_f32(codes[i]) * ue8m0_f32(scales[i / 32]);
    }
}

// Vector decoders (AVX2 + F16C, which every fast table has): the same values as the scalar
// definitions in ggml_blocks.h, eight at a time -- fast/block_dec.h for Q8_0, Q4_0 and the
// K-quants, the IQ grids here. Every value is d x small integers (exact) or one
// product/difference of exact terms, so the instruction order cannot change a bit (an FMA of an
// exact product rounds once, as the scalar subtraction does).

inline __m256 to_ps(__m256i v) { return _mm256_cvtepi32_ps(v); }

// IQ2_XXS: a run's grid entry (8 magnitude bytes) widened to 8 lanes, times the group scale; the
// lanes whose sign bit is set negated (an exact sign flip, as the scalar's conditional minus)
inline void dec_iq2_xxs(const uint8_t* b, float* y) {
  const float d = f16c_half(ggml::u16_at(b));
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 minus = _mm256_set1_ps(-0.0f);
  for (int g = 0; g < 8; ++g) {
    uint32_t idx, aux;
    std::memcpy(&idx, b + 2 + 8 * g, 4);
    std::memcpy(&aux, b + 6 + 8 * g, 4);
    const __m256 dg = _mm256_set1_ps(d * (0.5f + float(aux >> 28)) * 0.25f);
    for (int run = 0; run < 4; ++run) {
      const uint64_t grid = ggml::tables::kIq2xxsGrid[(idx >> (8 * run)) & 255];
      const __m256 m = to_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(grid))));
      const __m256i signs = _mm256_set1_epi32(ggml::tables::kKsignsIq2xs[(aux >> (7 * run)) & 127]);
      const __m256 neg = _mm256_castsi256_ps(
          _mm256_cmpeq_epi32(_mm256_and_si256(signs, bit), bit));  // all ones where negative
      _mm256_store_ps(y + 32 * g + 8 * run,
                      _mm256_xor_ps(_mm256_mul_ps(dg, m), _mm256_and_ps(neg, minus)));
    }
  }
}

// IQ1_S / IQ1_M: a run's grid entry (8 int8 in {-1, 0, 1}) plus its +-1/8, times its scale
inline void iq1_run_vec(uint32_t index, float scale, bool minus, float* y) {
  const uint64_t grid = ggml::tables::kIq1sGrid[index];
  const __m256 g = to_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(int64_t(grid))));
  const __m256 delta = _mm256_set1_ps(minus ? -ggml::kIq1Delta : ggml::kIq1Delta);
  _mm256_store_ps(y, _mm256_mul_ps(_mm256_set1_ps(scale), _mm256_add_ps(g, delta)));
}
inline void dec_iq1_s(const uint8_t* b, float* y) {
  ggml::iq1_s_runs(b, y, f16c_half, iq1_run_vec);
}
inline void dec_iq1_m(const uint8_t* b, float* y) {
  ggml::iq1_m_runs(b, y, f16c_half, iq1_run_vec);
}

template <uint32_t T>
void decode_block_vec(const uint8_t* b, float* y) {
  if constexpr (kHasBlockDec<T>) {
    using D = BlockDec<V8, T>;
    const typename D::Header h = D::header(b);
    for (int v = 0; v < ggml::Block<T>::elems / 8; ++v) _mm256_store_ps(y + 8 * v, D::vec(b, h, v));
  }
  if constexpr (T == ggml::kIQ2_XXS) dec_iq2_xxs(b, y);
  if constexpr (T == ggml::kIQ1_S) dec_iq1_s(b, y);
  if constexpr (T == ggml::kIQ1_M) dec_iq1_m(b, y);
  if constexpr (T == ggml::kQ5_0) ggml::decode_block<T>(b, y, f16c_half);  // the scalar definition
}

// Rows [m, m + R) of a row block over `len` decoded weight values (a chunk of the row): R rows
// share each weight vector load, their accumulators in registers for the chunk. Vector t of a row
// goes into accumulator t % 2 (chunks start at even vectors), whatever R.
template <class V, int R>
inline void rows_fma(const float* xc, int K, int m, const float* wc, int len,
                     typename V::F (*acc)[2]) {
  using F = typename V::F;
  F a[R][2];
  for (int r = 0; r < R; ++r) {
    a[r][0] = acc[m + r][0];
    a[r][1] = acc[m + r][1];
  }
  for (int k = 0; k < len; k += 2 * V::N) {
    const F w0 = V::load(wc + k), w1 = V::load(wc + k + V::N);
    for (int r = 0; r < R; ++r) {
      const float* x = xc + size_t(m + r) * size_t(K) + k;
      a[r][0] = V::fma(V::load(x), w0, a[r][0]);
      a[r][1] = V::fma(V::load(x + V::N), w1, a[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    acc[m + r][0] = a[r][0];
    acc[m + r][1] = a[r][1];
  }
}

template <class V, uint32_t T>
void gemm_blocks(const float* act, int M, int K, const uint8_t* w, const uint8_t*, int n0, int n1,
                 float* out, int ldo) {
  using F = typename V::F;
  constexpr int kElems = ggml::Block<T>::elems, kBytes = ggml::Block<T>::bytes;
  constexpr int kRowBlock = 64;  // activation rows whose accumulators live on the stack
  constexpr int kRows = 4;       // rows sharing each weight vector load
  constexpr int kChunk = 2048;   // weight values decoded at a time (8 KiB: stays in L1)
  static_assert(kChunk % 256 == 0);
  const size_t row_bytes = size_t(K / kElems) * kBytes;
  alignas(64) float wc[kChunk];
  F acc[kRowBlock][2];
  for (int n = n0; n < n1; ++n) {
    const uint8_t* wr = w + size_t(n) * row_bytes;
    for (int m0 = 0; m0 < M; m0 += kRowBlock) {
      const int mb = M - m0 < kRowBlock ? M - m0 : kRowBlock;
      for (int m = 0; m < mb; ++m) acc[m][0] = acc[m][1] = V::zero();
      for (int k0 = 0; k0 < K; k0 += kChunk) {
        const int len = K - k0 < kChunk ? K - k0 : kChunk;
        for (int b = 0; b < len / kElems; ++b)
          decode_block_vec<T>(wr + size_t(k0 / kElems + b) * kBytes, wc + b * kElems);
        const float* xc = act + size_t(m0) * size_t(K) + size_t(k0);
        int m = 0;
        for (; m + kRows <= mb; m += kRows) rows_fma<V, kRows>(xc, K, m, wc, len, acc);
        for (; m < mb; ++m) rows_fma<V, 1>(xc, K, m, wc, len, acc);
      }
      for (int m = 0; m < mb; ++m)
        out[size_t(m0 + m) * size_t(ldo) + size_t(n - n0)] =
            bf16_round(V::hsum(V::add(acc[m][0], acc[m][1])));
    }
  }
}

template <class V, uint32_t T>
GemmKernels block_family() {
  return {act_floats_blocks, prepare_blocks, gemm_blocks<V, T>, 1};
}

// Every block format's family into a table (MXFP4 has the FP4 families: fast/gemm.h).
template <class V>
void fill_block_families(KernelTable& k) {
  for (int f = int(WeightFormat::kQ8_0); f < int(WeightFormat::kMXFP4); ++f)
    ggml::with_block_type(ggml_type_of(WeightFormat(f)), [&](auto t) {
      constexpr uint32_t T = decltype(t)::value;
      if constexpr (T != ggml::kMXFP4) k.gemm[f] = block_family<V, T>();
    });
}

}  // namespace
}  // namespace cedar::kernels::fast
