// The fast non-GEMM kernels of a table: one call per ISA translation unit (avx2.cpp, avx512.cpp)
// puts them in. Every one is 256-bit code (AVX2 + FMA + F16C), the same in both tables, so what
// the avx512 table runs is what a machine without AVX-512 tests. hc_split_sinkhorn stays the
// reference's: per token it is 20 Sinkhorn iterations over hc x hc = 16 numbers (about 1,000
// scalar operations per site, under 0.1% of a decode step's time on every preset measured).
#pragma once

#include "kernels/fast/attn.h"
#include "kernels/fast/dense_attn.h"
#include "kernels/fast/index_scores.h"
#include "kernels/fast/quant_fp4.h"
#include "kernels/fast/rowops.h"
#include "kernels/fast/topk.h"
#include "kernels/kernel_table.h"

namespace cedar::kernels::fast {
namespace {

void fill_ops(KernelTable& k) {
  k.fp4_act_quant_e4m3 = fp4_act_quant_e4m3;
  k.fp4_act_quant_ue8m0 = fp4_act_quant_ue8m0;
  k.rms_norm = rms_norm;
  k.rope = rope;
  k.sparse_attn = sparse_attn;
  k.sparse_attn_scratch = sparse_attn_scratch;
  k.dense_attn = dense_attn;
  k.dense_attn_scratch = dense_attn_scratch;
  k.index_scores = index_scores;
  k.hc_pre = hc_pre;
  k.hc_post = hc_post;
  k.swiglu = swiglu;
  k.topk = topk;
  k.add_argmax = add_argmax;
}

}  // namespace
}  // namespace cedar::kernels::fast
