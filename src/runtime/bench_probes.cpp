#include "runtime/bench_probes.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/file_reader.h"
#include "base/thread_pool.h"
#include "kernels/cpu.h"
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

Probe summarize(std::vector<double> rates, int threads, Simd width, std::string method) {
  Probe p;
  p.passes = int(rates.size());
  p.threads = threads;
  p.min = *std::min_element(rates.begin(), rates.end());
  p.max = *std::max_element(rates.begin(), rates.end());
  p.median = median(std::move(rates));
  p.width = simd_name(width);
  p.method = std::move(method);
  return p;
}

bool cpu_runs(Simd w) {
  const std::vector<Simd> have = simd_widths();
  return w == Simd::kPortable || std::find(have.begin(), have.end(), w) != have.end();
}

void require_width(Simd w, const char* probe) {
  if (!cpu_runs(w))
    throw std::runtime_error(std::string(probe) + ": this CPU cannot run " + simd_name(w) +
                             " (it has: " + cpu_features().flags() + ")");
}

// ---- read bandwidth ---------------------------------------------------------------------------
// Each kernel sums n 64-bit words (n a multiple of kReadStepWords) into 8 independent
// accumulators, 512 bytes = 8 cache lines per iteration: no add waits on the previous one, so the
// loads issue as fast as the memory system takes them. `#pragma GCC unroll` flattens the inner
// loops so the accumulator arrays live in registers (checked with objdump: the loop body is
// vector loads folded into adds, a pointer increment and the branch).

constexpr size_t kReadStepWords = 64;  // 512 bytes per iteration

__attribute__((noinline)) uint64_t read_portable(const uint64_t* p, size_t n) {
  uint64_t a[8] = {};
  for (size_t i = 0; i < n; i += kReadStepWords) {
#pragma GCC unroll 64
    for (size_t j = 0; j < kReadStepWords; ++j) a[j % 8] += p[i + j];
  }
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

#ifdef CEDAR_BENCH_X86
// SSE2 is the x86-64 baseline: no target attribute needed. noinline (like the target kernels,
// which cannot be inlined) keeps each loop a function of its own to read in objdump.
__attribute__((noinline)) uint64_t read_sse2(const uint64_t* p, size_t n) {
  __m128i a[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) a[k] = _mm_setzero_si128();
  for (size_t i = 0; i < n; i += kReadStepWords) {
    const __m128i* q = reinterpret_cast<const __m128i*>(p + i);
#pragma GCC unroll 32
    for (int j = 0; j < 32; ++j) a[j % 8] = _mm_add_epi64(a[j % 8], _mm_load_si128(q + j));
  }
#pragma GCC unroll 8
  for (int k = 1; k < 8; ++k) a[0] = _mm_add_epi64(a[0], a[k]);
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), a[0]);
  return lanes[0] + lanes[1];
}

__attribute__((target("avx2"))) uint64_t read_avx2(const uint64_t* p, size_t n) {
  __m256i a[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) a[k] = _mm256_setzero_si256();
  for (size_t i = 0; i < n; i += kReadStepWords) {
    const __m256i* q = reinterpret_cast<const __m256i*>(p + i);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) a[j % 8] = _mm256_add_epi64(a[j % 8], _mm256_load_si256(q + j));
  }
#pragma GCC unroll 8
  for (int k = 1; k < 8; ++k) a[0] = _mm256_add_epi64(a[0], a[k]);
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a[0]);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

__attribute__((target("avx512f"))) uint64_t read_avx512(const uint64_t* p, size_t n) {
  __m512i a[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) a[k] = _mm512_setzero_si512();
  for (size_t i = 0; i < n; i += kReadStepWords) {
    const __m512i* q = reinterpret_cast<const __m512i*>(p + i);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) a[j] = _mm512_add_epi64(a[j], _mm512_load_si512(q + j));
  }
#pragma GCC unroll 8
  for (int k = 1; k < 8; ++k) a[0] = _mm512_add_epi64(a[0], a[k]);
  // (stored and summed by hand: GCC 12's _mm512_reduce_add_* trips -Wuninitialized)
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, a[0]);
  uint64_t s = 0;
  for (uint64_t v : lanes) s += v;
  return s;
}
#endif

