// The fast GEMM families over weights stored as ggml blocks (WeightFormat kQ8_0 .. kQ6_K: GGUF
// files computed in place; docs/NUMERICS.md "GGUF weights in place"), over a vector layer V (V8 or
// V16).
//
// prepare(): the bit-exact act_quant, then each value times its block's scale (exact), in K
// order. gemm(): each weight block is decoded once per call by the format's definition
// (kernels/ggml_blocks.h, the reference's decoder, so the same values) into a block buffer, and
// every activation row of the call runs its FMAs over it: output (m, n) is
// fma(x[k..k+N), w[k..k+N), acc[t % 2]) over the K vectors t in order, the two accumulators added
// at the end, then V::hsum's fixed tree and bf16 rounding. The same operations whatever M and the
// column range, so results are batch-invariant; they differ from the reference (per 32-block
// sums rounded once) only in the order and rounding of the sums.
//
// A first, generic version: the block decoders are the scalar ones (vectorized by the compiler
// where it can). Per-format vector decoders are the next step for speed (docs/KERNELS.md).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/gemm.h"
#include "kernels/fast/quant.h"
#include "kernels/fast/vmath.h"
#include "kernels/ggml_blocks.h"
#include "kernels/kernel_table.h"

namespace cedar::kernels::fast {
namespace {

inline float f16c_half(uint16_t h) { return _cvtsh_ss(h); }

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

template <class V, uint32_t T>
void gemm_blocks(const float* act, int M, int K, const uint8_t* w, const uint8_t*, int n0, int n1,
                 float* out, int ldo) {
  using F = typename V::F;
  constexpr int kElems = ggml::Block<T>::elems, kBytes = ggml::Block<T>::bytes;
  constexpr int kRowBlock = 64;  // activation rows whose accumulators live on the stack
  const size_t row_bytes = size_t(K / kElems) * kBytes;
  alignas(64) float wb[kElems];
  F acc[kRowBlock][2];
  for (int n = n0; n < n1; ++n) {
    const uint8_t* wr = w + size_t(n) * row_bytes;
    for (int m0 = 0; m0 < M; m0 += kRowBlock) {
      const int mb = M - m0 < kRowBlock ? M - m0 : kRowBlock;
      for (int m = 0; m < mb; ++m) acc[m][0] = acc[m][1] = V::zero();
      for (int b = 0; b < K / kElems; ++b) {
        ggml::decode_block<T>(wr + size_t(b) * kBytes, wb, f16c_half);
        for (int m = 0; m < mb; ++m) {
          const float* x = act + size_t(m0 + m) * size_t(K) + size_t(b) * kElems;
          F a0 = acc[m][0], a1 = acc[m][1];
          for (int t = 0; t < kElems / V::N; t += 2) {  // (kElems / N is even: 32 / 16 = 2)
            a0 = V::fma(V::load(x + t * V::N), V::load(wb + t * V::N), a0);
            a1 = V::fma(V::load(x + (t + 1) * V::N), V::load(wb + (t + 1) * V::N), a1);
          }
          acc[m][0] = a0;
          acc[m][1] = a1;
        }
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

// Every block format's family into a table.
template <class V>
void fill_block_families(KernelTable& k) {
  k.gemm[int(WeightFormat::kQ8_0)] = block_family<V, ggml::kQ8_0>();
  k.gemm[int(WeightFormat::kQ4_0)] = block_family<V, ggml::kQ4_0>();
  k.gemm[int(WeightFormat::kQ5_0)] = block_family<V, ggml::kQ5_0>();
  k.gemm[int(WeightFormat::kQ2_K)] = block_family<V, ggml::kQ2_K>();
  k.gemm[int(WeightFormat::kQ3_K)] = block_family<V, ggml::kQ3_K>();
  k.gemm[int(WeightFormat::kQ4_K)] = block_family<V, ggml::kQ4_K>();
  k.gemm[int(WeightFormat::kQ5_K)] = block_family<V, ggml::kQ5_K>();
  k.gemm[int(WeightFormat::kQ6_K)] = block_family<V, ggml::kQ6_K>();
}

}  // namespace
}  // namespace cedar::kernels::fast
