// The decode step over GGUF block weights (Q8_0, Q4_0, Q2_K..Q6_K) in the avx2 and avx512 tables:
// up to four activation rows against each weight row, the row's values decoded V::N at a time
// (fast/block_dec.h) straight into registers instead of through the buffer family's L1 chunk
// (gemm_blocks.h).
//
// Arithmetic: exactly the buffer family's. Vector v of a block holds its values N v .. N v + N - 1,
// the same values as the buffer's decoders give (the same decoder at another width: each value is
// one operation on the same operands), and goes into accumulator v % 2 by fma(x, w, acc) in K
// order, as the buffer family's vector t into t % 2 (a block is an even number of vectors, and the
// buffer's chunks start at even vectors); then the same hsum and bf16 rounding. So a row's result
// does not depend on which path computed it (batch invariance, block_gemm_test.cpp).
//
// Included only by the avx2 and avx512 tables' translation units, inside an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/block_dec.h"
#include "kernels/fast/gemm_blocks.h"
#include "kernels/ggml_blocks.h"
#include "kernels/kernel_table.h"

namespace cedar::kernels::fast {
namespace {

// R activation rows against weight row `wr`: the bf16-rounded outputs out[r * ldo]
template <class V, uint32_t T, int R>
void gemv_blocks_fused_rows(const float* act, int K, const uint8_t* wr, float* out, int ldo) {
  using D = BlockDec<V, T>;
  using F = typename V::F;
  constexpr int kElems = ggml::Block<T>::elems, kBytes = ggml::Block<T>::bytes;
  static_assert(kElems / V::N % 2 == 0);
  F acc[R][2];
  CEDAR_UNROLL for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = V::zero();
  const uint8_t* ahead = wr + kBlockPrefetch;
  for (int b = 0; b < K / kElems; ++b) {
    const uint8_t* bp = wr + size_t(b) * kBytes;
    prefetch_lines(ahead, bp + kBlockPrefetch + kBytes);
    const typename D::Header h = D::header(bp);
    // (unrolled whole -- 32 vectors for a 256-value block at eight lanes: a loop would index the
    // accumulators and the header at run time, out of registers)
    _Pragma("GCC unroll 32") for (int v = 0; v < kElems / V::N; ++v) {
      const F w = D::vec(bp, h, v);
      CEDAR_UNROLL for (int r = 0; r < R; ++r) {
        const float* x = act + size_t(r) * size_t(K) + size_t(b) * kElems + V::N * v;
        acc[r][v % 2] = V::fma(V::load(x), w, acc[r][v % 2]);
      }
    }
  }
  CEDAR_UNROLL for (int r = 0; r < R; ++r) out[size_t(r) * size_t(ldo)] =
      bf16_round(V::hsum(V::add(acc[r][0], acc[r][1])));
}

// Up to kFusedRows rows: the fused path; more: the buffer family, whose chunk of decoded values
// the rows share.
constexpr int kFusedRows = 4;
template <class V, uint32_t T>
void gemm_blocks_fused(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0,
                       int n1, float* out, int ldo) {
  if (M > kFusedRows) return gemm_blocks<V, T>(act, M, K, w, ws, n0, n1, out, ldo);
  const size_t row_bytes = size_t(K / ggml::Block<T>::elems) * ggml::Block<T>::bytes;
  for (int n = n0; n < n1; ++n) {
    const uint8_t* wr = w + size_t(n) * row_bytes;
    float* o = out + size_t(n - n0);
    switch (M) {
      case 1:
        gemv_blocks_fused_rows<V, T, 1>(act, K, wr, o, ldo);
        break;
      case 2:
        gemv_blocks_fused_rows<V, T, 2>(act, K, wr, o, ldo);
        break;
      case 3:
        gemv_blocks_fused_rows<V, T, 3>(act, K, wr, o, ldo);
        break;
      default:
        gemv_blocks_fused_rows<V, T, 4>(act, K, wr, o, ldo);
    }
  }
}

// The buffer families, with the fused decode step for the formats BlockDec covers.
template <class V>
void fill_block_families_fused(KernelTable& k) {
  fill_block_families<V>(k);
  for (int f = int(WeightFormat::kQ8_0); f < int(WeightFormat::kMXFP4); ++f)
    ggml::with_block_type(ggml_type_of(WeightFormat(f)), [&](auto t) {
      constexpr uint32_t T = decltype(t)::value;
      if constexpr (kHasBlockDec<T>)
        k.gemm[f] = {act_floats_blocks, prepare_blocks, gemm_blocks_fused<V, T>, 1};
    });
}

}  // namespace
}  // namespace cedar::kernels::fast
