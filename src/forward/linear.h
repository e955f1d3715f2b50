// linear(): the reference's `linear(x, weight)` dispatch on the weight format (NUMERICS §G), over
// a batch of rows: the format's kernel family prepares every activation row once (act_quant for
// FP8/FP4), then its GEMM runs over (row block x column range) tiles split across the thread
// pool. Every output element is computed by one kernel call in an order fixed by the family, so
// results do not depend on batch size or thread count.
#pragma once

#include <span>
#include <vector>

#include "base/scratch.h"
#include "base/thread_pool.h"
#include "forward/expert_source.h"
#include "forward/weights.h"
#include "kernels/kernel_table.h"

namespace cedar {

class EngramStore;

// What every module needs to run kernels: the chosen table and the pool.
struct Ctx {
  const KernelTable& k;
  ThreadPool& pool;
  ExpertSource* experts = nullptr;  // routed experts not resident (forward/expert_source.h)
  EngramStore* engram = nullptr;    // Engram tables not resident (forward/engram_store.h)
};

enum class LinearOut {
  kBf16,  // round the output to bf16 (FP8/FP4 GEMMs always do; BF16 F.linear does)
  kF32,   // keep fp32: F.linear(x.float(), W.float()) (router, head, ratio-2 compressor)
};

// y[M, W.out] = linear(x[M, W.in], W). x holds bf16 values (fp32 values for an F32 weight).
// FP8/FP4 weights: act_quant(x, 32) then the block-scaled GEMM (bf16 out, `out` ignored); BF16
// weights: rounded to bf16 unless `out` is kF32; F32 weights: fp32.
// ref: model.py linear
void linear(const Ctx& ctx, const Linear& W, const float* x, int M, float* y,
            LinearOut out = LinearOut::kBf16);

// Activation rows prepared once for one weight format and input width (act_quant for FP8/FP4),
// for several weights that read the same input (wq_a and wkv, an expert's w1 and w3, every
// routed expert's rows): the quantization runs once per row instead of once per weight.
struct PreparedRows {
  const GemmKernels* family = nullptr;
  WeightFormat format = WeightFormat::kBF16;
  int K = 0, stride = 0, rows = 0;  // stride: floats per prepared row
  Scratch<float> data;
  const float* row(int m) const { return data.data() + size_t(m) * size_t(stride); }
};
void prepare_rows(const Ctx& ctx, WeightFormat f, const float* x, int M, int K, PreparedRows& out);
// out = the rows `rows[0..m)` of src, in that order
void gather_rows(const PreparedRows& src, const int* rows, int m, PreparedRows& out);
// y[act.rows, W.out] = linear(x, W) for the prepared rows of x (act.format == W.format(),
// act.K == W.in).
void linear(const Ctx& ctx, const Linear& W, const PreparedRows& act, float* y,
            LinearOut out = LinearOut::kBf16);

// Several independent products in one parallel region (an MoE's experts, projections that read
// the same input): one thread-pool round trip instead of one per weight, and the tiles of all of
// them balanced together. Each task's result is what linear() would write.
struct GemmTask {
  const Linear* W = nullptr;
  const PreparedRows* act = nullptr;
  float* y = nullptr;  // [rows, W.out]
  LinearOut out = LinearOut::kBf16;
  int row0 = 0;   // the task's rows of act: [row0, row0 + rows)
  int rows = -1;  // -1: to the end of act
  int n_rows() const { return rows < 0 ? act->rows - row0 : rows; }
};
void linear_group(const Ctx& ctx, std::span<const GemmTask> tasks);

}  // namespace cedar
