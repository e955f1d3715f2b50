// Reference GEMMs over weights stored as ggml blocks (GGUF files computed in place; WeightFormat
// kQ8_0 .. kQ6_K; docs/NUMERICS.md "GGUF weights in place"). The FP8 GEMM's loop with the weight
// decoded by the format's own definition (kernels/ggml_blocks.h) instead of E4M3 x a power of two:
// per 32-wide K block the exact products of the act_quant values and the weight values, summed in
// double and rounded once to fp32, times the activation's scale, added to an fp32 accumulator in
// K order; the output rounded to bf16 (the release's FP8/FP4 products end so).
#include <vector>

#include "kernels/ggml_blocks.h"
#include "kernels/ref/lanes.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"
#include "numerics/fp16.h"

namespace cedar::kernels::ref {

namespace {

constexpr int kRowBlock = 16;  // activation rows sharing one decoded weight row

template <uint32_t T>
CEDAR_MULTIVERSION void block_gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t*,
                                   int n0, int n1, float* out, int ldo) {
  const size_t row_bytes = size_t(K / ggml::Block<T>::elems) * ggml::Block<T>::bytes;
  const size_t ld = size_t(act_floats_quant(K));
  const int kb = K / 32;
  std::vector<float> wf(static_cast<size_t>(K));
  float acc[kRowBlock];
  auto half = [](uint16_t h) { return f16_to_f32(h); };
  for (int n = n0; n < n1; ++n) {
    ggml::decode_row<T>(w + size_t(n) * row_bytes, K, wf.data(), half);
    for (int m0 = 0; m0 < M; m0 += kRowBlock) {
      const int mb = M - m0 < kRowBlock ? M - m0 : kRowBlock;
      for (int m = 0; m < mb; ++m) acc[m] = 0.0f;
      for (int k = 0; k < kb; ++k)
        for (int m = 0; m < mb; ++m) {
          const float* xr = act + size_t(m0 + m) * ld;
          const float p = float(simd::dot_lanes_exact(xr + k * 32, wf.data() + k * 32, 32));
          acc[m] = acc[m] + p * xr[K + k];
        }
      for (int m = 0; m < mb; ++m)
        out[size_t(m0 + m) * size_t(ldo) + size_t(n - n0)] = round_bf16(acc[m]);
    }
  }
}

}  // namespace

GemmKernels block_family(WeightFormat f) {
  GemmKernels g{act_floats_quant, prepare_quant, nullptr, 1};
  switch (f) {
    case WeightFormat::kQ8_0:
      g.gemm = block_gemm<ggml::kQ8_0>;
      break;
    case WeightFormat::kQ4_0:
      g.gemm = block_gemm<ggml::kQ4_0>;
      break;
    case WeightFormat::kQ5_0:
      g.gemm = block_gemm<ggml::kQ5_0>;
      break;
    case WeightFormat::kQ2_K:
      g.gemm = block_gemm<ggml::kQ2_K>;
      break;
    case WeightFormat::kQ3_K:
      g.gemm = block_gemm<ggml::kQ3_K>;
      break;
    case WeightFormat::kQ4_K:
      g.gemm = block_gemm<ggml::kQ4_K>;
      break;
    case WeightFormat::kQ5_K:
      g.gemm = block_gemm<ggml::kQ5_K>;
      break;
    case WeightFormat::kQ6_K:
      g.gemm = block_gemm<ggml::kQ6_K>;
      break;
    default:
      break;
  }
  return g;
}

}  // namespace cedar::kernels::ref
