// Q8B: a bf16 weight requantized to 8 bits at load (kernel_table.h WeightFormat::kQ8B) -- the
// vocabulary head under `--head-type q8`. Per 32-value block of a row: one bf16 scale s and 32
// sign-magnitude int8 codes (bit 7 the sign, bits 0-6 |q| <= 127); element value q x s.
//
// Why this shape: the head is the largest single read of a decode step (a bf16 [vocab, hidden]
// matrix, 529 MB of the 1.25 GB the `anchor` preset reads per token), and 8 bits with a scale
// per 32 values is what the community GGUF files ship it as (Q8_0). A bf16 scale rather than
// Q8_0's fp16 makes q x s exact in fp32 (7 + 8 significant bits) and in the bf16 dot products
// (both factors bf16 values); sign-magnitude codes decode by one 128-entry table lookup plus the
// sign bit, as E4M3 codes do.
//
// Rounding: s is the smallest bf16 value >= max|w| / 127 (so no code overflows), q = w / s
// rounded to nearest, ties to even. A block holding a NaN or an infinity gets a NaN scale (its
// products stay NaN, as the bf16 weight's would make them).
#pragma once

#include <cmath>
#include <cstdint>

#include "numerics/bf16.h"

namespace cedar {

constexpr int kQ8bBlock = 32;

// the smallest bf16 value >= v (v >= 0, finite)
inline uint16_t bf16_ceil_bits(float v) {
  const uint16_t b = f32_to_bf16_bits(v);
  return bf16_to_f32(b) >= v ? b : uint16_t(b + 1);
}

// One block of n <= 32 bf16 values -> n codes and the block's scale (bf16 bits).
inline uint16_t q8b_quantize_block(const uint16_t* w, int n, uint8_t* codes) {
  float mx = 0.0f;
  bool finite = true;
  for (int i = 0; i < n; ++i) {
    const float v = bf16_to_f32(w[i]);
    if (!std::isfinite(v)) finite = false;
    mx = std::fmax(mx, std::fabs(v));
  }
  if (!finite || mx == 0.0f) {
    for (int i = 0; i < n; ++i) codes[i] = 0;
    return finite ? 0 : 0x7FC0;
  }
  const uint16_t sb = bf16_ceil_bits(mx / 127.0f);
  const float s = bf16_to_f32(sb);
  for (int i = 0; i < n; ++i) {
    const float v = bf16_to_f32(w[i]);
    const int q = int(std::nearbyint(std::fabs(v) / s));  // <= 127: s >= max|w| / 127
    codes[i] = uint8_t((v < 0 ? 0x80 : 0) | (q > 127 ? 127 : q));
  }
  return sb;
}

// A row of K bf16 values (K % 32 == 0) -> K codes and K / 32 scales.
inline void q8b_quantize_row(const uint16_t* w, int K, uint8_t* codes, uint16_t* scales) {
  for (int b = 0; b < K / kQ8bBlock; ++b)
    scales[b] = q8b_quantize_block(w + b * kQ8bBlock, kQ8bBlock, codes + b * kQ8bBlock);
}

// Bytes of a [rows, K] weight in Q8B (codes and scales).
inline int64_t q8b_bytes(int64_t rows, int64_t K) { return rows * K + rows * (K / kQ8bBlock) * 2; }

// The value of a code under a block scale (exact in fp32).
inline float q8b_value(uint8_t code, uint16_t scale) {
  const float m = float(code & 0x7F) * bf16_to_f32(scale);
  return code & 0x80 ? -m : m;
}

}  // namespace cedar