uint64_t read_words(Simd w, const uint64_t* p, size_t n) {
  switch (w) {
#ifdef CEDAR_BENCH_X86
    case Simd::kSse2:
      return read_sse2(p, n);
    case Simd::kAvx2:
      return read_avx2(p, n);
    case Simd::kAvx512:
      return read_avx512(p, n);
#endif
    default:
      return read_portable(p, n);
  }
}

int simd_bits(Simd w) {
  switch (w) {
    case Simd::kSse2:
      return 128;
    case Simd::kAvx2:
      return 256;
    case Simd::kAvx512:
      return 512;
    default:
      return 64;
  }
}

// ---- FLOP probes ------------------------------------------------------------------------------
// kChains independent chains a = a * m + c held in registers, no memory traffic. Two FMA pipes
// with a 4-cycle latency need 8 chains in flight; 12 also cover the 5-6 cycles of some cores and
// the mul -> add pair of SSE2 while leaving registers for m and c (16 xmm/ymm). m just below 1
// keeps every chain near c / (1 - m): no overflow, no denormals. The chains start at distinct
// values, or the compiler would merge identical ones.

constexpr int kChains = 12;
constexpr float kChainMul = 0.99999994f;

__attribute__((noinline)) double muladd_portable(int64_t iters, float seed) {
  typedef float v4sf __attribute__((vector_size(16)));
  const v4sf m = {kChainMul, kChainMul, kChainMul, kChainMul};
  const float cv = seed * 1e-7f;
  const v4sf c = {cv, cv, cv, cv};
  v4sf a[kChains];
#pragma GCC unroll 12
  for (int k = 0; k < kChains; ++k) {
    const float s = seed + 0.1f * float(k);
    a[k] = v4sf{s, s, s, s};
  }
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) a[k] = a[k] * m + c;  // -ffp-contract=off: mul then add
  }
  double r = 0;
  for (const v4sf& v : a)
    for (int j = 0; j < 4; ++j) r += double(v[j]);
  return r;
}

#ifdef CEDAR_BENCH_X86
__attribute__((noinline)) double muladd_sse2(int64_t iters, float seed) {
  const __m128 m = _mm_set1_ps(kChainMul), c = _mm_set1_ps(seed * 1e-7f);
  __m128 a[kChains];
#pragma GCC unroll 12
  for (int k = 0; k < kChains; ++k) a[k] = _mm_set1_ps(seed + 0.1f * float(k));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) a[k] = _mm_add_ps(_mm_mul_ps(a[k], m), c);
  }
#pragma GCC unroll 12
  for (int k = 1; k < kChains; ++k) a[0] = _mm_add_ps(a[0], a[k]);
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, a[0]);
  return double(lanes[0]) + lanes[1] + lanes[2] + lanes[3];
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters, float seed) {
  const __m256 m = _mm256_set1_ps(kChainMul), c = _mm256_set1_ps(seed * 1e-7f);
  __m256 a[kChains];
#pragma GCC unroll 12
  for (int k = 0; k < kChains; ++k) a[k] = _mm256_set1_ps(seed + 0.1f * float(k));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) a[k] = _mm256_fmadd_ps(a[k], m, c);
  }
#pragma GCC unroll 12
  for (int k = 1; k < kChains; ++k) a[0] = _mm256_add_ps(a[0], a[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, a[0]);
  double r = 0;
  for (float v : lanes) r += double(v);
  return r;
}

__attribute__((target("avx512f"))) double fma_avx512(int64_t iters, float seed) {
  const __m512 m = _mm512_set1_ps(kChainMul), c = _mm512_set1_ps(seed * 1e-7f);
  __m512 a[kChains];
#pragma GCC unroll 12
  for (int k = 0; k < kChains; ++k) a[k] = _mm512_set1_ps(seed + 0.1f * float(k));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) a[k] = _mm512_fmadd_ps(a[k], m, c);
  }
#pragma GCC unroll 12
  for (int k = 1; k < kChains; ++k) a[0] = _mm512_add_ps(a[0], a[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, a[0]);
  double r = 0;
  for (float v : lanes) r += double(v);
  return r;
}
#endif

