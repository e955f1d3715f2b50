#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "numerics/bf16.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"
#include "numerics/q8b.h"

namespace cedar {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even -> 1.
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even) -> 1+2^-6.
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(round_bf16(1.0f + 5 * std::ldexp(1.0f, -9)), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_TRUE(std::isnan(round_bf16(std::nanf(""))));
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
}

TEST(E4M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    float v = e4m3_to_f32(uint8_t(c));
    if (std::isnan(v)) continue;
    EXPECT_EQ(f32_to_e4m3(v), uint8_t(c)) << c;
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(E4M3, SaturatesAndRoundsTiesToEven) {
  EXPECT_EQ(round_e4m3(1000.0f), 448.0f);
  EXPECT_EQ(round_e4m3(-1e30f), -448.0f);
  EXPECT_EQ(round_e4m3(464.0f), 448.0f);  // beyond max: saturate, never NaN
  // 1.0625 is halfway between 1 (even mantissa 000) and 1.125 (001) -> 1.
  EXPECT_EQ(round_e4m3(1.0625f), 1.0f);
  // 1.1875 is halfway between 1.125 (001) and 1.25 (010) -> 1.25.
  EXPECT_EQ(round_e4m3(1.1875f), 1.25f);
  // subnormal ties: 0.5 * 2^-9 -> 0 (even), 1.5 * 2^-9 -> 2 * 2^-9.
  EXPECT_EQ(round_e4m3(std::ldexp(1.0f, -10)), 0.0f);
  EXPECT_EQ(round_e4m3(std::ldexp(3.0f, -10)), std::ldexp(1.0f, -8));
  EXPECT_EQ(round_e4m3(std::ldexp(1.0f, -12)), 0.0f);
  // carry from the largest subnormal into the smallest normal: 7.5 * 2^-9 -> 8 * 2^-9 = 2^-6.
  EXPECT_EQ(round_e4m3(std::ldexp(7.5f, -9)), std::ldexp(1.0f, -6));
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
}

TEST(E2M1, TiesGoToEvenCode) {
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(0.25f)), 0.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(0.75f)), 1.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(1.25f)), 1.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(1.75f)), 2.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(2.5f)), 2.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(3.5f)), 4.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(5.0f)), 4.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(-5.1f)), -6.0f);
  EXPECT_EQ(f32_to_e2m1(-0.1f), 8);  // sign kept on a zero code
  for (int c = 0; c < 16; ++c) EXPECT_EQ(f32_to_e2m1(e2m1_to_f32(uint8_t(c))), c == 8 ? 8 : c);
  EXPECT_EQ(fp4_pack(0x3, 0xa), 0xa3);
}

// An independent definition: the nearest of the 8 magnitudes, an exact tie to the even code.
uint8_t nearest_e2m1(float x) {
  const double m = std::fabs(double(x));
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const double d = std::fabs(m - kE2M1Values[c]), db = std::fabs(m - kE2M1Values[best]);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return uint8_t(best | (std::signbit(x) ? 8 : 0));
}

TEST(E2M1, EveryFloatInRangeRoundsToNearestEven) {
  // every fp32 value of [0, 6] (about 1.09e9 of them would be slow): all values near each
  // midpoint and each code value (+-64 ulps), and a strided sweep of the rest
  std::vector<float> xs;
  for (float v : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f,
                  5.0f, 6.0f}) {
    float lo = v, hi = v;
    for (int k = 0; k < 64; ++k) {
      xs.push_back(lo);
      xs.push_back(hi);
      lo = std::nextafter(lo, -1.0f);
      hi = std::nextafter(hi, 7.0f);
    }
  }
  for (uint32_t u = 0; u <= 0x40C00000u; u += 997) xs.push_back(std::bit_cast<float>(u));
  for (float x : xs) {
    if (!(x >= 0.0f && x <= 6.0f)) continue;
    ASSERT_EQ(f32_to_e2m1(x), nearest_e2m1(x)) << x;
    ASSERT_EQ(f32_to_e2m1(-x), nearest_e2m1(-x)) << -x;
  }
  EXPECT_EQ(f32_to_e2m1(std::nanf("")), 0);
}

TEST(Ue8m0, DecodesPowersOfTwo) {
  EXPECT_EQ(ue8m0_to_f32(127), 1.0f);
  EXPECT_EQ(ue8m0_to_f32(120), std::ldexp(1.0f, -7));
  EXPECT_TRUE(std::isnan(ue8m0_to_f32(255)));
  EXPECT_EQ(f32_pow2_to_ue8m0(std::ldexp(1.0f, -7)), 120);
}

// Q8B (numerics/q8b.h): the scale is the smallest bf16 value >= max|w| / 127, so the largest
// magnitude never overflows and codes are within half a step of the value; an all-zero block has
// scale 0 and zero codes; a block with a NaN or an infinity gets a NaN scale.
TEST(Q8b, ScaleCoversTheBlockAndCodesRoundToNearest) {
  std::vector<uint16_t> w(32);
  for (int trial = 0; trial < 500; ++trial) {
    const float mag = std::ldexp(1.0f, trial % 60 - 40);
    for (int i = 0; i < 32; ++i)
      w[size_t(i)] = f32_to_bf16_bits(mag * float((trial * 37 + i * 11) % 255 - 127) / 127.0f);
    uint8_t codes[32];
    const uint16_t sb = q8b_quantize_block(w.data(), 32, codes);
    const float s = bf16_to_f32(sb);
    float mx = 0.0f;
    for (uint16_t b : w) mx = std::fmax(mx, std::fabs(bf16_to_f32(b)));
    ASSERT_GE(s * 127.0f, mx) << trial;
    if (mx > 0) {  // the smallest such scale
      ASSERT_LT(bf16_to_f32(uint16_t(sb - 1)) * 127.0f, mx) << trial;
    }
    for (int i = 0; i < 32; ++i) {
      const float v = bf16_to_f32(w[size_t(i)]);
      ASSERT_LE(codes[i] & 0x7F, 127);
      ASSERT_LE(std::fabs(q8b_value(codes[i], sb) - v), 0.5f * s) << trial << " " << i;
      if (v < 0) {
        ASSERT_TRUE(codes[i] & 0x80);
      }
    }
  }
  std::fill(w.begin(), w.end(), uint16_t(0));
  uint8_t codes[32];
  EXPECT_EQ(q8b_quantize_block(w.data(), 32, codes), 0);
  for (uint8_t c : codes) EXPECT_EQ(c, 0);
  w[5] = 0x7FC0;  // NaN
  EXPECT_TRUE(std::isnan(bf16_to_f32(q8b_quantize_block(w.data(), 32, codes))));
  w[5] = 0xFF80;  // -inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(q8b_quantize_block(w.data(), 32, codes))));
  EXPECT_EQ(q8b_bytes(10, 64), 10 * 64 + 10 * 2 * 2);
}

}  // namespace
}  // namespace cedar
