// `cedar bench` machine probes (src/runtime/bench_probes): smoke tests on small buffers and short
// loops. Every width this CPU runs is exercised; a width it lacks must be refused, never run.
// No timing assertions: these machines are shared, so only the contract is checked (one finite
// positive rate per pass, min <= median <= max, the width and method named).
#include "runtime/bench_probes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "base/thread_pool.h"
#include "kernels/cpu.h"
#include "kernels/kernel_table.h"

namespace cedar::bench {
namespace {

void expect_sane(const Probe& p, int passes, int threads, const std::string& width) {
  EXPECT_EQ(p.passes, passes);
  EXPECT_EQ(p.threads, threads);
  EXPECT_EQ(p.width, width);
  EXPECT_TRUE(std::isfinite(p.median) && p.median > 0) << p.width << " " << p.method;
  EXPECT_LE(p.min, p.median);
  EXPECT_LE(p.median, p.max);
  EXPECT_TRUE(std::isfinite(p.max));
  EXPECT_FALSE(p.method.empty());
}

TEST(BenchProbes, Median) {
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_THROW(median({}), std::runtime_error);
}

TEST(BenchProbes, WidthsFollowCpuFeatures) {
  const std::vector<Simd> w = simd_widths();
  ASSERT_FALSE(w.empty());
  EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
  EXPECT_EQ(widest_simd(), w.back());
  const CpuFeatures& f = cpu_features();
  auto has = [&](Simd s) { return std::find(w.begin(), w.end(), s) != w.end(); };
#if defined(__x86_64__)
  EXPECT_TRUE(has(Simd::kSse2));
#endif
  EXPECT_EQ(has(Simd::kAvx2), f.has_avx2_fma());
  EXPECT_EQ(has(Simd::kAvx512), f.has_avx512());
  for (Simd s : {Simd::kPortable, Simd::kSse2, Simd::kAvx2, Simd::kAvx512})
    EXPECT_FALSE(std::string(simd_name(s)).empty());
}

TEST(BenchProbes, ReadBandwidthEveryWidth) {
  ThreadPool pool(2);
  EXPECT_THROW(measure_read_bandwidth(pool, 1 << 20, 0), std::runtime_error);
  EXPECT_THROW(measure_read_bandwidth(pool, 16, 1), std::runtime_error);  // < 4 KiB per thread
  expect_sane(measure_read_bandwidth(pool, 4 << 20, 3), 3, 2, simd_name(widest_simd()));
  for (Simd s : simd_widths())
    expect_sane(measure_read_bandwidth(pool, 1 << 20, 2, s), 2, 2, simd_name(s));
  // a buffer that is not a whole number of pages per thread is rounded down, not overrun
  expect_sane(measure_read_bandwidth(pool, (1 << 20) + 12345, 1, Simd::kPortable), 1, 2,
              "portable");
}

TEST(BenchProbes, FmaEveryWidthAndBest) {
  ThreadPool pool(2);
  constexpr int64_t kIters = 20000;  // a smoke test, not a measurement
  EXPECT_THROW(measure_fma_peak(pool, 0, widest_simd(), kIters), std::runtime_error);
  EXPECT_THROW(measure_fma_peak(pool, 1, widest_simd(), 0), std::runtime_error);
  const std::vector<Probe> all = measure_fma_peaks(pool, 2, kIters);
  const std::vector<Simd> widths = simd_widths();
  ASSERT_EQ(all.size(), widths.size());
  for (size_t i = 0; i < all.size(); ++i) expect_sane(all[i], 2, 2, simd_name(widths[i]));
  const Probe& best = best_probe(all);
  for (const Probe& p : all) EXPECT_LE(p.median, best.median);
  EXPECT_THROW(best_probe({}), std::runtime_error);
  expect_sane(measure_fma_peak(pool, 1, Simd::kPortable, kIters), 1, 2, "portable");
}

// One probe per dot-product instruction the CPU has, named by it, in that order; none otherwise.
TEST(BenchProbes, DotProductsTheCpuHas) {
  ThreadPool pool(2);
  constexpr int64_t kIters = 20000;
  EXPECT_THROW(measure_dot_peaks(pool, 0, kIters), std::runtime_error);
  EXPECT_THROW(measure_dot_peaks(pool, 1, 0), std::runtime_error);
  const CpuFeatures& f = cpu_features();
  std::vector<std::string> want;
  if (f.has_avx512() && f.avx512bf16) want.push_back("VDPBF16PS");
  if (f.has_avx512() && f.avx512vnni) want.push_back("VPDPBUSD");
  const std::vector<Probe> dots = measure_dot_peaks(pool, 2, kIters);
  ASSERT_EQ(dots.size(), want.size());
  for (size_t i = 0; i < dots.size(); ++i) expect_sane(dots[i], 2, 2, want[i]);
}

TEST(BenchProbes, RefusesWidthsTheCpuLacks) {
  ThreadPool pool(1);
  const std::vector<Simd> w = simd_widths();
  for (Simd s : {Simd::kSse2, Simd::kAvx2, Simd::kAvx512}) {
    if (std::find(w.begin(), w.end(), s) != w.end()) continue;
    EXPECT_THROW(measure_fma_peak(pool, 1, s, 1000), std::runtime_error) << simd_name(s);
    EXPECT_THROW(measure_read_bandwidth(pool, 1 << 20, 1, s), std::runtime_error) << simd_name(s);
  }
}

TEST(BenchProbes, KernelGemm) {
  ThreadPool pool(2);
  const Probe g = measure_kernel_gemm_peak(pool, choose_kernels("ref"), 1);
  expect_sane(g, 1, 2, "ref");
  EXPECT_THROW(measure_kernel_gemm_peak(pool, choose_kernels("ref"), 0), std::runtime_error);
}

}  // namespace
}  // namespace cedar::bench
