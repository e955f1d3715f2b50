#include "forward/linear.h"

#include <algorithm>
#include <vector>

#include "numerics/bf16.h"

namespace cedar {

namespace {

int round_up(int v, int a) { return (v + a - 1) / a * a; }

}  // namespace

void linear(const Ctx& ctx, const Linear& W, const float* x, int M, float* y, LinearOut out) {
  const int K = W.in, N = W.out;
  if (M <= 0 || N <= 0) return;
  const GemmKernels& g = ctx.k.gemm[int(W.format())];
  // every activation row prepared once, in the encoding the family's GEMM reads
  const int af = g.act_floats(K);
  std::vector<float> act(size_t(M) * size_t(af));
  ctx.pool.parallel_for(M, [&](int64_t r0, int64_t r1) {
    g.prepare(x + size_t(r0) * K, int(r1 - r0), K, act.data() + size_t(r0) * af);
  });
  // tiles: blocks of rows (the activations of a block stay in cache while the weight streams)
  // times column ranges (about four per thread, so that the static split balances)
  constexpr int kMBlock = 64;
  const int mblk = (M + kMBlock - 1) / kMBlock;
  const int nchunk = round_up(std::max(16, (N + 4 * ctx.pool.size() - 1) / (4 * ctx.pool.size())),
                              std::max(1, g.n_align));
  const int nblk = (N + nchunk - 1) / nchunk;
  const bool round = W.kind == Linear::Kind::BF16 && out == LinearOut::kBf16;
  ctx.pool.parallel_for(int64_t(mblk) * nblk, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int m0 = int(it / nblk) * kMBlock, mb = std::min(M - m0, kMBlock);
      const int n0 = int(it % nblk) * nchunk, n1 = std::min(N, n0 + nchunk);
      float* yo = y + size_t(m0) * N + n0;
      g.gemm(act.data() + size_t(m0) * af, mb, K, W.w, W.scale, n0, n1, yo, N);
      if (round)
        for (int m = 0; m < mb; ++m)
          for (int n = 0; n < n1 - n0; ++n)
            yo[size_t(m) * N + n] = round_bf16(yo[size_t(m) * N + n]);
    }
  });
}

}  // namespace cedar
