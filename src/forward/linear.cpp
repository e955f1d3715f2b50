#include "forward/linear.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "base/scratch.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"

namespace cedar {

namespace {

int round_up(int v, int a) { return (v + a - 1) / a * a; }

// The fast families read whole 32-element blocks; an input width that is not a multiple of 32
// (no V4.1 shape has one) runs on the reference family.
const GemmKernels& family_for(const KernelTable& k, WeightFormat f, int K) {
  return K % 32 == 0 ? k.gemm[int(f)] : kernels::ref::table().gemm[int(f)];
}

}  // namespace

void prepare_rows(const Ctx& ctx, WeightFormat f, const float* x, int M, int K, PreparedRows& out) {
  const GemmKernels& g = family_for(ctx.k, f, K);
  out.family = &g;
  out.format = f;
  out.K = K;
  out.stride = g.act_floats(K);
  out.rows = M;
  // (every family's prepare writes whole rows)
  out.data.resize_for_overwrite(size_t(std::max(M, 0)) * size_t(out.stride));
  if (M <= 0) return;
  ctx.pool.parallel_for(
      M,
      [&](int64_t r0, int64_t r1) {
        g.prepare(x + size_t(r0) * K, int(r1 - r0), K, out.data.data() + size_t(r0) * out.stride);
      },
      grain_for(4 * int64_t(K)));
}

void gather_rows(const PreparedRows& src, const int* rows, int m, PreparedRows& out) {
  out.family = src.family;
  out.format = src.format;
  out.K = src.K;
  out.stride = src.stride;
  out.rows = m;
  out.data.resize_for_overwrite(size_t(m) * size_t(src.stride));
  for (int i = 0; i < m; ++i)
    std::copy_n(src.row(rows[i]), src.stride, out.data.data() + size_t(i) * src.stride);
}

namespace {

// One tile: rows [m0, m0 + mb) x columns [n0, n1) of one task.
struct Tile {
  int task, m0, mb, n0, n1;
};

// Work below this many multiply-adds (several microseconds of it) runs on the calling thread: a
// pool round trip costs about 2 us (base/thread_pool.h grain_for).
constexpr int64_t kInlineMacs = int64_t(1) << 18;

void run_tile(const GemmTask& t, const Tile& tl) {
  const Linear& W = *t.W;
  const int N = W.out;
  float* yo = t.y + size_t(tl.m0) * N + tl.n0;
  t.act->family->gemm(t.act->row(t.row0 + tl.m0), tl.mb, W.in, W.w, W.scale, tl.n0, tl.n1, yo, N);
  if ((W.kind == Linear::Kind::BF16 || W.kind == Linear::Kind::FP8W) && t.out == LinearOut::kBf16)
    for (int m = 0; m < tl.mb; ++m)
      for (int n = 0; n < tl.n1 - tl.n0; ++n)
        yo[size_t(m) * N + n] = round_bf16(yo[size_t(m) * N + n]);
}

}  // namespace

void linear_group(const Ctx& ctx, std::span<const GemmTask> tasks) {
  // tiles: blocks of rows (the activations of a block stay in cache while the weight streams)
  // times column ranges (about four per thread over the whole group, so that the static split
  // balances)
  constexpr int kMBlock = 64;
  int64_t macs = 0;
  for (const GemmTask& t : tasks) {
    const Linear& W = *t.W;
    if (t.act->format != W.format() || t.act->K != W.in)
      throw std::runtime_error(W.name + ": activations prepared for another format or width");
    if (t.row0 < 0 || t.n_rows() < 0 || t.row0 + t.n_rows() > t.act->rows)
      throw std::runtime_error(W.name + ": task rows outside the prepared rows");
    macs += int64_t(t.n_rows()) * W.out * W.in;
  }
  if (macs == 0) return;
  const int parts = 4 * ctx.pool.size();
  Scratch<Tile> tiles;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const GemmTask& t = tasks[i];
    const int M = t.n_rows(), N = t.W->out;
    if (M <= 0 || N <= 0) continue;
    const int64_t share = (int64_t(M) * N * t.W->in * parts + macs - 1) / macs;  // its parts
    const int mblk = (M + kMBlock - 1) / kMBlock;
    const int want = int(std::max<int64_t>(1, share / mblk));
    const int nchunk =
        round_up(std::max(16, (N + want - 1) / want), std::max(1, t.act->family->n_align));
    for (int m0 = 0; m0 < M; m0 += kMBlock)
      for (int n0 = 0; n0 < N; n0 += nchunk)
        tiles.push_back({int(i), m0, std::min(M - m0, kMBlock), n0, std::min(N, n0 + nchunk)});
  }
  if (macs < kInlineMacs) {
    for (const Tile& tl : tiles) run_tile(tasks[size_t(tl.task)], tl);
    return;
  }
  // claimed dynamically: a decode step's products are short, and a thread that starts late or
  // shares its core would otherwise hold up the whole region at its end
  ctx.pool.parallel_for_each(int64_t(tiles.size()), [&](int64_t i) {
    run_tile(tasks[size_t(tiles[size_t(i)].task)], tiles[size_t(i)]);
  });
}

void linear(const Ctx& ctx, const Linear& W, const PreparedRows& act, float* y, LinearOut out) {
  const GemmTask t{&W, &act, y, out};
  linear_group(ctx, std::span<const GemmTask>(&t, 1));
}

void linear(const Ctx& ctx, const Linear& W, const float* x, int M, float* y, LinearOut out) {
  PreparedRows act;
  prepare_rows(ctx, W.format(), x, M, W.in, act);
  linear(ctx, W, act, y, out);
}

}  // namespace cedar
