#include "runtime/bench_probes.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

#include "base/thread_pool.h"
#include "kernels/kernel_table.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define CEDAR_BENCH_X86 1
#endif

namespace cedar::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A result the optimiser must keep.
volatile uint64_t g_sink_u64 = 0;
volatile double g_sink_f64 = 0;

Probe summarize(std::vector<double> rates, int threads, std::string method) {
  Probe p;
  p.passes = int(rates.size());
  p.threads = threads;
  p.min = *std::min_element(rates.begin(), rates.end());
  p.max = *std::max_element(rates.begin(), rates.end());
  p.median = median(std::move(rates));
  p.method = std::move(method);
  return p;
}

// ---- read bandwidth: sum a slice of 64-bit words, 4 independent accumulators of 2 lanes ----

uint64_t sum_words_portable(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

#ifdef CEDAR_BENCH_X86
__attribute__((target("avx2"))) uint64_t sum_words_avx2(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {  // two cache lines per iteration
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_words_portable(p + i, n - i);
}
#endif

bool have_avx2() {
#ifdef CEDAR_BENCH_X86
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

bool have_fma() {
#ifdef CEDAR_BENCH_X86
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

uint64_t sum_words(const uint64_t* p, size_t n) {
#ifdef CEDAR_BENCH_X86
  if (have_avx2()) return sum_words_avx2(p, n);
#endif
  return sum_words_portable(p, n);
}

// ---- FLOP probes: independent register-resident chains, no memory traffic ----

constexpr int64_t kFlopIters = 4000000;  // per thread per pass

#ifdef CEDAR_BENCH_X86
// 10 chains x 8 lanes x (mul + add) per iteration: enough independent FMAs to cover a 4-5 cycle
// latency on two pipes.
__attribute__((target("avx2,fma"))) double fma_chains(int64_t iters, float seed) {
  const __m256 m = _mm256_set1_ps(0.99999994f), add = _mm256_set1_ps(seed * 1e-7f);
  // distinct starting values: identical chains would be merged into one by the compiler
  __m256 a0 = _mm256_set1_ps(seed), a1 = _mm256_set1_ps(seed + 0.1f),
         a2 = _mm256_set1_ps(seed + 0.2f), a3 = _mm256_set1_ps(seed + 0.3f),
         a4 = _mm256_set1_ps(seed + 0.4f), a5 = _mm256_set1_ps(seed + 0.5f),
         a6 = _mm256_set1_ps(seed + 0.6f), a7 = _mm256_set1_ps(seed + 0.7f),
         a8 = _mm256_set1_ps(seed + 0.8f), a9 = _mm256_set1_ps(seed + 0.9f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm256_fmadd_ps(a0, m, add);
    a1 = _mm256_fmadd_ps(a1, m, add);
    a2 = _mm256_fmadd_ps(a2, m, add);
    a3 = _mm256_fmadd_ps(a3, m, add);
    a4 = _mm256_fmadd_ps(a4, m, add);
    a5 = _mm256_fmadd_ps(a5, m, add);
    a6 = _mm256_fmadd_ps(a6, m, add);
    a7 = _mm256_fmadd_ps(a7, m, add);
    a8 = _mm256_fmadd_ps(a8, m, add);
    a9 = _mm256_fmadd_ps(a9, m, add);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  double r = 0;
  for (float v : lanes) r += v;
  return r;
}
constexpr double kFmaFlopsPerIter = 10 * 8 * 2;
#endif

// SSE2 fallback (every x86-64) or scalar elsewhere: 8 chains of 4-wide multiply then add.
typedef float v4sf __attribute__((vector_size(16)));

double muladd_chains(int64_t iters, float seed) {
  const v4sf m = {0.99999994f, 0.99999994f, 0.99999994f, 0.99999994f};
  const v4sf add = {seed * 1e-7f, seed * 1e-7f, seed * 1e-7f, seed * 1e-7f};
  v4sf a[8];
  for (int k = 0; k < 8; ++k) {
    const float s = seed + 0.1f * float(k);
    a[k] = v4sf{s, s, s, s};
  }
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : a) v = v * m + add;  // -ffp-contract=off: a multiply and an add
  double r = 0;
  for (auto& v : a)
    for (int j = 0; j < 4; ++j) r += v[j];
  return r;
}
constexpr double kMulAddFlopsPerIter = 8 * 4 * 2;

// Runs body(thread) on every thread of the pool at once, `passes` times after one warmup;
// returns work_per_thread * threads / seconds of each pass.
template <class Body>
std::vector<double> timed_passes(ThreadPool& pool, int passes, double work_per_thread, Body body) {
  const int T = pool.size();
  std::vector<double> rates;
  for (int pass = -1; pass < passes; ++pass) {
    const auto t0 = Clock::now();
    pool.parallel_for(T, [&](int64_t t0i, int64_t t1i) {
      for (int64_t t = t0i; t < t1i; ++t) body(int(t));
    });
    const double s = seconds_since(t0);
    if (pass >= 0) rates.push_back(work_per_thread * T / s);
  }
  return rates;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) throw std::runtime_error("median of an empty sample");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Probe measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes) {
  if (passes < 1) throw std::runtime_error("bandwidth probe: passes must be >= 1");
  const int T = pool.size();
  const size_t words_per_thread = (bytes / size_t(T)) / 64 * 8;  // whole cache lines
  if (words_per_thread == 0) throw std::runtime_error("bandwidth probe: buffer too small");
  const size_t total = words_per_thread * size_t(T);
  struct Free {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint64_t, Free> buf(
      static_cast<uint64_t*>(std::aligned_alloc(64, total * sizeof(uint64_t))));
  if (!buf)
    throw std::runtime_error("bandwidth probe: cannot allocate " + std::to_string(bytes) +
                             " bytes");
  uint64_t* base = buf.get();
  // first touch by the thread that will read the slice (page placement), distinct values
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint64_t* p = base + size_t(t) * words_per_thread;
      for (size_t i = 0; i < words_per_thread; ++i) p[i] = i * 0x9E3779B97F4A7C15ull + uint64_t(t);
    }
  });
  std::vector<uint64_t> sums(size_t(T), 0);
  auto rates = timed_passes(pool, passes, double(words_per_thread * 8), [&](int t) {
    sums[size_t(t)] += sum_words(base + size_t(t) * words_per_thread, words_per_thread);
  });
  uint64_t s = 0;
  for (auto v : sums) s += v;
  g_sink_u64 = s;
  char method[200];
  std::snprintf(method, sizeof method,
                "%s sum of a %.0f MiB buffer, %d threads each streaming its own first-touched "
                "slice",
                have_avx2() ? "AVX2 64-bit" : "scalar 64-bit", double(total * 8) / 1048576.0, T);
  return summarize(std::move(rates), T, method);
}

Probe measure_fma_peak(ThreadPool& pool, int passes) {
  if (passes < 1) throw std::runtime_error("FMA probe: passes must be >= 1");
#ifdef CEDAR_BENCH_X86
  if (have_fma()) {
    std::vector<double> out(size_t(pool.size()));
    auto rates = timed_passes(pool, passes, kFlopIters * kFmaFlopsPerIter, [&](int t) {
      out[size_t(t)] += fma_chains(kFlopIters, 1.0f + float(t));
    });
    g_sink_f64 = out[0];
    return summarize(std::move(rates), pool.size(),
                     "AVX2 FMA fp32: 10 independent 8-wide chains per thread, 2 FLOPs per lane");
  }
#endif
  std::vector<double> out(size_t(pool.size()));
  auto rates = timed_passes(pool, passes, kFlopIters * kMulAddFlopsPerIter, [&](int t) {
    out[size_t(t)] += muladd_chains(kFlopIters, 1.0f + float(t));
  });
  g_sink_f64 = out[0];
  return summarize(std::move(rates), pool.size(),
                   "fp32 multiply + add (no FMA on this CPU): 8 independent 4-wide chains");
}

Probe measure_kernel_gemm_peak(ThreadPool& pool, const KernelTable& k, int passes) {
  if (passes < 1) throw std::runtime_error("kernel GEMM probe: passes must be >= 1");
  // An FP8 projection of M prompt rows against a weight that stays in L2 (128 KiB): the kernel's
  // arithmetic ceiling, without the memory traffic of a real layer. Inputs are valid operands
  // (E4M3 codes below the NaN code, UE8M0 scale 2^0, activations on the E4M3 grid).
  constexpr int M = 32, K = 1024, N = 128, kCalls = 8;
  std::vector<uint8_t> w(size_t(N) * K), ws(size_t(N / 32) * (K / 32), 127);
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t((i * 37 + 11) % 0x7E);
  std::vector<float> x(size_t(M) * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 13) - 6) * 0.5f;
  const GemmKernels& g = k.gemm[int(WeightFormat::kFP8)];
  std::vector<float> act(size_t(M) * size_t(g.act_floats(K)));
  g.prepare(x.data(), M, K, act.data());
  const int T = pool.size();
  std::vector<std::vector<float>> out(size_t(T), std::vector<float>(size_t(M) * N));
  auto rates = timed_passes(pool, passes, 2.0 * M * N * K * kCalls, [&](int t) {
    for (int c = 0; c < kCalls; ++c)
      g.gemm(act.data(), M, K, w.data(), ws.data(), 0, N, out[size_t(t)].data(), N);
  });
  g_sink_f64 = out[0][0];
  return summarize(std::move(rates), T,
                   "kernel table '" + std::string(k.name) + "' fp8_gemm, " + std::to_string(M) +
                       " rows x [" + std::to_string(N) + " x " + std::to_string(K) +
                       "] L2-resident FP8 weight per thread, 2 FLOPs per multiply-add");
}

}  // namespace cedar::bench
