// FP8 E4M3 ("fn": no infinities, max 448, one NaN pattern 0x7f/0xff) and UE8M0 scales.
// ref: kernel.py act_quant (clamp to +-448, then cast with round-to-nearest-even).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace cedar {

inline constexpr float kE4M3Max = 448.0f;

// Decode one E4M3 code to fp32 (exact).
inline float e4m3_to_f32(uint8_t c) {
  const uint32_t sign = c >> 7, exp = (c >> 3) & 0xf, man = c & 0x7;
  float v;
  if (exp == 0xf && man == 0x7) return std::nanf("");
  if (exp == 0)
    v = std::ldexp(float(man), -9);  // subnormal: man * 2^-6 * 2^-3
  else
    v = std::ldexp(float(8 + man), int(exp) - 10);  // (1 + man/8) * 2^(exp-7)
  return sign ? -v : v;
}

// Encode fp32 to E4M3 with round-to-nearest-even after saturating to +-448 (the reference clamps
// before casting, so out-of-range values become +-448, never NaN). NaN input -> NaN code.
inline uint8_t f32_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  if (a >= kE4M3Max) return sign | 0x7e;  // 448 = 1.75 * 2^8
  // Work in units of the smallest subnormal (2^-9): values < 2^-6 are subnormal, spacing 2^-9.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp_unbiased = e - 1;  // a in [2^exp_unbiased, 2^(exp_unbiased+1))
  if (exp_unbiased < -6) exp_unbiased = -6;  // subnormal range shares the 2^-6 binade spacing
  // quantum (spacing) of representable values in this binade: 2^(exp_unbiased - 3)
  float q = std::ldexp(a, 3 - exp_unbiased);  // exact scaling by a power of two
  float r = std::nearbyint(q);               // RNE under the default rounding mode
  // r is in [8, 16] for normals (16 means carry into the next binade), [0, 8) for subnormals.
  float v = std::ldexp(r, exp_unbiased - 3);
  if (v >= kE4M3Max) return sign | 0x7e;
  if (v == 0.0f) return sign;
  int ve;
  std::frexp(v, &ve);
  int E = ve - 1;  // v in [2^E, 2^(E+1))
  if (E < -6) {  // subnormal
    return sign | uint8_t(int(std::ldexp(v, 9)));
  }
  int man = int(std::ldexp(v, 3 - E)) - 8;
  return sign | uint8_t(((E + 7) << 3) | man);
}

inline float round_e4m3(float f) { return e4m3_to_f32(f32_to_e4m3(f)); }

// UE8M0: an exponent-only scale 2^(code-127); code 255 is NaN.
inline float ue8m0_to_f32(uint8_t c) {
  if (c == 255) return std::nanf("");
  if (c == 0) return std::ldexp(1.0f, -127);  // subnormal fp32, exact
  return std::bit_cast<float>(uint32_t(c) << 23);
}

// Code of a power-of-two fp32 value (the caller guarantees it is one, 2^-127..2^127).
inline uint8_t f32_pow2_to_ue8m0(float s) {
  int e;
  std::frexp(s, &e);
  return uint8_t(e - 1 + 127);
}

}  // namespace cedar
