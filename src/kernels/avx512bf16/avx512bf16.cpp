// The "avx512bf16" kernel table: AVX-512 with BF16 and VBMI (AMD Zen 4 and later, Intel Sapphire
// Rapids and later). Its GEMMs are bf16 dot products (fast/gemm_dp.h): every weight format decodes
// to bf16 words by byte-table lookups (VPERMI2B/VPERMB) and VDPBF16PS multiplies 32 pairs per
// instruction, and sparse attention's two products too (fast/attn_dp.h). The other kernels are the
// avx512 table's. This translation unit is the only one
// compiled with these flags (cmake/CedarIsa.cmake).
#include "kernels/fast/attn_dp.h"
#include "kernels/fast/gemm_blocks_dp.h"
#include "kernels/fast/gemm_dp.h"
#include "kernels/fast/gemm_lanes.h"
#include "kernels/fast/ops_table.h"
#include "kernels/fast/quant.h"
#include "kernels/fast/tables.h"
#include "kernels/fast/vec512.h"
#include "kernels/ref/ref.h"

namespace cedar::kernels::avx512bf16 {

const KernelTable& table() {
  static const KernelTable t = [] {
    KernelTable k = ref::table();
    k.name = "avx512bf16";
    k.act_quant = fast::act_quant;
    k.gemm[int(WeightFormat::kFP8)] = fast::fp8_family_dp();
    k.gemm[int(WeightFormat::kFP4)] = fast::fp4_family_dp();
    k.gemm[int(WeightFormat::kMXFP4)] = fast::mxfp4_family_dp();
    k.gemm[int(WeightFormat::kBF16)] = fast::bf16_family_dp();
    k.gemm[int(WeightFormat::kF32)] = fast::f32_family();
    k.gemm[int(WeightFormat::kFP8W)] = fast::fp8w_family_dp();
    k.gemm[int(WeightFormat::kQ8B)] = fast::q8b_family_dp();
    fast::fill_block_families_dp(k);
    fast::fill_ops(k);
    k.sparse_attn = fast::sparse_attn_dp;
    k.sparse_attn_scratch = fast::sparse_attn_dp_scratch;
    k.bf16_lanes = fast::bf16_lanes<fast::LanesDp>;
    return k;
  }();
  return t;
}

}  // namespace cedar::kernels::avx512bf16
