// Encoders of the GGUF block types `cedar convert` writes (the inverse of gguf_decode.h,
// ../shared/spec/v41-gguf.md §7), and the MXFP4 block <-> release FP4 pairs repack both ways. Q8_0
// as llama.cpp's reference quantizer makes it: per 32 values d = amax / 127, q = round-half-away(x
// / d) in fp32, d stored as fp16 (RNE), so the stored values are fp16(d) · q.
#pragma once

#include <cstdint>

namespace cedar::gguf {

// n (a multiple of 32) values -> n / 32 blocks of 34 bytes.
void encode_q8_0_row(const float* x, int64_t n, uint8_t* dst);

// Whether encode_row writes the type: Q8_0, Q4_0, Q5_0, Q2_K .. Q6_K, IQ2_XXS, IQ1_S, IQ1_M.
bool encodable(uint32_t type);
// n values (whole blocks of the type) -> n / block_elems blocks. Q8_0 as above; the others by
// cedar's own quantizer (docs/GGUF.md "Quantizers"): each block's or sub-block's range read
// off its values (symmetric types: the element of the largest magnitude maps to the lowest
// level; K-quants: [min(0, lo), hi] over the levels, the sub-block scales and mins coded against
// the largest; IQ types: a search over their grids), the fp16 super-scales rounded first and every
// code chosen against the values the decoder will compute. Not llama.cpp's quantizers: its files
// decode the same way, only the choice of codes differs. Throws std::invalid_argument otherwise.
void encode_row(uint32_t type, const float* x, int64_t n, uint8_t* dst);

// One MXFP4 block of 17 bytes (ggml: the UE8M0 scale byte, then element j in the low nibble of
// byte j and element j + 16 in its high nibble) from and to the release's 32 elements: 16 bytes of
// E2M1 pairs (elements 2k, 2k + 1 in the low, high nibble of byte k) and their UE8M0 byte. The
// same codes and scale both ways (exact).
void mxfp4_block_from_pairs(const uint8_t* pairs, uint8_t scale, uint8_t* block);
void mxfp4_block_to_pairs(const uint8_t* block, uint8_t* pairs, uint8_t* scale);

}  // namespace cedar::gguf
