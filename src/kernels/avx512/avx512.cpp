// The "avx512" kernel table: the fast kernels of src/kernels/fast/ instantiated for this ISA. This
// translation unit is the only one compiled with the avx512 flags (cmake/CedarIsa.cmake); the
// entries without a fast version yet are the reference kernels.
#include "kernels/fast/gemm.h"
#include "kernels/fast/gemm_blocks.h"
#include "kernels/fast/gemm_blocks_fused.h"
#include "kernels/fast/gemm_lanes.h"
#include "kernels/fast/ops_table.h"
#include "kernels/fast/quant.h"
#include "kernels/fast/tables.h"
#include "kernels/fast/vec512.h"
#include "kernels/ref/ref.h"

namespace cedar::kernels::avx512 {

const KernelTable& table() {
  using G = fast::V16;  // the GEMMs' vector layer
  static const KernelTable t = [] {
    KernelTable k = ref::table();
    k.name = "avx512";
    k.act_quant = fast::act_quant;
    k.gemm[int(WeightFormat::kFP8)] = fast::fp8_family<G>();
    k.gemm[int(WeightFormat::kFP4)] = fast::fp4_family<G>();
    k.gemm[int(WeightFormat::kMXFP4)] = fast::mxfp4_family<G>();
    k.gemm[int(WeightFormat::kBF16)] = fast::bf16_family<G>();
    k.gemm[int(WeightFormat::kF32)] = fast::f32_family();
    k.gemm[int(WeightFormat::kFP8W)] = fast::fp8w_family<G>();
    k.gemm[int(WeightFormat::kQ8B)] = fast::q8b_family<G>();
    fast::fill_block_families_fused<G>(k);
    fast::fill_ops(k);
    k.bf16_lanes = fast::bf16_lanes<fast::LanesFma16>;
    return k;
  }();
  return t;
}

}  // namespace cedar::kernels::avx512
