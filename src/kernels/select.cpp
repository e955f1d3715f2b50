// Which kernel table runs: the best one the CPU supports (AVX-512 BF16 > AVX-512 > AVX2+FMA > ref),
// unless
// --kernels NAME or CEDAR_KERNELS names one. Tables for ISAs the compiler could not build are
// absent (cmake/CedarIsa.cmake); a table the CPU cannot run is refused by name.
#include <cstdlib>
#include <stdexcept>

#include "kernels/cpu.h"
#include "kernels/fast/tables.h"
#include "kernels/kernel_table.h"
#include "kernels/ref/ref.h"

namespace cedar {

namespace {

struct Entry {
  const char* name;
  const KernelTable& (*table)();
  bool (*runs)(const CpuFeatures&);
};

// best last
const Entry kEntries[] = {
    {"ref", kernels::ref::table, [](const CpuFeatures&) { return true; }},
#if CEDAR_HAVE_AVX2
    {"avx2", kernels::avx2::table, [](const CpuFeatures& f) { return f.has_avx2_fma(); }},
#endif
#if CEDAR_HAVE_AVX512
    {"avx512", kernels::avx512::table, [](const CpuFeatures& f) { return f.has_avx512(); }},
#endif
#if CEDAR_HAVE_AVX512BF16
    {"avx512bf16", kernels::avx512bf16::table,
     [](const CpuFeatures& f) { return f.has_avx512_bf16(); }},
#endif
};

std::string names_list() {
  std::string s;
  for (const Entry& e : kEntries) {
    if (!s.empty()) s += ", ";
    s += e.name;
    if (!e.runs(cpu_features())) s += " (not on this CPU)";
  }
  return s;
}

}  // namespace

const KernelTable& choose_kernels(std::string_view name) {
  std::string want(name);
  const char* from = "--kernels";
  if (want.empty()) {
    const char* env = std::getenv("CEDAR_KERNELS");
    if (env && *env) {
      want = env;
      from = "CEDAR_KERNELS";
    }
  }
  const CpuFeatures& cpu = cpu_features();
  if (want.empty() || want == "auto") {
    const Entry* best = &kEntries[0];
    for (const Entry& e : kEntries)
      if (e.runs(cpu)) best = &e;
    return best->table();
  }
  for (const Entry& e : kEntries) {
    if (want != e.name) continue;
    if (!e.runs(cpu))
      throw std::runtime_error(std::string(from) + " " + want +
                               ": this CPU cannot run it (cpu: " + cpu.flags() + ")");
    return e.table();
  }
  throw std::runtime_error(std::string("unknown ") + from + " value '" + want +
                           "' (available: auto, " + names_list() + ")");
}

std::vector<const KernelTable*> supported_kernel_tables() {
  std::vector<const KernelTable*> out;
  for (const Entry& e : kEntries)
    if (e.runs(cpu_features())) out.push_back(&e.table());
  return out;
}

std::vector<std::string> kernel_table_names() {
  std::vector<std::string> out;
  for (const Entry& e : kEntries) out.emplace_back(e.name);
  return out;
}

std::string describe_kernels(const KernelTable& k) {
  const CpuFeatures& cpu = cpu_features();
  std::string s = "kernels " + std::string(k.name) + " (cpu: ";
  s += cpu.brand.empty() ? cpu.vendor : cpu.brand;
  s += "; " + cpu.flags() + ")";
  return s;
}

}  // namespace cedar
