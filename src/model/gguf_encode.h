// Encoders of the GGUF block types `cedar convert` writes beyond the lossless forms (the inverse
// of gguf_decode.h, ../shared/spec/v41-gguf.md §7). Q8_0 as llama.cpp's reference quantizer makes
// it: per 32 values d = amax / 127, q = round-half-away(x / d) in fp32, d stored as fp16 (RNE),
// so the stored values are fp16(d) · q.
#pragma once

#include <cstdint>

namespace cedar::gguf {

// n (a multiple of 32) values -> n / 32 blocks of 34 bytes.
void encode_q8_0_row(const float* x, int64_t n, uint8_t* dst);

}  // namespace cedar::gguf
