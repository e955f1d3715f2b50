// Every kernel table this CPU runs against "ref" for the GEMM families (docs/NUMERICS.md "Fast
// kernels"): act_quant bit-exact; FP8/FP4 products (bf16 outputs) within one bf16 ulp and equal
// for >= 99% of outputs; BF16/F32/FP8W/Q8B products (fp32 outputs) within 2^-14 of sum |x w|, the
// bf16 product with lanes over outputs (bf16_lanes) too; and every table batch-invariant: a row's
// outputs are bit-identical whatever rows and columns share the call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"
#include "numerics/q8b.h"

namespace cedar {
namespace {

std::vector<float> bf16_normal(size_t n, unsigned seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(nd(rng));
  return v;
}

// A weight of one format with its exact decoded values (for the |x||w| bound).
struct TestWeight {
  WeightFormat f;
  int N = 0, K = 0;
  std::vector<uint8_t> w, s;
  std::vector<float> value;  // [N, K]
};

// scale_lo/scale_span: the UE8M0 scale codes drawn (the default keeps weights near 2^-4; codes
// past 134 push the FP8 decode step onto its weight-scaling path)
TestWeight make_weight(WeightFormat f, int N, int K, unsigned seed, int scale_lo = 118,
                       int scale_span = 12) {
  std::mt19937 rng(seed);
  TestWeight t;
  t.f = f;
  t.N = N;
  t.K = K;
  t.value.resize(size_t(N) * K);
  switch (f) {
    case WeightFormat::kFP8:
    case WeightFormat::kFP8W: {
      t.w.resize(size_t(N) * K);
      t.s.resize(size_t((N + 31) / 32) * (K / 32));
      for (auto& c : t.w) c = uint8_t((rng() % 0x7f) | ((rng() & 1) << 7));  // no NaN code
      for (auto& c : t.s) c = uint8_t(scale_lo + int(rng() % unsigned(scale_span)));
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k)
          t.value[size_t(n) * K + k] = e4m3_to_f32(t.w[size_t(n) * K + k]) *
                                       ue8m0_to_f32(t.s[size_t(n / 32) * (K / 32) + k / 32]);
      break;
    }
    case WeightFormat::kFP4: {
      t.w.resize(size_t(N) * K / 2);
      t.s.resize(size_t(N) * (K / 32));
      for (auto& c : t.w) c = uint8_t(rng() & 0xff);
      for (auto& c : t.s) c = uint8_t(scale_lo + int(rng() % unsigned(scale_span)));
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k) {
          const uint8_t b = t.w[size_t(n) * (K / 2) + k / 2];
          t.value[size_t(n) * K + k] = e2m1_to_f32((k & 1) ? fp4_hi(b) : fp4_lo(b)) *
                                       ue8m0_to_f32(t.s[size_t(n) * (K / 32) + k / 32]);
        }
      break;
    }
    case WeightFormat::kBF16: {
      const auto v = bf16_normal(size_t(N) * K, seed, 0.05f);
      t.w.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t b = f32_to_bf16_bits(v[i]);
        std::memcpy(t.w.data() + 2 * i, &b, 2);
      }
      t.value = v;
      break;
    }
    case WeightFormat::kF32: {
      std::normal_distribution<float> nd(0.0f, 0.05f);
      for (auto& x : t.value) x = nd(rng);  // not bf16-valued, like hc_fn
      t.w.resize(t.value.size() * 4);
      std::memcpy(t.w.data(), t.value.data(), t.w.size());
      break;
    }
    case WeightFormat::kQ8B: {  // a bf16 weight requantized (numerics/q8b.h)
      const auto v = bf16_normal(size_t(N) * K, seed, 0.05f);
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16_bits(v[i]);
      t.w.resize(size_t(N) * K);
      std::vector<uint16_t> sc(size_t(N) * (K / 32));
      for (int n = 0; n < N; ++n)
        q8b_quantize_row(b.data() + size_t(n) * K, K, t.w.data() + size_t(n) * K,
                         sc.data() + size_t(n) * (K / 32));
      t.s.resize(sc.size() * 2);
      std::memcpy(t.s.data(), sc.data(), t.s.size());
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k)
          t.value[size_t(n) * K + k] =
              q8b_value(t.w[size_t(n) * K + k], sc[size_t(n) * (K / 32) + k / 32]);
      break;
    }
    default:  // the GGUF block formats: block_gemm_test.cpp
      ADD_FAILURE() << "make_weight: not a release format";
  }
  return t;
}

