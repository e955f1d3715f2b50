#include "forward/kernel_table.h"

#include <stdexcept>

#include "forward/kernels_ref.h"

namespace cedar {

namespace {

const KernelTable kRefTable = {
    "ref",
    kernels::ref::act_quant,
    kernels::ref::fp4_act_quant_e4m3,
    kernels::ref::fp4_act_quant_ue8m0,
    kernels::ref::fp8_gemm,
    kernels::ref::fp4_gemm,
    kernels::ref::gemm_bf16w,
    kernels::ref::gemm_f32w,
    kernels::ref::rms_norm,
    kernels::ref::rope,
    kernels::ref::sparse_attn,
    kernels::ref::hc_split_sinkhorn,
    kernels::ref::topk,
};

}  // namespace

const KernelTable& choose_kernels(std::string_view name) {
  if (name.empty() || name == "ref") return kRefTable;
  throw std::runtime_error("unknown --kernels value '" + std::string(name) + "' (available: ref)");
}

std::vector<std::string> kernel_table_names() { return {"ref"}; }

}  // namespace cedar
