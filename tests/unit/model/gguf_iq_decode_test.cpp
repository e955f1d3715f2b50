// The IQ block types (IQ2_XXS, IQ1_S, IQ1_M; kernels/ggml_blocks.h through model/gguf_decode):
// the grids generated from ggml-common.h have the properties the formats rely on; the decoders
// agree bit for bit with the definitions written here a second time per element (element index ->
// the bytes and grid entry it reads) on random blocks; hand-made blocks give the values worked
// out by hand; the IQ2_XXS encoder's blocks decode close to its input.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "ggml_iq_tables.h"
#include "model/gguf.h"
#include "model/gguf_decode.h"
#include "model/gguf_encode.h"
#include "numerics/fp16.h"

namespace cedar {
namespace {

namespace t = ggml::tables;

uint16_t u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
int8_t grid_byte(uint64_t g, int j) { return int8_t(uint8_t(g >> (8 * j))); }

TEST(GgufIq, GridsHaveTheFormatsProperties) {
  std::set<uint64_t> seen;
  for (uint64_t g : t::kIq2xxsGrid) {
    for (int j = 0; j < 8; ++j) {
      const int m = uint8_t(g >> (8 * j));
      EXPECT_TRUE(m == 8 || m == 25 || m == 43) << std::hex << g;
    }
    EXPECT_TRUE(seen.insert(g).second);
  }
  EXPECT_EQ(t::kIq2xxsGrid[0], 0x0808080808080808u);
  for (int i = 0; i < 128; ++i)  // the eighth sign makes the count of minus signs even
    EXPECT_EQ(t::kKsignsIq2xs[i], i | (std::popcount(unsigned(i)) % 2) << 7) << i;
  for (int j = 0; j < 8; ++j) EXPECT_EQ(t::kKmaskIq2xs[j], 1 << j);
  seen.clear();
  for (uint64_t g : t::kIq1sGrid) {
    for (int j = 0; j < 8; ++j) EXPECT_LE(std::abs(grid_byte(g, j)), 1) << std::hex << g;
    EXPECT_TRUE(seen.insert(g).second);
  }
}

// The element definitions (spec §7.9; ggml-common.h's block layouts for IQ1_S and IQ1_M).
float iq2_xxs_value(const uint8_t* b, int i) {
  const int g = i / 32, run = (i % 32) / 8, j = i % 8;
  const uint32_t aux = u32(b + 2 + 8 * g + 4);
  const float db = f16_to_f32(u16(b)) * (0.5f + float(aux >> 28)) * 0.25f;
  const int magnitude = uint8_t(t::kIq2xxsGrid[b[2 + 8 * g + run]] >> (8 * j));
  const bool minus = t::kKsignsIq2xs[(aux >> (7 * run)) & 127] >> j & 1;
  return db * float(magnitude) * (minus ? -1.0f : 1.0f);
}
float iq1_s_value(const uint8_t* b, int i) {
  const int g = i / 32, run = (i % 32) / 8, j = i % 8;
  const uint16_t qh = u16(b + 2 + 32 + 2 * g);
  const float dl = f16_to_f32(u16(b)) * float(2 * ((qh >> 12) & 7) + 1);
  const int index = b[2 + 4 * g + run] + 256 * ((qh >> (3 * run)) & 7);
  const float delta = qh >> 15 ? -0.125f : 0.125f;
  return dl * (float(grid_byte(t::kIq1sGrid[index], j)) + delta);
}
float iq1_m_value(const uint8_t* b, int i) {
  const int g = i / 32, run = (i % 32) / 8, j = i % 8;
  uint16_t d16 = 0;
  for (int w = 0; w < 4; ++w) d16 |= uint16_t((u16(b + 48 + 2 * w) >> 12) << (4 * w));
  const uint16_t sc = u16(b + 48 + 2 * (g / 2));
  const int s3 = (sc >> (6 * (g % 2) + 3 * (run / 2))) & 7;
  const float dl = f16_to_f32(d16) * float(2 * s3 + 1);
  const uint8_t qh = b[32 + 2 * g + run / 2];
  const int nib = run % 2 ? qh >> 4 : qh & 15;
  const int index = b[4 * g + run] + 256 * (nib & 7);
  const float delta = nib & 8 ? -0.125f : 0.125f;
  return dl * (float(grid_byte(t::kIq1sGrid[index], j)) + delta);
}

// random blocks with moderate fp16 scales
std::vector<uint8_t> random_blocks(uint32_t type, int blocks, unsigned seed) {
  const int bytes = gguf::type_info(type)->block_bytes;
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(size_t(blocks * bytes));
  for (auto& x : b) x = uint8_t(rng());
  for (int i = 0; i < blocks; ++i) {
    uint8_t* p = b.data() + i * bytes;
    const uint16_t h = f32_to_f16(std::ldexp(1.0f + float(rng() % 64) / 64.0f, -8));
    if (type == gguf::kIQ1_M) {
      for (int w = 0; w < 4; ++w)
        p[48 + 2 * w + 1] = uint8_t((p[49 + 2 * w] & 15) | ((h >> (4 * w)) & 15) << 4);
    } else {
      std::memcpy(p, &h, 2);
    }
  }
  return b;
}

TEST(GgufIq, DecodersMatchTheDefinitionsElementByElement) {
  const struct {
    uint32_t type;
    float (*value)(const uint8_t*, int);
  } types[] = {
      {gguf::kIQ2_XXS, iq2_xxs_value}, {gguf::kIQ1_S, iq1_s_value}, {gguf::kIQ1_M, iq1_m_value}};
  for (const auto& tp : types) {
    ASSERT_TRUE(gguf::decodable(tp.type));
    const int blocks = 9, bytes = gguf::type_info(tp.type)->block_bytes;
    const std::vector<uint8_t> b = random_blocks(tp.type, blocks, 7 + tp.type);
    std::vector<float> y(size_t(blocks) * 256);
    gguf::decode_row(tp.type, b.data(), int64_t(y.size()), y.data());
    for (int k = 0; k < blocks; ++k)
      for (int i = 0; i < 256; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(y[size_t(k * 256 + i)]),
                  std::bit_cast<uint32_t>(tp.value(b.data() + k * bytes, i)))
            << gguf::type_info(tp.type)->name << " block " << k << " element " << i;
  }
}

TEST(GgufIq, HandMadeBlocks) {
  // IQ2_XXS, d = 1: group 0 scale 1 (db = 1.5 / 4 = 0.375), grid 0 (all 8s): 3.0 each; run 1
  // sign index 1 = pattern 129 (elements 0 and 7 negative)
  {
    uint8_t b[66] = {};
    const uint16_t one = 0x3c00;
    std::memcpy(b, &one, 2);
    const uint32_t aux = (1u << 28) | (1u << 7);
    std::memcpy(b + 6, &aux, 4);
    float y[256];
    gguf::decode_row(gguf::kIQ2_XXS, b, 256, y);
    for (int j = 0; j < 8; ++j) EXPECT_EQ(y[j], 3.0f);
    EXPECT_EQ(y[8], -3.0f);
    EXPECT_EQ(y[9], 3.0f);
    EXPECT_EQ(y[15], -3.0f);
    EXPECT_EQ(y[32], 8 * 0.125f);  // group 1: scale 0, d * 0.5 / 4 = 0.125
  }
  // IQ1_S, d = 2: group 0 with qh = 0x8000 | 2 << 12 (scale 5, delta -1/8), runs on grid 0
  // (all -1): 2 * 5 * (-1 - 0.125) = -11.25
  {
    uint8_t b[50] = {};
    const uint16_t two = 0x4000, qh = 0x8000 | 2 << 12;
    std::memcpy(b, &two, 2);
    std::memcpy(b + 34, &qh, 2);
    float y[256];
    gguf::decode_row(gguf::kIQ1_S, b, 256, y);
    EXPECT_EQ(y[0], -11.25f);
    EXPECT_EQ(y[31], -11.25f);
    EXPECT_EQ(y[32], 2 * (-1 + 0.125f));  // group 1: scale 1, delta +1/8
  }
  // IQ1_M: d = 1 (0x3c00 spread over the scale words' top nibbles), group 0's halves scales 1 and
  // 3 (3-bit codes 0 and 1), run 1's nibble 8 (delta -1/8), grid 0
  {
    uint8_t b[56] = {};
    const uint16_t sc[4] = {uint16_t(1 << 3), 0, uint16_t(0xc << 12), uint16_t(0x3 << 12)};
    std::memcpy(b + 48, sc, 8);
    b[32] = 0x80;
    float y[256];
    gguf::decode_row(gguf::kIQ1_M, b, 256, y);
    EXPECT_EQ(y[0], -1 + 0.125f);
    EXPECT_EQ(y[8], -1 - 0.125f);
    EXPECT_EQ(y[16], 3 * (-1 + 0.125f));
  }
}

TEST(GgufIq, Iq2XxsEncoderRoundTrips) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const int n = 1024;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = nd(rng);
  for (int i = 256; i < 288; ++i) x[size_t(i)] *= 8;  // one loud group
  std::vector<uint8_t> b(size_t(gguf::row_bytes(gguf::kIQ2_XXS, n)));
  gguf::encode_row(gguf::kIQ2_XXS, x.data(), n, b.data());
  gguf::decode_row(gguf::kIQ2_XXS, b.data(), n, y.data());
  double err = 0, ref = 0;
  int sign_kept = 0;
  for (int i = 0; i < n; ++i) {
    err += (x[size_t(i)] - y[size_t(i)]) * double(x[size_t(i)] - y[size_t(i)]);
    ref += double(x[size_t(i)]) * x[size_t(i)];
    sign_kept += (x[size_t(i)] < 0) == (y[size_t(i)] < 0);
  }
  const double rms = std::sqrt(err / ref);
  EXPECT_LT(rms, 0.6) << rms;        // 2.06 bits per value
  EXPECT_GT(sign_kept, n * 9 / 10);  // only parity flips the smallest of a run
  std::vector<float> zero(256, 0.0f), z(256);
  gguf::encode_row(gguf::kIQ2_XXS, zero.data(), 256, b.data());
  gguf::decode_row(gguf::kIQ2_XXS, b.data(), 256, z.data());
  for (float v : z) EXPECT_EQ(v, 0.0f);
  std::printf("IQ2_XXS relative RMS error of a Gaussian row: %.3f\n", rms);
}

// IQ1_S / IQ1_M (1.56 / 1.75 bits per value): the encoder's blocks decode close to a Gaussian row
// -- far closer than the best single-level fit -- and keep the sign of every clearly signed value.
TEST(GgufIq, Iq1EncodersRoundTrip) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const int n = 1024;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = nd(rng);
  for (int i = 512; i < 544; ++i) x[size_t(i)] *= 6;  // one loud group
  double sd = 0;
  for (float v : x) sd += double(v) * v;
  sd = std::sqrt(sd / n);
  for (uint32_t type : {gguf::kIQ1_S, gguf::kIQ1_M}) {
    std::vector<uint8_t> b(size_t(gguf::row_bytes(type, n)));
    gguf::encode_row(type, x.data(), n, b.data());
    gguf::decode_row(type, b.data(), n, y.data());
    double err = 0, ref = 0;
    int clear = 0, kept = 0;
    for (int i = 0; i < n; ++i) {
      const double xi = x[size_t(i)], yi = y[size_t(i)];
      err += (xi - yi) * (xi - yi);
      ref += xi * xi;
      if (std::fabs(xi) > 1.5 * sd) ++clear, kept += (xi < 0) == (yi < 0);
    }
    const double rms = std::sqrt(err / ref);
    // sign(x) * mean|x| per value, the best fit with one level and its negation, is ~0.6
    EXPECT_LT(rms, type == gguf::kIQ1_S ? 0.55 : 0.5) << type;
    EXPECT_GE(kept, clear * 95 / 100) << type;
    std::vector<float> zero(256, 0.0f), z(256);
    gguf::encode_row(type, zero.data(), 256, b.data());
    gguf::decode_row(type, b.data(), 256, z.data());
    for (float v : z) EXPECT_EQ(v, 0.0f);
    std::printf("%s relative RMS error of a Gaussian row: %.3f\n",
                type == gguf::kIQ1_S ? "IQ1_S" : "IQ1_M", rms);
  }
}

}  // namespace
}  // namespace cedar