// y[M, n1 - n0] through a table's family: prepare the rows, then one gemm call.
std::vector<float> run(const KernelTable& k, const TestWeight& t, const std::vector<float>& x,
                       int M, int n0, int n1) {
  const GemmKernels& g = k.gemm[int(t.f)];
  std::vector<float> act(size_t(M) * size_t(g.act_floats(t.K)));
  g.prepare(x.data(), M, t.K, act.data());
  std::vector<float> y(size_t(M) * size_t(n1 - n0), -7.0f);
  g.gemm(act.data(), M, t.K, t.w.data(), t.s.empty() ? nullptr : t.s.data(), n0, n1, y.data(),
         n1 - n0);
  return y;
}

const char* fmt_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kFP8:
      return "fp8";
    case WeightFormat::kFP4:
      return "fp4";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kFP8W:
      return "fp8w";
    case WeightFormat::kQ8B:
      return "q8b";
    default:
      return "f32";
  }
}

class FastGemm : public ::testing::TestWithParam<const KernelTable*> {};

TEST_P(FastGemm, ActQuantIsBitExact) {
  const KernelTable& k = *GetParam();
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 32 * (1 + trial % 5);
    // magnitudes across the E4M3 range of a block, exact zeros, ties and tiny blocks
    std::vector<float> x(static_cast<size_t>(n));
    const float scale = std::ldexp(1.0f, int(rng() % 40) - 30);
    for (auto& v : x) {
      const int kind = int(rng() % 10);
      if (kind == 0) {
        v = 0.0f;
      } else if (kind == 1) {
        v = -0.0f;
      } else {
        const float m = float(int(rng() % 2001) - 1000) / 64.0f;
        v = round_bf16(std::ldexp(m, -int(rng() % 12)) * scale);
      }
    }
    if (trial % 17 == 0) std::fill(x.begin(), x.end(), 0.0f);  // the amax floor
    std::vector<uint8_t> c0(static_cast<size_t>(n)), s0(size_t(n / 32)), c1 = c0, s1 = s0;
    kernels::ref::act_quant(x.data(), n, c0.data(), s0.data());
    k.act_quant(x.data(), n, c1.data(), s1.data());
    ASSERT_EQ(c0, c1) << k.name << " trial " << trial;
    ASSERT_EQ(s0, s1) << k.name << " trial " << trial;
  }
}

TEST_P(FastGemm, CloseToRefPerFormat) {
  const KernelTable& k = *GetParam();
  const KernelTable& ref = kernels::ref::table();
  for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kFP4, WeightFormat::kBF16,
                         WeightFormat::kF32, WeightFormat::kFP8W, WeightFormat::kQ8B}) {
    for (int K : {32, 96, 1024}) {
      const int M = 5, N = 70;
      const TestWeight t = make_weight(f, N, K, unsigned(K) + unsigned(f) * 7);
      const auto x = bf16_normal(size_t(M) * K, unsigned(K) * 3 + 1, 1.5f);
      const auto yr = run(ref, t, x, M, 0, N), yf = run(k, t, x, M, 0, N);
      int equal = 0;
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          double mag = 0;  // sum |x w|: the scale of the rounding error of any summation order
          for (int i = 0; i < K; ++i)
            mag += std::fabs(double(x[size_t(m) * K + i]) * t.value[size_t(n) * K + i]);
          const float a = yr[size_t(m) * N + n], b = yf[size_t(m) * N + n];
          equal += a == b;
          const bool bf16_out = f == WeightFormat::kFP8 || f == WeightFormat::kFP4;
          // FP8/FP4 round the activations to E4M3 first: their |x w| is that of the codes,
          // within 2^-4 of |x w|
          const double tol =
              bf16_out ? std::ldexp(std::fabs(double(a)), -7) + mag * 0x1p-14 : mag * 0x1p-14;
          ASSERT_LE(std::fabs(double(a) - double(b)), tol)
              << k.name << " " << fmt_name(f) << " K=" << K << " m=" << m << " n=" << n;
        }
      if (f == WeightFormat::kFP8 || f == WeightFormat::kFP4) {
        EXPECT_GE(equal, M * N * 99 / 100) << k.name << " " << fmt_name(f) << " K=" << K;
      }
    }
  }
}

