// The GEMM families over GGUF block weights (WeightFormat kQ8_0 .. kMXFP4; docs/NUMERICS.md "GGUF
// weights in place") in every kernel table this CPU runs. The reference family against the exact
// product of the act_quant values and the weight values decoded by the format's definition: within
// its roundings (per 32-block and per accumulation in fp32, then bf16). Every fast table within
// one bf16 ulp + 2^-14 sum |x w| of the reference, equal for most outputs, and batch-invariant: a
// row's outputs are bit-identical whatever rows and columns share the call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/ggml_blocks.h"
#include "kernels/kernel_table.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "numerics/fp8.h"

namespace cedar {
namespace {

struct Format {
  WeightFormat f;
  const char* name;
  int elems, bytes;
  std::vector<int> halves;  // offsets of the block's fp16 scales
  void (*decode)(const uint8_t*, float*);
};

template <uint32_t T>
void decode(const uint8_t* b, float* y) {
  ggml::decode_block<T>(b, y, [](uint16_t h) { return f16_to_f32(h); });
}

const std::vector<Format>& formats() {
  static const std::vector<Format> f = {
      {WeightFormat::kQ8_0, "Q8_0", 32, 34, {0}, decode<ggml::kQ8_0>},
      {WeightFormat::kQ4_0, "Q4_0", 32, 18, {0}, decode<ggml::kQ4_0>},
      {WeightFormat::kQ5_0, "Q5_0", 32, 22, {0}, decode<ggml::kQ5_0>},
      {WeightFormat::kQ2_K, "Q2_K", 256, 84, {80, 82}, decode<ggml::kQ2_K>},
      {WeightFormat::kQ3_K, "Q3_K", 256, 110, {108}, decode<ggml::kQ3_K>},
      {WeightFormat::kQ4_K, "Q4_K", 256, 144, {0, 2}, decode<ggml::kQ4_K>},
      {WeightFormat::kQ5_K, "Q5_K", 256, 176, {0, 2}, decode<ggml::kQ5_K>},
      {WeightFormat::kQ6_K, "Q6_K", 256, 210, {208}, decode<ggml::kQ6_K>},
      {WeightFormat::kIQ2_XXS, "IQ2_XXS", 256, 66, {0}, decode<ggml::kIQ2_XXS>},
      {WeightFormat::kIQ1_S, "IQ1_S", 256, 50, {0}, decode<ggml::kIQ1_S>},
      {WeightFormat::kIQ1_M, "IQ1_M", 256, 56, {}, decode<ggml::kIQ1_M>},  // d: set below
      {WeightFormat::kMXFP4, "MXFP4", 32, 17, {}, decode<ggml::kMXFP4>},   // scale: set below
  };
  return f;
}

// Random blocks with fp16 scales around 2^-7..2^-4, and their decoded values [N, K].
struct Weight {
  std::vector<uint8_t> w;
  std::vector<float> value;
};
Weight make_weight(const Format& fm, int N, int K, unsigned seed) {
  std::mt19937 rng(seed);
  Weight t;
  const int nb = N * (K / fm.elems);
  t.w.resize(size_t(nb) * size_t(fm.bytes));
  for (auto& b : t.w) b = uint8_t(rng());
  for (int i = 0; i < nb; ++i)
    for (int at : fm.halves) {
      const uint16_t h =
          f32_to_f16(std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, -7 - int(rng() % 4)));
      std::memcpy(t.w.data() + size_t(i) * fm.bytes + at, &h, 2);
    }
  if (fm.f == WeightFormat::kIQ1_M)  // its fp16 d is the top nibbles of the four scale words
    for (int i = 0; i < nb; ++i) {
      const uint16_t h = f32_to_f16(std::ldexp(1.0f + float(rng() % 8) / 8.0f, -7));
      uint8_t* sc = t.w.data() + size_t(i) * fm.bytes + 48;
      for (int j = 0; j < 4; ++j)
        sc[2 * j + 1] = uint8_t((sc[2 * j + 1] & 0x0f) | (((h >> (4 * j)) & 15) << 4));
    }
  if (fm.f == WeightFormat::kMXFP4)  // UE8M0 scales 2^-7..2^-4
    for (int i = 0; i < nb; ++i) t.w[size_t(i) * fm.bytes] = uint8_t(120 + rng() % 4);
  t.value.resize(size_t(N) * K);
  for (int i = 0; i < nb; ++i)
    fm.decode(t.w.data() + size_t(i) * fm.bytes, t.value.data() + size_t(i) * fm.elems);
  return t;
}

std::vector<float> bf16_normal(size_t n, unsigned seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(nd(rng));
  return v;
}

std::vector<float> run(const KernelTable& k, const Format& fm, const Weight& t,
                       const std::vector<float>& x, int M, int K, int n0, int n1) {
  const GemmKernels& g = k.gemm[int(fm.f)];
  std::vector<float> act(size_t(M) * size_t(g.act_floats(K)));
  g.prepare(x.data(), M, K, act.data());
  std::vector<float> y(size_t(M) * size_t(n1 - n0), -7.0f);
  g.gemm(act.data(), M, K, t.w.data(), nullptr, n0, n1, y.data(), n1 - n0);
  return y;
}

// sum over k of the act_quant values times the weight values, in double (and sum |.|)
void exact_dot(const std::vector<float>& x, const Weight& t, int K, int m, int n, double* dot,
               double* mag) {
  std::vector<uint8_t> codes(static_cast<size_t>(K)), scales(size_t(K / 32));
  kernels::ref::act_quant(x.data() + size_t(m) * K, K, codes.data(), scales.data());
  *dot = *mag = 0;
  for (int k = 0; k < K; ++k) {
    const double p = double(e4m3_to_f32(codes[size_t(k)]) * ue8m0_to_f32(scales[size_t(k / 32)])) *
                     double(t.value[size_t(n) * K + k]);
    *dot += p;
    *mag += std::fabs(p);
  }
}

TEST(BlockGemm, ReferenceIsTheExactProductRounded) {
  const KernelTable& ref = kernels::ref::table();
  for (const Format& fm : formats()) {
    const int K = 512, M = 3, N = 20;
    const Weight t = make_weight(fm, N, K, 11 + unsigned(fm.f));
    const auto x = bf16_normal(size_t(M) * K, 5, 1.5f);
    const auto y = run(ref, fm, t, x, M, K, 0, N);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double dot, mag;
        exact_dot(x, t, K, m, n, &dot, &mag);
        const float got = y[size_t(m) * N + n];
        // bf16 rounding of the result, plus fp32 roundings of 16 block sums and accumulations
        ASSERT_LE(std::fabs(double(got) - dot), std::ldexp(std::fabs(dot), -8) + mag * 0x1p-20)
            << fm.name << " m=" << m << " n=" << n << " exact " << dot;
      }
  }
}

