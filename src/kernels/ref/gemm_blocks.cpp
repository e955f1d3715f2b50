// Reference GEMMs over weights stored as ggml blocks (GGUF files computed in place; WeightFormat
// kQ8_0 .. kIQ1_M; docs/NUMERICS.md "GGUF weights in place"). The FP8 GEMM's loop with the weight
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

// The FP8 loop for every activation row against one decoded weight row wf [K]: out[m * ldo] for
// m in [0, M). (Multiversioned apart from the decoders: clang does not clone templates.)
CEDAR_MULTIVERSION
void rows_against(const float* act, int M, int K, const float* wf, float* out, size_t ldo) {
  const size_t ld = size_t(act_floats_quant(K));
  for (int m = 0; m < M; ++m) {
    const float* xr = act + size_t(m) * ld;
    float acc = 0.0f;
    for (int k = 0; k < K / 32; ++k) {
      const float p = float(simd::dot_lanes_exact(xr + k * 32, wf + k * 32, 32));
      acc = acc + p * xr[K + k];
    }
    out[size_t(m) * ldo] = round_bf16(acc);
  }
}

template <uint32_t T>
void block_gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t*, int n0, int n1,
                float* out, int ldo) {
  const size_t row_bytes = size_t(K / ggml::Block<T>::elems) * ggml::Block<T>::bytes;
  std::vector<float> wf(static_cast<size_t>(K));
  auto half = [](uint16_t h) { return f16_to_f32(h); };
  for (int n = n0; n < n1; ++n) {
    ggml::decode_row<T>(w + size_t(n) * row_bytes, K, wf.data(), half);
    rows_against(act, M, K, wf.data(), out + (n - n0), size_t(ldo));
  }
}

}  // namespace

GemmKernels block_family(WeightFormat f) {
  GemmKernels g{act_floats_quant, prepare_quant, nullptr, 1};
  ggml::with_block_type(ggml_type_of(f), [&](auto T) { g.gemm = block_gemm<decltype(T)::value>; });
  return g;
}

}  // namespace cedar::kernels::ref