// A row's outputs through one gemm call of `all` rows equal those of the row alone and of a
// smaller batch, bit for bit.
void expect_batch_invariant(const KernelTable& k, WeightFormat f, int scale_lo, int scale_span) {
  {
    // K: 11 blocks (an odd count: FP4's last two-block unit is half empty)
    const int K = 352, N = 45, M = 13;
    const TestWeight t = make_weight(f, N, K, 99 + unsigned(f), scale_lo, scale_span);
    const auto x = bf16_normal(size_t(M) * K, 5, 2.0f);
    const auto all = run(k, t, x, M, 0, N);
    // each row alone, over several column ranges (tails of the register tiles included)
    for (int m = 0; m < M; ++m) {
      const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
      // (29..32 straddles an FP8 32-row scale group)
      for (auto [n0, n1] :
           {std::pair{0, N}, std::pair{3, 10}, std::pair{12, 45}, std::pair{29, 45}}) {
        const auto one = run(k, t, row, 1, n0, n1);
        for (int n = n0; n < n1; ++n)
          ASSERT_EQ(one[size_t(n - n0)], all[size_t(m) * N + n])
              << k.name << " " << fmt_name(f) << " m=" << m << " n=" << n;
      }
    }
    // rows 2..8 as their own batch
    const std::vector<float> mid(x.begin() + 2 * K, x.begin() + 9 * K);
    const auto part = run(k, t, mid, 7, 0, N);
    for (int m = 0; m < 7; ++m)
      for (int n = 0; n < N; ++n)
        ASSERT_EQ(part[size_t(m) * N + n], all[size_t(m + 2) * N + n])
            << k.name << " " << fmt_name(f);
  }
}

TEST_P(FastGemm, BatchInvariant) {
  for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kFP4, WeightFormat::kBF16,
                         WeightFormat::kF32, WeightFormat::kFP8W, WeightFormat::kQ8B})
    expect_batch_invariant(*GetParam(), f, 118, 12);
}

// FP8 scale codes 126..140: blocks whose activations cannot take the scale (and codes past
// fp32's 2^127 with the decoder's 2^120) take the decode step's weight-scaling path, and still
// match the panel path bit for bit and the reference within its tolerance.
TEST_P(FastGemm, Fp8LargeScales) {
  const KernelTable& k = *GetParam();
  expect_batch_invariant(k, WeightFormat::kFP8, 126, 15);
  const int K = 256, M = 3, N = 40;
  const TestWeight t = make_weight(WeightFormat::kFP8, N, K, 17, 126, 15);
  const auto x = bf16_normal(size_t(M) * K, 23, 4.0f);
  const auto yr = run(kernels::ref::table(), t, x, M, 0, N);
  for (int m = 0; m < M; ++m) {
    const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
    const auto y1 = run(k, t, row, 1, 0, N);
    for (int n = 0; n < N; ++n) {
      double mag = 0;
      for (int i = 0; i < K; ++i)
        mag += std::fabs(double(row[size_t(i)]) * t.value[size_t(n) * K + i]);
      const float a = yr[size_t(m) * N + n], b = y1[size_t(n)];
      ASSERT_TRUE(std::isfinite(b)) << k.name << " n=" << n;
      ASSERT_LE(std::fabs(double(a) - double(b)),
                std::ldexp(std::fabs(double(a)), -7) + mag * 0x1p-14)
          << k.name << " m=" << m << " n=" << n;
    }
  }
}

