// What the CPU can run, read once from CPUID and XGETBV (the OS must also save the wider
// registers): the kernel tables are chosen from this at start-up, never assumed.
#pragma once

#include <string>

namespace cedar {

struct CpuFeatures {
  std::string vendor, brand;
  bool avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512vnni = false, avx512bf16 = false, avx512vbmi = false;
  bool os_ymm = false, os_zmm = false;  // XCR0 enables the AVX / AVX-512 register state

  bool has_avx2_fma() const { return os_ymm && avx && avx2 && fma && f16c; }
  bool has_avx512() const {
    return has_avx2_fma() && os_zmm && avx512f && avx512bw && avx512dq && avx512vl;
  }
  // the bf16 dot products and byte permutes of the avx512bf16 table
  bool has_avx512_bf16() const { return has_avx512() && avx512bf16 && avx512vbmi; }
  // e.g. "avx2 fma f16c avx512f avx512bw avx512dq avx512vl avx512vbmi avx512vnni avx512bf16"
  std::string flags() const;
};

const CpuFeatures& cpu_features();

}  // namespace cedar
