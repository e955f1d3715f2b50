// IEEE 754 binary16 (GGUF's F16 tensors and the d/dmin scales of its block types): exact
// conversion to fp32, subnormals, infinities and NaNs included.
#pragma once

#include <bit>
#include <cstdint>

namespace cedar {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));  // inf, NaN
  if (e != 0) return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
  // zero or subnormal: m x 2^-24, exact in fp32
  const float v = float(m) * 0x1p-24f;
  return sign ? -v : v;
}

// round to nearest even (the converter's scales; overflow gives inf)
inline uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half (or zero), in units of 2^-24
    const float v = std::bit_cast<float>(a) * 0x1p24f;  // exact
    uint32_t q = uint32_t(v);
    const float rem = v - float(q);                    // exact
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;  // (0x400 is the smallest normal: right)
    return uint16_t(sign | q);
  }
  const uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return uint16_t(sign | ((rounded - (112u << 23)) >> 13));
}

}  // namespace cedar
