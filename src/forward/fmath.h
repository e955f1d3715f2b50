// Correctly rounded (from double) scalar functions of fp32 arguments, and the exact-sum helper.
// NUMERICS.md §T: every transcendental is evaluated in double from its fp32 argument and rounded
// once to fp32; §R: reductions accumulate in double and round once ("xsum").
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace cedar::fmath {

inline float f32(double x) { return static_cast<float>(x); }

inline float exp(float x) { return f32(std::exp(double(x))); }
inline float sqrt(float x) { return f32(std::sqrt(double(x))); }
inline float rsqrt(float x) { return f32(1.0 / std::sqrt(double(x))); }
inline float cos(float x) { return f32(std::cos(double(x))); }
inline float sin(float x) { return f32(std::sin(double(x))); }
// sigmoid, silu and softplus are each one correctly rounded function of their fp32 argument.
inline float sigmoid(float x) { return f32(1.0 / (1.0 + std::exp(-double(x)))); }
inline float silu(float x) { return f32(double(x) / (1.0 + std::exp(-double(x)))); }
// torch.nn.functional.softplus with beta 1, threshold 20.
inline float softplus(float x) { return x > 20.0f ? x : f32(std::log1p(std::exp(double(x)))); }

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
const float* e4m3_values();   // [256]
const float* ue8m0_values();  // [256]
inline float e4m3(uint8_t c) { return e4m3_values()[c]; }
inline float ue8m0(uint8_t c) { return ue8m0_values()[c]; }

}  // namespace cedar::fmath