// bf16_lanes (kernel_table.h): y [M, groups * 16] through one call over groups [g0, g1).
std::vector<float> run_lanes(const KernelTable& k, const std::vector<uint32_t>& packed, int N,
                             int K, const std::vector<float>& x, int M, int g0, int g1) {
  const int ld = (N + 15) / 16 * 16;
  std::vector<float> y(size_t(M) * size_t(ld), -7.0f);
  k.bf16_lanes(packed.data(), K, g0, g1, x.data(), M, K, y.data(), ld);
  return y;
}

// The lanes-over-outputs product: within the bf16 products' tolerance of the reference's BF16
// GEMM, zero past N, batch-invariant (a row alone, in any group range, in any batch: the same
// bits), and the two FMA tables (avx2, avx512) bit-identical, as their sums are the same chain.
TEST_P(FastGemm, Bf16LanesCloseToRefAndBatchInvariant) {
  const KernelTable& k = *GetParam();
  if (k.name == "ref") {
    EXPECT_EQ(k.bf16_lanes, nullptr);  // the reference's products all run through linear()
    return;
  }
  ASSERT_NE(k.bf16_lanes, nullptr);
  const KernelTable& ref = kernels::ref::table();
  for (int K : {16, 32, 130, 1024}) {
    const int N = 45, M = 13, groups = (N + 15) / 16, ld = groups * 16;
    const TestWeight t = make_weight(WeightFormat::kBF16, N, K, unsigned(K) + 5);
    std::vector<uint32_t> packed(lanes_packed_words(N, K));
    pack_bf16_lanes(reinterpret_cast<const uint16_t*>(t.w.data()), N, K, packed.data());
    const auto x = bf16_normal(size_t(M) * K, unsigned(K) * 7 + 3, 1.5f);
    const auto all = run_lanes(k, packed, N, K, x, M, 0, groups), yr = run(ref, t, x, M, 0, N);
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) {
        double mag = 0;
        for (int i = 0; i < K; ++i)
          mag += std::fabs(double(x[size_t(m) * K + i]) * t.value[size_t(n) * K + i]);
        ASSERT_LE(std::fabs(double(yr[size_t(m) * N + n]) - double(all[size_t(m) * ld + n])),
                  mag * 0x1p-14)
            << k.name << " K=" << K << " m=" << m << " n=" << n;
      }
      for (int n = N; n < ld; ++n) ASSERT_EQ(all[size_t(m) * ld + n], 0.0f) << k.name;
      const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
      for (auto [g0, g1] : {std::pair{0, groups}, std::pair{1, 2}, std::pair{2, groups}}) {
        const auto one = run_lanes(k, packed, N, K, row, 1, g0, g1);
        for (int n = 16 * g0; n < 16 * g1; ++n)
          ASSERT_EQ(one[size_t(n)], all[size_t(m) * ld + n]) << k.name << " K=" << K << " m=" << m;
      }
    }
    const std::vector<float> mid(x.begin() + 2 * K, x.begin() + 9 * K);
    const auto part = run_lanes(k, packed, N, K, mid, 7, 0, groups);
    for (int m = 0; m < 7; ++m)
      for (int n = 0; n < ld; ++n)
        ASSERT_EQ(part[size_t(m) * ld + n], all[size_t(m + 2) * ld + n]) << k.name << " K=" << K;
    if (k.name != "avx512") continue;
    for (const KernelTable* o : supported_kernel_tables()) {
      if (o->name == "avx2") {
        EXPECT_EQ(run_lanes(*o, packed, N, K, x, M, 0, groups), all) << K;
      }
    }
  }
}

std::string table_name(const ::testing::TestParamInfo<const KernelTable*>& i) {
  return std::string(i.param->name);
}

INSTANTIATE_TEST_SUITE_P(Tables, FastGemm, ::testing::ValuesIn(supported_kernel_tables()),
                         table_name);

}  // namespace
}  // namespace cedar