#ifdef CEDAR_BENCH_X86
// The dot-product instructions the fast tables multiply with, in the FMA probe's 12 independent
// register chains: VDPBF16PS adds 32 bf16 products into 16 fp32 lanes, VPDPBUSD 64 u8 x s8
// products into 16 int32 lanes (the int32 sums wrap harmlessly: only the rate is kept).
__attribute__((target("avx512f,avx512bf16"))) double dot_bf16(int64_t iters, float seed) {
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3F803F80);  // bf16 1.0 pairs
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x33803380);  // bf16 2^-24 pairs
  __m512 acc[kChains];
#pragma GCC unroll 12
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(seed + 0.1f * float(k));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
  }
#pragma GCC unroll 12
  for (int k = 1; k < kChains; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  double r = 0;
  for (float v : lanes) r += double(v);
  return r;
}

__attribute__((target("avx512f,avx512vnni"))) double dot_int8(int64_t iters, float seed) {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  __m512i acc[kChains];
#pragma GCC unroll 12
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_epi32(int(seed) + k);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
  }
#pragma GCC unroll 12
  for (int k = 1; k < kChains; ++k) acc[0] = _mm512_add_epi32(acc[0], acc[k]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, acc[0]);
  double r = 0;
  for (int32_t v : lanes) r += double(v);
  return r;
}
#endif

double run_chains(Simd w, int64_t iters, float seed) {
  switch (w) {
#ifdef CEDAR_BENCH_X86
    case Simd::kSse2:
      return muladd_sse2(iters, seed);
    case Simd::kAvx2:
      return fma_avx2(iters, seed);
    case Simd::kAvx512:
      return fma_avx512(iters, seed);
#endif
    default:
      return muladd_portable(iters, seed);
  }
}

std::string fma_method(Simd w) {
  const int lanes = simd_bits(w == Simd::kPortable ? Simd::kSse2 : w) / 32;
  const bool fused = w == Simd::kAvx2 || w == Simd::kAvx512;
  char s[200];
  std::snprintf(s, sizeof s,
                "%s fp32 %s: %d independent %d-wide chains per thread in registers, 2 FLOPs per "
                "lane",
                simd_name(w), fused ? "FMA" : "multiply + add (no FMA)", kChains, lanes);
  return s;
}

// Runs body(thread) on every thread of the pool at once (parallel_for hands range t to thread t
// every time, so a thread always reads the slice it first-touched), `passes` times after one
// warmup; returns work_per_thread * threads / seconds of each pass.
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

struct FreeBuffer {
  void operator()(uint64_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint64_t, FreeBuffer>;

constexpr size_t kPageWords = 4096 / sizeof(uint64_t);

// Page-aligned slices of words_per_thread words, each written first by the thread that will read
// it (the OS places a page on the node of the thread that first touches it).
Buffer first_touched_buffer(ThreadPool& pool, size_t words_per_thread) {
  const int T = pool.size();
  const size_t total = words_per_thread * size_t(T);
  Buffer buf(static_cast<uint64_t*>(std::aligned_alloc(4096, total * sizeof(uint64_t))));
  if (!buf)
    throw std::runtime_error("bandwidth probe: cannot allocate " +
                             std::to_string(total * sizeof(uint64_t)) + " bytes");
  uint64_t* base = buf.get();
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint64_t* p = base + size_t(t) * words_per_thread;
      for (size_t i = 0; i < words_per_thread; ++i) p[i] = i * 0x9E3779B97F4A7C15ull + uint64_t(t);
    }
  });
  return buf;
}

}  // namespace

const char* simd_name(Simd w) {
  switch (w) {
    case Simd::kSse2:
      return "SSE2";
    case Simd::kAvx2:
      return "AVX2";
    case Simd::kAvx512:
      return "AVX-512";
    default:
      return "portable";
  }
}

std::vector<Simd> simd_widths() {
#ifdef CEDAR_BENCH_X86
  const CpuFeatures& f = cpu_features();
  std::vector<Simd> w = {Simd::kSse2};  // every x86-64 CPU
  if (f.has_avx2_fma()) w.push_back(Simd::kAvx2);
  if (f.has_avx512()) w.push_back(Simd::kAvx512);
  return w;
#else
  return {Simd::kPortable};
#endif
}

Simd widest_simd() { return simd_widths().back(); }

