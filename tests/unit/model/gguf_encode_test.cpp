// The Q8_0 encoder (model/gguf_encode.h) against the format's decoder: every value within half a
// step of its block's d (plus d's fp16 rounding), the largest magnitude stored as +-127, values
// that are multiples of an fp16 d kept exactly, a zero block stays zero.
#include "model/gguf_encode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "model/gguf.h"
#include "model/gguf_decode.h"
#include "numerics/fp16.h"

namespace cedar::gguf {
namespace {

TEST(GgufEncode, Q8_0RoundTripsWithinHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 0.05f);
  const int64_t len = 32 * 40;
  std::vector<float> x(len), y(len);
  for (float& v : x) v = n(rng);
  for (int i = 0; i < 32; ++i) x[size_t(64 + i)] = 0.0f;  // block 2: all zero
  std::vector<uint8_t> q(size_t(len / 32 * 34));
  encode_q8_0_row(x.data(), len, q.data());
  decode_row(kQ8_0, q.data(), len, y.data());
  for (int64_t b = 0; b < len / 32; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(b * 32 + i)]));
    uint16_t h;
    std::memcpy(&h, q.data() + b * 34, 2);
    const float d = f16_to_f32(h);
    EXPECT_EQ(h, f32_to_f16(amax / 127.0f)) << b;
    int max_q = 0;
    for (int i = 0; i < 32; ++i) {
      const size_t k = size_t(b * 32 + i);
      // q = round(x * 127 / amax): within half a step of the exact d, then scaled by fp16(d)
      EXPECT_LE(std::fabs(y[k] - x[k]),
                0.5f * amax / 127.0f + 128.0f * std::fabs(d - amax / 127.0f) + 1e-9f)
          << k;
      max_q = std::max(max_q, std::abs(int(int8_t(q[size_t(b * 34 + 2 + i)]))));
    }
    EXPECT_EQ(max_q, amax > 0 ? 127 : 0) << b;
  }
  // multiples of an fp16 d up to 127 d come back exactly
  const float d = f16_to_f32(f32_to_f16(0.01f));
  for (int i = 0; i < 32; ++i) x[size_t(i)] = d * float(i * 4 - 64 + (i == 31 ? 64 - 1 : 0));
  x[0] = 127.0f * d;
  encode_q8_0_row(x.data(), 32, q.data());
  decode_row(kQ8_0, q.data(), 32, y.data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[size_t(i)], x[size_t(i)]) << i;
  EXPECT_THROW(encode_q8_0_row(x.data(), 33, q.data()), std::invalid_argument);
}

}  // namespace
}  // namespace cedar::gguf
