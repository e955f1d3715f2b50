// FP4 E2M1 codes (bit 3 = sign), values {0, .5, 1, 1.5, 2, 3, 4, 6}; two codes per byte with the
// even element in the low nibble. ref: kernel.py fp4_act_quant / unpack_fp4.
#pragma once

#include <cmath>
#include <cstdint>

namespace cedar {

inline constexpr float kE2M1Max = 6.0f;
inline constexpr float kE2M1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

inline float e2m1_to_f32(uint8_t code) {
  float v = kE2M1Values[code & 7];
  return (code & 8) ? -v : v;
}

// fp32 (already clamped to [-6, 6] by the caller, as the reference does) -> code, RNE: at an exact
// midpoint the even code wins (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4).
// The magnitude code is the number of midpoints below |x| (at or below for the midpoints whose
// upper neighbour is even: 0.75, 1.75, 3.5); the tests hold for a prefix of the midpoints, so they
// are summed without branches (make-model encodes ~10^10 values; NaN gives code 0 as before).
inline uint8_t f32_to_e2m1(float x) {
  const float m = std::fabs(x);
  const int code = int(m > 0.25f) + int(m >= 0.75f) + int(m > 1.25f) + int(m >= 1.75f) +
                   int(m > 2.5f) + int(m >= 3.5f) + int(m > 5.0f);
  return uint8_t(code | (std::signbit(x) ? 8 : 0));
}

inline uint8_t fp4_lo(uint8_t byte) { return byte & 0xf; }
inline uint8_t fp4_hi(uint8_t byte) { return byte >> 4; }
inline uint8_t fp4_pack(uint8_t even, uint8_t odd) { return uint8_t((even & 0xf) | (odd << 4)); }

}  // namespace cedar
