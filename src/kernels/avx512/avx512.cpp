// The "avx512" kernel table: the fast kernels of src/kernels/fast/ instantiated for this ISA. This
// translation unit is the only one compiled with the avx512 flags (cmake/CedarIsa.cmake).
#include "kernels/fast/tables.h"
#include "kernels/ref/ref.h"

namespace cedar::kernels::avx512 {

const KernelTable& table() {
  static const KernelTable t = [] {
    KernelTable k = ref::table();
    k.name = "avx512";
    return k;
  }();
  return t;
}

}  // namespace cedar::kernels::avx512