class BlockGemm : public ::testing::TestWithParam<const KernelTable*> {};

TEST_P(BlockGemm, CloseToRef) {
  const KernelTable& k = *GetParam();
  const KernelTable& ref = kernels::ref::table();
  for (const Format& fm : formats())
    for (int K : {256, 1024, 288}) {  // (288: a row of 32-blocks that is not whole 64-value units)
      if (K % fm.elems) continue;
      const int M = 5, N = 40;
      const Weight t = make_weight(fm, N, K, unsigned(K) + unsigned(fm.f));
      const auto x = bf16_normal(size_t(M) * K, unsigned(K) * 3 + 1, 1.5f);
      const auto yr = run(ref, fm, t, x, M, K, 0, N), yf = run(k, fm, t, x, M, K, 0, N);
      int equal = 0;
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          double dot, mag;
          exact_dot(x, t, K, m, n, &dot, &mag);
          const float a = yr[size_t(m) * N + n], b = yf[size_t(m) * N + n];
          equal += a == b;
          ASSERT_LE(std::fabs(double(a) - double(b)),
                    std::ldexp(std::fabs(double(a)), -7) + mag * 0x1p-14)
              << k.name << " " << fm.name << " K=" << K << " m=" << m << " n=" << n;
        }
      EXPECT_GE(equal, M * N * 9 / 10) << k.name << " " << fm.name << " K=" << K;
    }
}