double median(std::vector<double> v) {
  if (v.empty()) throw std::runtime_error("median of an empty sample");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Probe measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes) {
  return measure_read_bandwidth(pool, bytes, passes, widest_simd());
}

Probe measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes, Simd width) {
  if (passes < 1) throw std::runtime_error("bandwidth probe: passes must be >= 1");
  ReadProbe probe(pool, bytes, width);
  for (int i = 0; i < passes; ++i) probe.pass();
  return probe.summary();
}

ReadProbe::ReadProbe(ThreadPool& pool, size_t bytes, Simd width) : pool_(pool), width_(width) {
  require_width(width, "bandwidth probe");
  const int T = pool.size();
  words_per_thread_ = (bytes / sizeof(uint64_t) / size_t(T)) / kPageWords * kPageWords;
  if (words_per_thread_ == 0)
    throw std::runtime_error("bandwidth probe: buffer too small (needs 4 KiB per thread)");
  buf_ = first_touched_buffer(pool, words_per_thread_).release();
  read_all();  // warmup, not counted
}

ReadProbe::~ReadProbe() { std::free(buf_); }

// every thread reads its own slice (parallel_for hands range t to thread t every time, so a
// thread always reads the slice it first-touched)
void ReadProbe::read_all() {
  const int T = pool_.size();
  std::vector<uint64_t> sums(size_t(T), 0);
  pool_.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      sums[size_t(t)] = read_words(width_, buf_ + size_t(t) * words_per_thread_, words_per_thread_);
  });
  uint64_t s = 0;
  for (auto v : sums) s += v;
  g_sink_u64 = s;
}

double ReadProbe::pass() {
  const auto t0 = Clock::now();
  read_all();
  const double rate = double(words_per_thread_ * 8) * pool_.size() / seconds_since(t0);
  rates_.push_back(rate);
  return rate;
}

Probe ReadProbe::summary() const {
  if (rates_.empty()) throw std::runtime_error("bandwidth probe: no passes taken");
  char method[240];
  std::snprintf(method, sizeof method,
                "%d-bit loads + 64-bit adds, 8 accumulators, 512 B per iteration; %.0f MiB "
                "buffer, %d threads each streaming its own first-touched slice",
                simd_bits(width_), double(words_per_thread_ * size_t(pool_.size()) * 8) / 1048576.0,
                pool_.size());
  return summarize(rates_, pool_.size(), width_, method);
}

Probe measure_fma_peak(ThreadPool& pool, int passes, Simd width, int64_t iters) {
  if (passes < 1) throw std::runtime_error("FMA probe: passes must be >= 1");
  if (iters < 1) throw std::runtime_error("FMA probe: iterations must be >= 1");
  require_width(width, "FMA probe");
  const int lanes = simd_bits(width == Simd::kPortable ? Simd::kSse2 : width) / 32;
  const double flops_per_iter = double(kChains) * lanes * 2;
  std::vector<double> out(size_t(pool.size()));
  auto rates = timed_passes(pool, passes, double(iters) * flops_per_iter, [&](int t) {
    out[size_t(t)] += run_chains(width, iters, 1.0f + float(t));
  });
  g_sink_f64 = out[0];
  return summarize(std::move(rates), pool.size(), width, fma_method(width));
}

std::vector<Probe> measure_fma_peaks(ThreadPool& pool, int passes, int64_t iters) {
  std::vector<Probe> out;
  for (Simd w : simd_widths()) out.push_back(measure_fma_peak(pool, passes, w, iters));
  return out;
}

