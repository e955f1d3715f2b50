// The encoders (model/gguf_encode.h) against the formats' decoders. Q8_0: every value within half
// a step of its block's d (plus d's fp16 rounding), the largest magnitude stored as +-127, values
// that are multiples of an fp16 d kept exactly, a zero block stays zero. Q4_0, Q5_0, Q2_K, Q3_K,
// Q4_K: each value within its (sub-)block's error bound, the relative RMS error of a Gaussian row
// at the format's precision, zero rows exact, the symmetric types' extreme element exact.
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

std::vector<float> gaussian_row(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  // sub-blocks of other shapes: one all positive, one all negative, one spike
  for (int i = 0; i < 32; ++i) {
    x[size_t(32 + i)] = std::fabs(x[size_t(32 + i)]) + 0.01f;
    x[size_t(64 + i)] = -std::fabs(x[size_t(64 + i)]) - 0.03f;
  }
  x[100] = 0.5f;
  return x;
}

std::vector<float> round_trip(uint32_t type, const std::vector<float>& x) {
  const int64_t n = int64_t(x.size());
  std::vector<uint8_t> q(size_t(row_bytes(type, n)));
  encode_row(type, x.data(), n, q.data());
  std::vector<float> y(x.size());
  decode_row(type, q.data(), n, y.data());
  return y;
}

struct LossyCase {
  uint32_t type;
  int group;       // values that share a range (block or sub-block)
  int levels;      // quantization levels of a group
  double max_rms;  // relative RMS error allowed on a Gaussian row
  float slack;     // the coding of the group's scale (and min) against the super-block's largest
};

class GgufEncodeLossy : public ::testing::TestWithParam<LossyCase> {};

TEST_P(GgufEncodeLossy, RoundTripsWithinTheGroupStep) {
  const LossyCase c = GetParam();
  const int64_t n = 256 * 8;
  const std::vector<float> x = gaussian_row(n, 7 + c.type);
  const std::vector<float> y = round_trip(c.type, x);
  double err2 = 0, x2 = 0;
  for (int64_t g = 0; g < n / c.group; ++g) {
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < c.group; ++i) {
      lo = std::min(lo, x[size_t(g * c.group + i)]);
      hi = std::max(hi, x[size_t(g * c.group + i)]);
    }
    // one step of the group's range (half for rounding, half for the scale's own rounding),
    // plus the slack: a K-quant sub-block's scale code is the nearest multiple of d (the
    // super-block's largest scale over 15 .. 63), which may clip its top levels by up to
    // levels x d / 2 (here the spike at x[100] sets d)
    const float step = (hi - lo) / float(c.levels - 1);
    for (int i = 0; i < c.group; ++i) {
      const size_t k = size_t(g * c.group + i);
      EXPECT_LE(std::fabs(y[k] - x[k]), step + c.slack) << "type " << c.type << " at " << k;
      err2 += double(y[k] - x[k]) * double(y[k] - x[k]);
      x2 += double(x[k]) * double(x[k]);
    }
  }
  EXPECT_LE(std::sqrt(err2 / x2), c.max_rms) << "type " << c.type;
  EXPECT_GT(std::sqrt(err2 / x2), 0.0) << "lossy type " << c.type << " lost nothing?";
  const std::vector<float> zero(size_t(n), 0.0f);
  EXPECT_EQ(round_trip(c.type, zero), zero);
  EXPECT_THROW(encode_row(c.type, x.data(), c.type == kQ4_0 || c.type == kQ5_0 ? 48 : 128,
                          std::vector<uint8_t>(1024).data()),
               std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(
    Types, GgufEncodeLossy,
    ::testing::Values(LossyCase{kQ4_0, 32, 16, 0.12, 1e-4f}, LossyCase{kQ5_0, 32, 32, 0.06, 1e-4f},
                      LossyCase{kQ2_K, 16, 4, 0.35, 0.025f}, LossyCase{kQ3_K, 16, 8, 0.18, 0.01f},
                      LossyCase{kQ4_K, 32, 16, 0.10, 0.01f}, LossyCase{kQ5_K, 32, 32, 0.05, 0.01f},
                      LossyCase{kQ6_K, 16, 64, 0.03, 0.01f}));

// Q4_0 and Q5_0 map the element of the largest magnitude to the lowest level: it comes back as
// -bias * fp16(extreme / -bias), exact when that division is.
TEST(GgufEncode, SymmetricTypesKeepTheExtreme) {
  std::vector<float> x(32, 0.0f);
  x[5] = -0.75f;   // /8 and /16 are exact in fp16
  x[9] = 0.1875f;  // 2 d and 4 d
  for (uint32_t type : {kQ4_0, kQ5_0}) {
    const std::vector<float> y = round_trip(type, x);
    EXPECT_EQ(y[5], -0.75f) << type;
    EXPECT_EQ(y[9], 0.1875f) << type;
    EXPECT_EQ(y[0], 0.0f) << type;
  }
  EXPECT_FALSE(encodable(kMXFP4));  // (written from the release's codes, never encoded)
  EXPECT_THROW(encode_row(kMXFP4, x.data(), 32, std::vector<uint8_t>(17).data()),
               std::invalid_argument);
}

}  // namespace
}  // namespace cedar::gguf