TEST_P(BlockGemm, BatchInvariant) {
  const KernelTable& k = *GetParam();
  for (const Format& fm : formats()) {
    // M past one 64-row accumulator block, K past one 2048-value decoded chunk
    const int K = 2304, N = 12, M = 70;
    const Weight t = make_weight(fm, N, K, 99 + unsigned(fm.f));
    const auto x = bf16_normal(size_t(M) * K, 5, 2.0f);
    const auto all = run(k, fm, t, x, M, K, 0, N);
    for (int m : {0, 7, 63, 64, 69}) {
      const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
      for (auto [n0, n1] : {std::pair{0, N}, std::pair{3, 10}, std::pair{11, 12}}) {
        const auto one = run(k, fm, t, row, 1, K, n0, n1);
        for (int n = n0; n < n1; ++n)
          ASSERT_EQ(one[size_t(n - n0)], all[size_t(m) * N + n])
              << k.name << " " << fm.name << " m=" << m << " n=" << n;
      }
    }
    // rows 2.. as their own batch of 3 or 5 (a decode step's paths with several rows: avx512's
    // fused decode takes up to 4, avx512bf16's registers up to 8)
    for (int rows : {3, 5}) {
      const std::vector<float> mid(x.begin() + 2 * K, x.begin() + (2 + rows) * K);
      const auto part = run(k, fm, t, mid, rows, K, 0, N);
      for (int m = 0; m < rows; ++m)
        for (int n = 0; n < N; ++n)
          ASSERT_EQ(part[size_t(m) * N + n], all[size_t(m + 2) * N + n])
              << k.name << " " << fm.name << " batch of " << rows << ", m=" << m << " n=" << n;
    }
  }
}

// MXFP4 blocks are the release's FP4 codes and scales in another layout: every table's MXFP4
// family gives its FP4 family's results bit for bit (one-row decode steps, a few rows, panels;
// rows of whole and of partial four-block units).
TEST_P(BlockGemm, Mxfp4IsFp4BitForBit) {
  const KernelTable& k = *GetParam();
  for (int K : {1024, 2304, 96, 32}) {
    const int N = 37, nb = K / 32;
    std::mt19937 rng{unsigned(K)};
    // release layout: pairs [N, K/2] (element 2j low nibble), UE8M0 scales [N, K/32] (some
    // extreme: 2^-127 and 2^127)
    std::vector<uint8_t> pairs(size_t(N) * size_t(K / 2)), scales(size_t(N) * size_t(nb));
    for (auto& b : pairs) b = uint8_t(rng());
    for (auto& c : scales) c = uint8_t(rng() % 50 == 0 ? (rng() % 2 ? 0 : 254) : 110 + rng() % 20);
    // the same codes as ggml blocks, written here element by element
    std::vector<uint8_t> mx(size_t(N) * size_t(nb) * 17);
    for (int n = 0; n < N; ++n)
      for (int b = 0; b < nb; ++b) {
        uint8_t* blk = mx.data() + (size_t(n) * nb + b) * 17;
        blk[0] = scales[size_t(n) * nb + b];
        for (int e = 0; e < 32; ++e) {
          const uint8_t byte = pairs[size_t(n) * (K / 2) + size_t(b) * 16 + e / 2];
          const uint8_t code = e % 2 ? byte >> 4 : byte & 15;
          blk[1 + e % 16] |= uint8_t(e < 16 ? code : code << 4);
        }
      }
    for (int M : {1, 2, 5, 9, 20}) {
      const auto x = bf16_normal(size_t(M) * K, unsigned(M + K), 1.5f);
      auto product = [&](WeightFormat f, const uint8_t* w, const uint8_t* ws, int n0, int n1) {
        const GemmKernels& g = k.gemm[int(f)];
        std::vector<float> act(size_t(M) * size_t(g.act_floats(K)));
        g.prepare(x.data(), M, K, act.data());
        std::vector<float> y(size_t(M) * size_t(n1 - n0), -7.0f);
        g.gemm(act.data(), M, K, w, ws, n0, n1, y.data(), n1 - n0);
        return y;
      };
      for (auto [n0, n1] : {std::pair{0, N}, std::pair{4, 19}}) {
        const auto a = product(WeightFormat::kFP4, pairs.data(), scales.data(), n0, n1);
        const auto b = product(WeightFormat::kMXFP4, mx.data(), nullptr, n0, n1);
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_TRUE(a[i] != -7.0f && std::memcmp(&a[i], &b[i], 4) == 0)
              << k.name << " K=" << K << " M=" << M << " output " << i << ": " << a[i] << " vs "
              << b[i];
      }
    }
  }
}

std::string table_name(const ::testing::TestParamInfo<const KernelTable*>& i) {
  return std::string(i.param->name);
}

INSTANTIATE_TEST_SUITE_P(Tables, BlockGemm, ::testing::ValuesIn(supported_kernel_tables()),
                         table_name);

}  // namespace
}  // namespace cedar
