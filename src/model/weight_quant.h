// The release's weight quantizers (what make-model writes and what a GGUF tensor in an FP8/FP4
// role is re-encoded with): E4M3 codes with a UE8M0 scale per 32x32 block or per (row, 32
// channels), E2M1 pairs with a UE8M0 scale per (row, 32 channels). The scale is the smallest power
// of two that brings the block's largest magnitude within the code's range, so values that already
// are codes times a power of two (an FP8 checkpoint's weights decoded to BF16) come back as the
// same values -- each function returns how many values it could not represent exactly.
#pragma once

#include <cstdint>

namespace cedar {

// The smallest k with amax / 2^k <= limit (clamped to the UE8M0 range); 0 for amax 0.
int pow2_scale_exponent(double amax, double limit);

// w [o, i] -> E4M3 codes [o, i] + UE8M0 scales [ceil(o/32), ceil(i/32)].
int64_t quantize_fp8_blocks(const float* w, int64_t o, int64_t i, uint8_t* codes, uint8_t* scales);
// w [rows, d] (d a multiple of 32) -> E4M3 codes + UE8M0 scales [rows, d/32]: the Engram tables.
int64_t quantize_fp8_rows(const float* w, int64_t rows, int64_t d, uint8_t* codes, uint8_t* scales);
// w [o, i] (i a multiple of 32) -> E2M1 pairs [o, i/2] (even element in the low nibble) + UE8M0
// scales [o, i/32]: the routed experts.
int64_t quantize_fp4(const float* w, int64_t o, int64_t i, uint8_t* packed, uint8_t* scales);

}  // namespace cedar
