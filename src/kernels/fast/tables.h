// The fast kernel tables, one per ISA translation unit (src/kernels/<isa>/<isa>.cpp).
#pragma once

#include "kernels/kernel_table.h"

namespace cedar::kernels {
namespace avx2 {
const KernelTable& table();
}
namespace avx512 {
const KernelTable& table();
}
namespace avx512bf16 {
const KernelTable& table();
}
}  // namespace cedar::kernels
