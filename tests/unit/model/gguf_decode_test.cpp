// Reference GGUF block decoders (model/gguf_decode) against the format definitions of
// ../shared/spec/v41-gguf.md §7, written here a second time per element (value index -> the
// bytes it reads), on random blocks: every element must agree bit for bit. Plus hand-made
// blocks whose values are known, fp16 conversions, and the refusals.
#include "model/gguf_decode.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/gguf.h"
#include "numerics/fp16.h"

namespace cedar {
namespace {

using gguf::decode_row;

std::vector<uint8_t> random_blocks(uint32_t type, int blocks, unsigned seed) {
  const gguf::TypeInfo* t = gguf::type_info(type);
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(size_t(blocks) * size_t(t->block_bytes));
  for (auto& x : b) x = uint8_t(rng());
  // keep the fp16 scales finite and moderate: exponent field 8..22
  auto fix_half = [&](size_t at) {
    uint16_t h;
    std::memcpy(&h, &b[at], 2);
    h = uint16_t((h & 0x83ffu) | ((8u + rng() % 15u) << 10));
    std::memcpy(&b[at], &h, 2);
  };
  for (int i = 0; i < blocks; ++i) {
    const size_t o = size_t(i) * size_t(t->block_bytes);
    switch (type) {
      case gguf::kQ8_0:
      case 2:  // Q4_0
      case 6:  // Q5_0
        fix_half(o);
        break;
      case 10:  // Q2_K: d, dmin at 80, 82
        fix_half(o + 80);
        fix_half(o + 82);
        break;
      case 11:  // Q3_K: d at 108
        fix_half(o + 108);
        break;
      case 12:
      case 13:  // Q4_K, Q5_K: d, dmin first
        fix_half(o);
        fix_half(o + 2);
        break;
      case 14:  // Q6_K: d at 208
        fix_half(o + 208);
        break;
      case gguf::kMXFP4:
        b[o] = uint8_t(100 + rng() % 50);
        break;
      default:
        break;
    }
  }
  return b;
}

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The value of element i of a 256-element K block, from the spec's tables (§7.4-7.8).
float k_value(uint32_t type, const uint8_t* b, int i) {
  switch (type) {
    case 10: {  // Q2_K
      const int h = i / 128, p = (i % 128) / 32, k = i % 32;
      const uint8_t s = b[8 * h + 2 * p + k / 16];
      const int q = (b[16 + 32 * h + k] >> (2 * p)) & 3;
      return half(b + 80) * float(s & 15) * float(q) - half(b + 82) * float(s >> 4);
    }
    case 11: {  // Q3_K
      const int h = i / 128, p = (i % 128) / 32, k = i % 32, si = 8 * h + 2 * p + k / 16;
      const uint8_t* sc = b + 96;
      const int low = si < 8 ? sc[si] & 15 : sc[si - 8] >> 4;
      const int scale = (low | (((sc[8 + si % 4] >> (2 * (si / 4))) & 3) << 4)) - 32;
      const int q = (b[32 + 32 * h + k] >> (2 * p)) & 3;
      const bool set = (b[k] >> (4 * h + p)) & 1;
      return half(b + 108) * float(scale) * float(q - (set ? 0 : 4));
    }
    case 12:
    case 13: {  // Q4_K, Q5_K
      const int c = i / 64, half_ = (i % 64) / 32, l = i % 32, j = 2 * c + half_;
      const uint8_t* s = b + 4;
      const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
      const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      const uint8_t* qs = b + (type == 13 ? 48 : 16);
      int q = half_ ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
      if (type == 13) q += ((b[16 + l] >> j) & 1) * 16;
      return half(b) * float(sc) * float(q) - half(b + 2) * float(m);
    }
    default: {  // Q6_K
      const int h = i / 128, r = i % 128, k = r / 32, l = r % 32;
      const uint8_t* ql = b + 64 * h;
      const uint8_t qh = b[128 + 32 * h + l];
      const int low = k == 0   ? ql[l] & 15
                      : k == 1 ? ql[l + 32] & 15
                      : k == 2 ? ql[l] >> 4
                               : ql[l + 32] >> 4;
      const int q = low | (((qh >> (2 * k)) & 3) << 4);
      const int8_t sc = int8_t(b[192 + 8 * h + l / 16 + 2 * k]);
      return half(b + 208) * float(sc) * float(q - 32);
    }
  }
}

TEST(GgufDecode, KQuantsMatchTheFormatDefinitionsElementByElement) {
  for (uint32_t type : {10u, 11u, 12u, 13u, 14u}) {
    const int blocks = 7;
    const auto b = random_blocks(type, blocks, 100 + type);
    std::vector<float> y(size_t(blocks) * 256);
    decode_row(type, b.data(), int64_t(y.size()), y.data());
    const int bb = gguf::type_info(type)->block_bytes;
    for (int blk = 0; blk < blocks; ++blk)
      for (int i = 0; i < 256; ++i) {
        const float want = k_value(type, b.data() + blk * bb, i);
        ASSERT_EQ(std::bit_cast<uint32_t>(y[size_t(blk) * 256 + size_t(i)]),
                  std::bit_cast<uint32_t>(want))
            << gguf::type_info(type)->name << " block " << blk << " element " << i;
      }
  }
}

TEST(GgufDecode, SmallBlocksMatchTheirDefinitions) {
  // Q8_0: d * q; Q4_0: d * (nibble - 8); Q5_0: d * (nibble + 16 * bit - 16), the fifth bit of
  // element i in bit i of the 32-bit qh; MXFP4: doubled E2M1 * 2^(e-128); j and j+16 share a byte
  for (uint32_t type : {8u, 2u, 6u, 39u}) {
    const auto b = random_blocks(type, 5, 7 + type);
    std::vector<float> y(5 * 32);
    decode_row(type, b.data(), 160, y.data());
    const int bb = gguf::type_info(type)->block_bytes;
    static constexpr float kDoubled[16] = {0,     1,  2,  3,  4,  6,  8,  12,
                                           -0.0f, -1, -2, -3, -4, -6, -8, -12};
    for (int blk = 0; blk < 5; ++blk)
      for (int i = 0; i < 32; ++i) {
        const uint8_t* p = b.data() + blk * bb;
        float want;
        if (type == 8) {
          want = half(p) * float(int8_t(p[2 + i]));
        } else if (type == 2) {
          const int nib = i < 16 ? p[2 + i] & 15 : p[2 + i - 16] >> 4;
          want = half(p) * float(nib - 8);
        } else if (type == 6) {
          const int nib = i < 16 ? p[6 + i] & 15 : p[6 + i - 16] >> 4;
          const uint32_t qh =
              uint32_t(p[2]) | uint32_t(p[3]) << 8 | uint32_t(p[4]) << 16 | uint32_t(p[5]) << 24;
          want = half(p) * float(nib + 16 * int((qh >> i) & 1) - 16);
        } else {
          const int nib = i < 16 ? p[1 + i] & 15 : p[1 + i - 16] >> 4;
          want = kDoubled[nib] * std::ldexp(1.0f, int(p[0]) - 128);
        }
        ASSERT_EQ(std::bit_cast<uint32_t>(y[size_t(blk) * 32 + size_t(i)]),
                  std::bit_cast<uint32_t>(want))
            << gguf::type_info(type)->name << " block " << blk << " element " << i;
      }
  }
}

TEST(GgufDecode, HandMadeBlocks) {
  // Q8_0: d = 0.5, q = -3 -> -1.5
  uint8_t q8[34] = {};
  const uint16_t half_05 = 0x3800;
  std::memcpy(q8, &half_05, 2);
  q8[2 + 5] = uint8_t(int8_t(-3));
  float y[256];
  decode_row(gguf::kQ8_0, q8, 32, y);
  EXPECT_EQ(y[5], -1.5f);
  EXPECT_EQ(y[4], 0.0f);
  // MXFP4: e = 127 -> half scale 2^-1; byte 3 = 0x7a: element 3 = code 10 (-2 -> -1), element 19
  // = code 7 (12 -> 6): the OCP value e2m1 * 2^0
  uint8_t mx[17] = {127};
  mx[1 + 3] = 0x7a;
  decode_row(gguf::kMXFP4, mx, 32, y);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_EQ(y[19], 6.0f);
  mx[0] = 255;  // E8M0 NaN
  decode_row(gguf::kMXFP4, mx, 32, y);
  EXPECT_TRUE(std::isnan(y[0]));
  // Q4_K: d = 1, dmin = 0.5, sub-block 0 scale 3 min 2; element 0 nibble 5 -> 3*5 - 0.5*2 = 14
  uint8_t q4k[144] = {};
  const uint16_t one = 0x3c00;
  std::memcpy(q4k, &one, 2);
  std::memcpy(q4k + 2, &half_05, 2);
  q4k[4] = 3;      // sc[0]
  q4k[4 + 4] = 2;  // m[0]
  q4k[16] = 5;     // qs[0] low nibble
  decode_row(12, q4k, 256, y);
  EXPECT_EQ(y[0], 14.0f);
  EXPECT_EQ(y[1], -1.0f);  // nibble 0: -dmin*m
  // F16 / BF16 / I8 rows
  const uint16_t f16s[2] = {0x3c00, 0x0001};  // 1.0 and the smallest subnormal 2^-24
  decode_row(gguf::kF16, reinterpret_cast<const uint8_t*>(f16s), 2, y);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0x1p-24f);
  const uint16_t bf[1] = {0xbf80};
  decode_row(gguf::kBF16, reinterpret_cast<const uint8_t*>(bf), 1, y);
  EXPECT_EQ(y[0], -1.0f);
  const int8_t i8[2] = {-128, 7};
  decode_row(gguf::kI8, reinterpret_cast<const uint8_t*>(i8), 2, y);
  EXPECT_EQ(y[0], -128.0f);
  EXPECT_EQ(y[1], 7.0f);
}

TEST(GgufDecode, Fp16RoundTripsAndRounds) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), uint16_t(h)) << h;
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // the midpoint past 65504 rounds to inf
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);         // half the smallest subnormal: ties to even
  EXPECT_EQ(f32_to_f16(0x1.8p-24f), 0x0002);       // 1.5 units: ties to even (2)
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);  // a tie at 1: stays even
}

TEST(GgufDecode, RefusesWhatItCannotDecode) {
  uint8_t b[64] = {};
  float y[64];
  EXPECT_THROW(decode_row(17, b, 256, y), std::invalid_argument);          // IQ2_XS: not yet
  EXPECT_THROW(decode_row(77, b, 32, y), std::invalid_argument);           // unknown
  EXPECT_THROW(decode_row(gguf::kQ8_0, b, 33, y), std::invalid_argument);  // ragged
  EXPECT_FALSE(gguf::decodable(17));
  EXPECT_TRUE(gguf::decodable(gguf::kMXFP4));
}

}  // namespace
}  // namespace cedar
