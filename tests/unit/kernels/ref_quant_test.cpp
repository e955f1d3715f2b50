// Reference quantizers (NUMERICS §Q) against hand-computed cases: ties, saturation, zero blocks,
// the amax floors, packing order.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"

namespace cedar {
namespace {

using namespace kernels::ref;

TEST(FastRoundScale, RoundsUpToAPowerOfTwo) {
  const float inv448 = float(1.0 / 448.0);
  // amax 448 -> f32(448 * f32(1/448)) = 1 exactly? f32(1/448) is rounded, so the product may land
  // just above 1 and round the scale up to 2: check against the bit rule directly.
  const float t = 448.0f * inv448;
  const float expect = (std::bit_cast<uint32_t>(t) & 0x7fffff) ? 2.0f : 1.0f;
  EXPECT_EQ(fast_round_scale(448.0f, inv448), expect);
  EXPECT_EQ(fast_round_scale(224.0f * 1.5f, inv448), 1.0f);           // 0.75 -> 1
  EXPECT_EQ(fast_round_scale(1e-4f, inv448), std::ldexp(1.0f, -22));  // 2.2e-7 -> 2^-22
  EXPECT_EQ(fast_round_scale(6.0f, float(1.0 / 6.0)) >= 1.0f, true);
}

TEST(E4M3Rne, MatchesNumericsEncoderOnEveryBinade) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> mant(0, 0x7fffff);
  for (int e = -30; e <= 10; ++e)
    for (int k = 0; k < 4000; ++k) {
      float v = std::ldexp(1.0f + float(mant(rng)) / 8388608.0f, e);
      if (k & 1) v = -v;
      ASSERT_EQ(e4m3_rne(v), f32_to_e4m3(v)) << v;
    }
  // every midpoint between adjacent codes, and the codes themselves
  for (int c = 0; c < 0x7e; ++c) {
    const float a = e4m3_to_f32(uint8_t(c)), b = e4m3_to_f32(uint8_t(c + 1));
    const float mid = (a + b) / 2;
    EXPECT_EQ(e4m3_rne(a), f32_to_e4m3(a));
    EXPECT_EQ(e4m3_rne(mid), f32_to_e4m3(mid)) << mid;
    EXPECT_EQ(e4m3_rne(-mid), f32_to_e4m3(-mid)) << mid;
  }
  EXPECT_EQ(e4m3_rne(1e9f), 0x7e);
  EXPECT_EQ(e4m3_rne(-1e9f), 0xfe);
  EXPECT_EQ(e4m3_rne(-0.0f), 0x80);
}

TEST(ActQuant, HandComputedBlock) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;  // amax 1 -> t = f32(1 * f32(1/448)): mantissa != 0 -> s = 2^-8
  x[1] = -0.5f;
  x[2] = round_bf16(1.0f / 3.0f);
  x[3] = std::ldexp(1.0f, -20);  // tiny: q = 2^-12 -> below half of 2^-9 -> 0
  // 1 + 2^-4 at s = 2^-8 is 272 = 256 * (1 + 1/16): exactly between 256 and 288 -> even (256)
  x[4] = 1.0f + std::ldexp(1.0f, -4);
  std::vector<uint8_t> q(32), s(1);
  act_quant(x.data(), 32, q.data(), s.data());
  EXPECT_EQ(s[0], 127 - 8);
  EXPECT_EQ(e4m3_to_f32(q[0]), 256.0f);
  EXPECT_EQ(e4m3_to_f32(q[1]), -128.0f);
  EXPECT_EQ(e4m3_to_f32(q[2]), 88.0f);  // 85.33.. -> grid step 8 above 64 -> 88
  EXPECT_EQ(e4m3_to_f32(q[3]), 0.0f);
  EXPECT_EQ(e4m3_to_f32(q[4]), 256.0f);
  EXPECT_EQ(q[5], 0);
}

TEST(ActQuant, ZeroBlockUsesTheAmaxFloor) {
  std::vector<float> x(64, 0.0f);
  x[40] = 3.0f;
  std::vector<uint8_t> q(64), s(2);
  act_quant(x.data(), 64, q.data(), s.data());
  // block 0: amax floor 1e-4 -> s = 2^ceil(log2(1e-4/448)) = 2^-22
  EXPECT_EQ(s[0], 127 - 22);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[size_t(i)], 0);
  // block 1: amax 3 -> 3/448 = 0.0067 -> 2^-7; 3 / 2^-7 = 384 (exact E4M3)
  EXPECT_EQ(s[1], 127 - 7);
  EXPECT_EQ(e4m3_to_f32(q[40]), 384.0f);
}

