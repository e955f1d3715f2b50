// The "ref" table: the scalar reference-mode kernels (docs/NUMERICS.md), the oracle every other
// table is tested against.
#include "kernels/ref/ref.h"

namespace cedar::kernels::ref {

const KernelTable& table() {
  static const KernelTable t = [] {
    KernelTable k = {
        "ref",
        act_quant,
        fp4_act_quant_e4m3,
        fp4_act_quant_ue8m0,
        {
            {act_floats_quant, prepare_quant, fp8_gemm, 1},
            {act_floats_quant, prepare_quant, fp4_gemm, 1},
            {act_floats_plain, prepare_plain, gemm_bf16w, 1},
            {act_floats_plain, prepare_plain, gemm_f32w, 1},
            {act_floats_plain, prepare_plain, gemm_fp8w, 1},
        },
        rms_norm,
        rope,
        sparse_attn,
        sparse_attn_scratch,
        dense_attn,
        dense_attn_scratch,
        index_scores,
        hc_split_sinkhorn,
        hc_pre,
        hc_post,
        swiglu,
        topk,
        add_argmax,
        nullptr,  // bf16_lanes: such products run through linear()
    };
    for (int f = int(WeightFormat::kQ8_0); f < int(WeightFormat::kMXFP4); ++f)
      k.gemm[f] = block_family(WeightFormat(f));
    k.gemm[int(WeightFormat::kMXFP4)] = {act_floats_quant, prepare_quant, mxfp4_gemm, 1};
    k.gemm[int(WeightFormat::kQ8B)] = {act_floats_plain, prepare_plain, gemm_q8b, 1};
    return k;
  }();
  return t;
}

}  // namespace cedar::kernels::ref
