#include "kernels/cpu.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CEDAR_X86 1
#endif

namespace cedar {

namespace {

#ifdef CEDAR_X86
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
#ifdef CEDAR_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  f.vendor = vendor;
  __get_cpuid(1, &a, &b, &c, &d);
  f.fma = c & (1u << 12);
  f.avx = c & (1u << 28);
  f.f16c = c & (1u << 29);
  const bool osxsave = c & (1u << 27);
  if (osxsave) {
    const uint64_t xcr0 = xgetbv0();
    f.os_ymm = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
    f.os_zmm = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
  }
  if (max_leaf >= 7) {
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    f.avx2 = b & (1u << 5);
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vbmi = c & (1u << 1);
    f.avx512vnni = c & (1u << 11);
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    f.avx512bf16 = a & (1u << 5);
  }
  unsigned ext = 0;
  __get_cpuid(0x80000000u, &ext, &b, &c, &d);
  if (ext >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002u + i, &a, &b, &c, &d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
    f.brand = brand;
    const size_t s = f.brand.find_first_not_of(' ');
    f.brand = s == std::string::npos ? "" : f.brand.substr(s);
  }
#endif
  return f;
}

}  // namespace

std::string CpuFeatures::flags() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2 && os_ymm, "avx2");
  add(fma && os_ymm, "fma");
  add(f16c && os_ymm, "f16c");
  add(avx512f && os_zmm, "avx512f");
  add(avx512bw && os_zmm, "avx512bw");
  add(avx512dq && os_zmm, "avx512dq");
  add(avx512vl && os_zmm, "avx512vl");
  add(avx512vbmi && os_zmm, "avx512vbmi");
  add(avx512vnni && os_zmm, "avx512vnni");
  add(avx512bf16 && os_zmm, "avx512bf16");
  return s.empty() ? "baseline" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace cedar