TEST(ActQuant, DequantizedValuesAreBf16AndClose) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> x(256);
  for (auto& v : x) v = round_bf16(nd(rng));
  std::vector<uint8_t> q(256), s(8);
  std::vector<float> d(256);
  act_quant(x.data(), 256, q.data(), s.data());
  dequant_fp8(q.data(), s.data(), 256, d.data());
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(d[size_t(i)], round_bf16(d[size_t(i)]));
    EXPECT_LE(std::fabs(d[size_t(i)] - x[size_t(i)]), std::fabs(x[size_t(i)]) / 16 + 1e-3f);
  }
}

TEST(Fp4E4m3, HandComputedBlockAndTies) {
  std::vector<float> x(16, 0.0f);
  // amax 6 -> s = E4M3(1) = 1; values map straight onto the grid
  x[0] = 6.0f;
  x[1] = 0.25f;  // tie 0 / 0.5 -> 0
  x[2] = 0.75f;  // tie 0.5 / 1 -> 1
  x[3] = 1.25f;  // tie -> 1
  x[4] = 1.75f;  // tie -> 2
  x[5] = 2.5f;   // tie -> 2
  x[6] = 3.5f;   // tie -> 4
  x[7] = -5.0f;  // tie -> -4
  x[8] = -0.1f;  // -> -0 (sign kept)
  std::vector<uint8_t> p(8), s(1);
  fp4_act_quant_e4m3(x.data(), 16, p.data(), s.data());
  EXPECT_EQ(e4m3_to_f32(s[0]), 1.0f);
  const float expect[9] = {6, 0, 1, 1, 2, 2, 4, -4, -0.0f};
  std::vector<float> d(16);
  dequant_fp4_e4m3(p.data(), s.data(), 16, d.data());
  for (int i = 0; i < 9; ++i) EXPECT_EQ(d[size_t(i)], expect[i]) << i;
  EXPECT_TRUE(std::signbit(d[8]));
  // packing: element 0 in the low nibble of byte 0
  EXPECT_EQ(fp4_lo(p[0]), 7);  // 6.0
  EXPECT_EQ(fp4_hi(p[0]), 0);  // 0
}

TEST(Fp4E4m3, ScaleIsE4M3RoundedAndFloored) {
  std::vector<float> x(32, 0.0f);
  x[0] = 7.0f;  // block 0: amax/6 = 1.1666 -> E4M3 1.125; 7/1.125 = 6.22 -> clamp 6
  // block 1 all zero -> floor 6*2^-9 -> s = 2^-9 (the smallest subnormal)
  std::vector<uint8_t> p(16), s(2);
  fp4_act_quant_e4m3(x.data(), 32, p.data(), s.data());
  EXPECT_EQ(e4m3_to_f32(s[0]), 1.125f);
  EXPECT_EQ(e4m3_to_f32(s[1]), std::ldexp(1.0f, -9));
  std::vector<float> d(32);
  dequant_fp4_e4m3(p.data(), s.data(), 32, d.data());
  EXPECT_EQ(d[0], 6.75f);  // saturated code 6 times the scale
  for (int i = 16; i < 32; ++i) EXPECT_EQ(d[size_t(i)], 0.0f);
}

TEST(Fp4Ue8m0, PowerOfTwoScaleAndFloor) {
  std::vector<float> x(64, 0.0f);
  x[0] = 3.0f;  // amax 3 -> 3 * f32(1/6) = 0.5 (+ulp?) -> bit rule
  x[1] = -1.0f;
  std::vector<uint8_t> p(32), s(2);
  fp4_act_quant_ue8m0(x.data(), 64, p.data(), s.data());
  const float sc = fast_round_scale(3.0f, float(1.0 / 6.0));
  EXPECT_EQ(ue8m0_to_f32(s[0]), sc);
  // zero block: amax floor 6*2^-126 -> scale about 2^-126 (a tiny power of two, never zero)
  EXPECT_GT(ue8m0_to_f32(s[1]), 0.0f);
  EXPECT_LE(ue8m0_to_f32(s[1]), std::ldexp(1.0f, -125));
  std::vector<float> d(64);
  dequant_fp4_ue8m0(p.data(), s.data(), 64, d.data());
  EXPECT_EQ(d[0], 3.0f);
  EXPECT_EQ(d[1], -1.0f);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(d[size_t(i)], 0.0f);
}

}  // namespace
}  // namespace cedar
