#include "model/gguf_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "numerics/fp16.h"

namespace cedar::gguf {

// ref: ggml-quants.c quantize_row_q8_0_ref (the format's own quantizer)
void encode_q8_0_row(const float* x, int64_t n, uint8_t* dst) {
  if (n % 32) throw std::invalid_argument("Q8_0 rows are whole blocks of 32");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += 34) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(dst, &h, 2);
    for (int i = 0; i < 32; ++i) dst[2 + i] = uint8_t(int8_t(std::round(x[i] * id)));
  }
}

void mxfp4_block_from_pairs(const uint8_t* pairs, uint8_t scale, uint8_t* block) {
  auto code = [pairs](int e) { return e % 2 ? pairs[e / 2] >> 4 : pairs[e / 2] & 15; };
  block[0] = scale;
  for (int j = 0; j < 16; ++j) block[1 + j] = uint8_t(code(j) | code(j + 16) << 4);
}

void mxfp4_block_to_pairs(const uint8_t* block, uint8_t* pairs, uint8_t* scale) {
  auto code = [block](int e) { return e < 16 ? block[1 + e] & 15 : block[1 + e - 16] >> 4; };
  *scale = block[0];
  for (int k = 0; k < 16; ++k) pairs[k] = uint8_t(code(2 * k) | code(2 * k + 1) << 4);
}

}  // namespace cedar::gguf
