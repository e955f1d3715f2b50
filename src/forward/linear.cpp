#include "forward/linear.h"

#include <algorithm>
#include <vector>

#include "forward/fmath.h"
#include "numerics/bf16.h"
#include "numerics/fp8.h"

namespace cedar {

void linear(const Ctx& ctx, const Linear& W, const float* x, int M, float* y, LinearOut out) {
  const int K = W.in, N = W.out;
  if (M <= 0) return;
  // work items: (block of rows) x (block of output columns); each output is one kernel result
  constexpr int kNBlock = 64, kMBlock = 16;
  const int nblk = (N + kNBlock - 1) / kNBlock, mblk = (M + kMBlock - 1) / kMBlock;
  const int64_t items = int64_t(mblk) * nblk;
  auto tile = [&](int64_t it, int* m0, int* mb, int* n0, int* n1) {
    *m0 = int(it / nblk) * kMBlock;
    *mb = std::min(M - *m0, kMBlock);
    *n0 = int(it % nblk) * kNBlock;
    *n1 = std::min(N, *n0 + kNBlock);
  };
  if (W.kind == Linear::Kind::FP8 || W.kind == Linear::Kind::FP4) {
    // act_quant every row once: decoded E4M3 values and the per-32 power-of-two scales
    std::vector<float> xq(size_t(M) * size_t(K)), xs(size_t(M) * size_t(K / 32));
    ctx.pool.parallel_for(M, [&](int64_t r0, int64_t r1) {
      std::vector<uint8_t> codes(static_cast<size_t>(K)), sc(static_cast<size_t>(K / 32));
      for (int64_t m = r0; m < r1; ++m) {
        ctx.k.act_quant(x + m * K, K, codes.data(), sc.data());
        for (int i = 0; i < K; ++i) xq[size_t(m * K + i)] = fmath::e4m3(codes[size_t(i)]);
        for (int b = 0; b < K / 32; ++b) xs[size_t(m * (K / 32) + b)] = fmath::ue8m0(sc[size_t(b)]);
      }
    });
    auto gemm = W.kind == Linear::Kind::FP8 ? ctx.k.fp8_gemm : ctx.k.fp4_gemm;
    ctx.pool.parallel_for(items, [&](int64_t i0, int64_t i1) {
      for (int64_t it = i0; it < i1; ++it) {
        int m0, mb, n0, n1;
        tile(it, &m0, &mb, &n0, &n1);
        gemm(xq.data() + size_t(m0) * K, xs.data() + size_t(m0) * (K / 32), mb, K, W.w, W.scale, n0,
             n1, y + size_t(m0) * N + n0, N);
      }
    });
    return;
  }
  ctx.pool.parallel_for(items, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      int m0, mb, n0, n1;
      tile(it, &m0, &mb, &n0, &n1);
      float* yo = y + size_t(m0) * N + n0;
      if (W.kind == Linear::Kind::BF16) {
        ctx.k.gemm_bf16w(x + size_t(m0) * K, mb, K, W.bf16(), n0, n1, yo, N);
        if (out == LinearOut::kBf16)
          for (int m = 0; m < mb; ++m)
            for (int n = 0; n < n1 - n0; ++n)
              yo[size_t(m) * N + n] = round_bf16(yo[size_t(m) * N + n]);
      } else {
        ctx.k.gemm_f32w(x + size_t(m0) * K, mb, K, W.f32(), n0, n1, yo, N);
      }
    }
  });
}

}  // namespace cedar
