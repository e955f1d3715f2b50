// Correctly rounded (from double) scalar functions of fp32 arguments, and the exact-sum helper.
// NUMERICS.md §T: every transcendental is evaluated in double from its fp32 argument and rounded
// once to fp32; §R: reductions accumulate in double and round once ("xsum").
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "numerics/fp8.h"

namespace cedar::fmath {

inline float f32(double x) { return static_cast<float>(x); }

// One correctly rounded fp32 result from a double evaluation `d` of a function whose long-double
// evaluation is `wide()`. Rounding the double to fp32 is right unless d lies within a few double
// ulps of an fp32 rounding midpoint: there the double's own error can pick the wrong side (glibc's
// 1/(1+exp(-x)) lands exactly on a midpoint for x = 0x372e0000, 0x37360000, 0x374e0000;
// canonical-arithmetic rule 4), so the long-double value (11 more bits) decides. The numpy oracle
// applies the same rule (tools/reference/numerics.py _correctly_rounded).
template <class Wide>
inline float correctly_rounded(double d, Wide wide) {
  const float r = static_cast<float>(d);
  const double rd = r;
  if (rd == d || !std::isfinite(d)) return r;
  const float nb = std::nextafter(r, d > rd ? INFINITY : -INFINITY);
  const double mid = (rd + double(nb)) * 0.5;  // exact: two adjacent floats
  const double ulp = std::nextafter(std::fabs(d), INFINITY) - std::fabs(d);
  if (std::fabs(d - mid) > 8.0 * ulp) return r;
  return static_cast<float>(wide());
}

inline float exp(float x) {
  return correctly_rounded(std::exp(double(x)), [x] { return std::exp((long double)x); });
}
inline float sqrt(float x) { return f32(std::sqrt(double(x))); }  // double sqrt: never a midpoint
inline float rsqrt(float x) {
  return correctly_rounded(1.0 / std::sqrt(double(x)),
                           [x] { return 1.0L / std::sqrt((long double)x); });
}
inline float cos(float x) {
  return correctly_rounded(std::cos(double(x)), [x] { return std::cos((long double)x); });
}
inline float sin(float x) {
  return correctly_rounded(std::sin(double(x)), [x] { return std::sin((long double)x); });
}
inline float pow(float b, float e) {
  return correctly_rounded(std::pow(double(b), double(e)),
                           [b, e] { return std::pow((long double)b, (long double)e); });
}
// sigmoid, silu and softplus are each one correctly rounded function of their fp32 argument.
inline float sigmoid(float x) {
  return correctly_rounded(1.0 / (1.0 + std::exp(-double(x))),
                           [x] { return 1.0L / (1.0L + std::exp(-(long double)x)); });
}
inline float silu(float x) {
  return correctly_rounded(double(x) / (1.0 + std::exp(-double(x))),
                           [x] { return (long double)x / (1.0L + std::exp(-(long double)x)); });
}
// torch.nn.functional.softplus with beta 1, threshold 20.
inline float softplus(float x) {
  if (x > 20.0f) return x;
  return correctly_rounded(std::log1p(std::exp(double(x))),
                           [x] { return std::log1p(std::exp((long double)x)); });
}

// xsum result: one rounding of the double accumulator; a zero sum is +0.0 (NUMERICS §R).
inline float round_sum(double s) {
  float r = f32(s);
  return r == 0.0f ? 0.0f : r;
}

// The total order torch.topk (CUDA radix sort) uses: +inf > finite > -inf, +0.0 above -0.0.
inline uint32_t radix_key(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// 2^e as a double for a normal-range exponent (|e| < 1022), exact.
inline double pow2d(int e) { return std::bit_cast<double>(uint64_t(e + 1023) << 52); }

// E4M3 / UE8M0 decoding by table (same values as numerics e4m3_to_f32 / ue8m0_to_f32).
struct CodeTables {
  float e4m3[256], ue8m0[256];
  CodeTables() {
    for (int c = 0; c < 256; ++c) {
      e4m3[c] = e4m3_to_f32(uint8_t(c));
      ue8m0[c] = ue8m0_to_f32(uint8_t(c));
    }
  }
};
inline const CodeTables& code_tables() {
  static const CodeTables t;
  return t;
}
inline const float* e4m3_values() { return code_tables().e4m3; }    // [256]
inline const float* ue8m0_values() { return code_tables().ue8m0; }  // [256]
inline float e4m3(uint8_t c) { return e4m3_values()[c]; }
inline float ue8m0(uint8_t c) { return ue8m0_values()[c]; }

}  // namespace cedar::fmath