std::vector<Probe> measure_dot_peaks(ThreadPool& pool, int passes, int64_t iters) {
  if (passes < 1) throw std::runtime_error("dot-product probe: passes must be >= 1");
  if (iters < 1) throw std::runtime_error("dot-product probe: iterations must be >= 1");
  std::vector<Probe> out;
#ifdef CEDAR_BENCH_X86
  const CpuFeatures& f = cpu_features();
  struct Kind {
    bool runs;
    const char* name;
    double (*chains)(int64_t, float);
    int macs;  // multiply-adds per instruction
    const char* what;
  };
  const Kind kinds[] = {
      {f.has_avx512() && f.avx512bf16, "VDPBF16PS", dot_bf16, 32,
       "bf16 pairs into fp32 lanes (the avx512bf16 table's products)"},
      {f.has_avx512() && f.avx512vnni, "VPDPBUSD", dot_int8, 64,
       "u8 x s8 quads into int32 lanes (int8 weights and activations)"},
  };
  for (const Kind& k : kinds) {
    if (!k.runs) continue;
    std::vector<double> sink(size_t(pool.size()));
    auto rates = timed_passes(pool, passes, double(iters) * kChains * k.macs * 2,
                              [&](int t) { sink[size_t(t)] += k.chains(iters, 1.0f + float(t)); });
    g_sink_f64 = sink[0];
    char m[200];
    std::snprintf(m, sizeof m,
                  "AVX-512 %s, %d multiply-adds of %s: %d independent chains per thread in "
                  "registers, 2 FLOPs per multiply-add",
                  k.name, k.macs, k.what, kChains);
    Probe p = summarize(std::move(rates), pool.size(), Simd::kAvx512, m);
    p.width = k.name;
    out.push_back(std::move(p));
  }
#else
  (void)pool;
#endif
  return out;
}

const Probe& best_probe(const std::vector<Probe>& probes) {
  if (probes.empty()) throw std::runtime_error("best_probe: no probes");
  return *std::max_element(probes.begin(), probes.end(),
                           [](const Probe& a, const Probe& b) { return a.median < b.median; });
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
  Probe p = summarize(std::move(rates), T, Simd::kPortable,
                      "kernel table '" + std::string(k.name) + "' fp8_gemm, " + std::to_string(M) +
                          " rows x [" + std::to_string(N) + " x " + std::to_string(K) +
                          "] L2-resident FP8 weight per thread, 2 FLOPs per multiply-add");
  p.width = k.name;
  return p;
}

}  // namespace cedar::bench

namespace cedar::bench {

Probe measure_storage_read(const std::string& path, const std::vector<ByteRange>& ranges,
                           int threads, int passes) {
  uint64_t total = 0, largest = 0;
  for (const ByteRange& r : ranges) total += r.n, largest = std::max(largest, r.n);
  if (total == 0 || passes < 1 || threads < 1)
    throw std::runtime_error("storage probe: nothing to read");
  auto f = FileReader::open(path);
  const bool direct = f->open_direct();
  constexpr uint64_t A = FileReader::kDirectAlign;
  std::vector<double> rates;
  for (int p = 0; p < passes; ++p) {
    for (const ByteRange& r : ranges) f->drop_cached(r.offset, r.n);
    std::exception_ptr err;
    std::mutex mu;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        const size_t cap = size_t((largest + 2 * A - 1) / A * A);
        std::unique_ptr<uint8_t, decltype(&std::free)> buf(
            static_cast<uint8_t*>(std::aligned_alloc(A, cap)), &std::free);
        try {
          for (size_t i = size_t(t); i < ranges.size(); i += size_t(threads)) {
            const ByteRange& r = ranges[i];
            const uint64_t a0 = r.offset / A * A, a1 = (r.offset + r.n + A - 1) / A * A;
            if (!direct ||
                !f->read_direct(a0, size_t(a1 - a0), size_t(r.offset + r.n - a0), buf.get()))
              f->read(r.offset, size_t(r.n), buf.get());
          }
        } catch (...) {
          std::lock_guard<std::mutex> lk(mu);
          err = std::current_exception();
        }
      });
    for (std::thread& t : ts) t.join();
    if (err) std::rethrow_exception(err);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(double(total) / std::max(s, 1e-9));
  }
  for (const ByteRange& r : ranges) f->drop_cached(r.offset, r.n);
  Probe r;
  r.median = median(rates);
  r.min = *std::min_element(rates.begin(), rates.end());
  r.max = *std::max_element(rates.begin(), rates.end());
  r.passes = passes;
  r.threads = threads;
  r.width = direct ? "O_DIRECT" : "pread";
  r.method =
      std::to_string(ranges.size()) + " reads of up to " + std::to_string(largest >> 10) +
      " KiB (" + std::to_string(total >> 20) + " MiB) of " + path + " on " +
      std::to_string(threads) + " threads" +
      (direct ? ", direct I/O (as the expert cache reads)" : ", after dropping their cached pages");
  return r;
}

}  // namespace cedar::bench
