// linear(): the reference's `linear(x, weight)` dispatch on the weight format (NUMERICS §G), over
// a batch of rows: the format's kernel family prepares every activation row once (act_quant for
// FP8/FP4), then its GEMM runs over (row block x column range) tiles split across the thread
// pool. Every output element is computed by one kernel call in an order fixed by the family, so
// results do not depend on batch size or thread count.
#pragma once

#include "base/thread_pool.h"
#include "forward/weights.h"
#include "kernels/kernel_table.h"

namespace cedar {

// What every module needs to run kernels: the chosen table and the pool.
struct Ctx {
  const KernelTable& k;
  ThreadPool& pool;
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

}  // namespace cedar
