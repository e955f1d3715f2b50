// BF16 <-> FP32, round-to-nearest-even. The model keeps activations in BF16 wherever the
// reference holds BF16, so every rounding to bf16 in the engine goes through to_bf16().
#pragma once

#include <bit>
#include <cstdint>

namespace cedar {

struct bf16 {
  uint16_t bits;
};

inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }
inline float bf16_to_f32(bf16 b) { return bf16_to_f32(b.bits); }

// RNE; NaN stays NaN (quiet), infinities stay infinities.
inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline bf16 to_bf16(float f) { return bf16{f32_to_bf16_bits(f)}; }

// Round an fp32 value to the nearest bf16 value, returned as fp32.
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16_bits(f)); }

}  // namespace cedar
