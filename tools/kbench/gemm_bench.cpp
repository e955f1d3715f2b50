// GEMM family micro-benchmarks: every table this CPU runs x every weight format, as a decode step
// (one row against a weight much larger than the last-level cache: bytes/s is the number) and as
// a prefill block (64 rows against an L2-sized weight: FLOP/s). Threads: the pool splits the
// columns like linear() does. Not a test; `cedar bench` reports the model-level ratios.
//   build/cedar_gemm_bench [--benchmark_filter=avx2/fp4]
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kernel_table.h"
#include "model/gguf.h"
#include "model/gguf_decode.h"
#include "model/gguf_encode.h"

namespace cedar {
namespace {

struct Weight {
  std::vector<uint8_t> w, s;
};

// Random valid codes of format f for an [N, K] weight.
Weight make(WeightFormat f, int N, int K) {
  std::mt19937 rng(1);
  Weight t;
  switch (f) {
    case WeightFormat::kFP8:
    case WeightFormat::kFP8W:
      t.w.resize(size_t(N) * K);
      t.s.assign(size_t((N + 31) / 32) * (K / 32), 120);
      for (auto& c : t.w) c = uint8_t(rng() % 0x7f);
      break;
    case WeightFormat::kFP4:
      t.w.resize(size_t(N) * K / 2);
      t.s.assign(size_t(N) * (K / 32), 120);
      for (auto& c : t.w) c = uint8_t(rng());
      break;
    case WeightFormat::kMXFP4:  // the FP4 case's codes and scale, as ggml blocks
      t.w.resize(size_t(N) * (K / 32) * 17);
      for (size_t b = 0; b < t.w.size(); b += 17) {
        t.w[b] = 120;
        for (int i = 1; i < 17; ++i) t.w[b + size_t(i)] = uint8_t(rng());
      }
      break;
    case WeightFormat::kBF16:
      t.w.resize(size_t(N) * K * 2);
      for (size_t i = 0; i < t.w.size(); i += 2) t.w[i + 1] = uint8_t(0x3c + rng() % 4);
      break;
    case WeightFormat::kQ8B:  // random codes, scale 2^-8 (any byte is a valid code)
      t.w.resize(size_t(N) * K);
      for (auto& c : t.w) c = uint8_t(rng());
      t.s.resize(size_t(N) * (K / 32) * 2);
      for (size_t i = 0; i < t.s.size(); i += 2) t.s[i + 1] = 0x3b;  // bf16 0x3b80 = 2^-8
      for (size_t i = 0; i < t.s.size(); i += 2) t.s[i] = 0x80;
      break;
    case WeightFormat::kF32: {
      t.w.resize(size_t(N) * K * 4);
      std::vector<float> v(size_t(N) * K);
      for (auto& x : v) x = float(rng() % 1000) * 1e-3f;
      std::memcpy(t.w.data(), v.data(), t.w.size());
      break;
    }
    case WeightFormat::kIQ2_XXS:
    case WeightFormat::kIQ1_S:
    case WeightFormat::kIQ1_M: {  // random grid indices, signs and scales (any bytes are a valid
                                  // block; encoding 512 MiB of values would take minutes), d 2^-8
      const int bytes = f == WeightFormat::kIQ2_XXS ? 66 : f == WeightFormat::kIQ1_S ? 50 : 56;
      const int blocks = N * (K / 256);
      t.w.resize(size_t(blocks) * size_t(bytes));
      for (auto& c : t.w) c = uint8_t(rng());
      for (int b = 0; b < blocks; ++b) {
        uint8_t* p = t.w.data() + size_t(b) * size_t(bytes);
        if (f == WeightFormat::kIQ1_M) {  // d = the four scale words' top nibbles: 0x1c00
          for (int i = 0; i < 4; ++i)
            p[49 + 2 * i] = uint8_t((p[49 + 2 * i] & 15) | (i == 2 ? 0xC0 : i == 3 ? 0x10 : 0));
        } else {
          const uint16_t d = 0x1c00;
          std::memcpy(p, &d, 2);
        }
      }
      break;
    }
    default: {  // a GGUF block format: Gaussian rows through cedar's encoder
      const uint32_t type = ggml_type_of(f);
      if (!gguf::encodable(type))
        throw std::invalid_argument("gemm_bench: no encoder for this format");
      const size_t row = size_t(gguf::row_bytes(type, K));
      t.w.resize(size_t(N) * row);
      std::normal_distribution<float> nd(0.0f, 0.02f);
      std::vector<float> v(static_cast<size_t>(K));
      for (int n = 0; n < N; ++n) {
        for (auto& x : v) x = nd(rng);
        gguf::encode_row(type, v.data(), K, t.w.data() + size_t(n) * row);
      }
      break;
    }
  }
  return t;
}

void run(benchmark::State& st, const KernelTable* k, WeightFormat f, int M, int N, int K,
         int threads) {
  static ThreadPool pool1(1), pool2(2);
  ThreadPool& pool = threads == 1 ? pool1 : pool2;
  const Weight t = make(f, N, K);
  const GemmKernels& g = k->gemm[int(f)];
  std::vector<float> x(size_t(M) * K), act(size_t(M) * size_t(g.act_floats(K)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 17) - 8) * 0.25f;
  g.prepare(x.data(), M, K, act.data());
  std::vector<float> y(size_t(M) * N);
  const int chunk = (N / (4 * pool.size()) + 31) / 32 * 32;
  const int nblk = (N + chunk - 1) / chunk;
  for (auto _ : st) {
    pool.parallel_for(nblk, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int n0 = int(b) * chunk, n1 = std::min(N, n0 + chunk);
        g.gemm(act.data(), M, K, t.w.data(), t.s.empty() ? nullptr : t.s.data(), n0, n1,
               y.data() + n0, N);
      }
    });
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["bytes/s"] = benchmark::Counter(double(t.w.size() + t.s.size()),
                                              benchmark::Counter::kIsIterationInvariantRate);
  st.counters["FLOP/s"] =
      benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}

// The lanes-over-outputs bf16 product (kernel_table.h bf16_lanes) on a packed [N, K] weight, the
// pool splitting the groups like VocabProduct does.
void run_lanes(benchmark::State& st, const KernelTable* k, int M, int N, int K, int threads) {
  static ThreadPool pool1(1), pool2(2);
  ThreadPool& pool = threads == 1 ? pool1 : pool2;
  const Weight t = make(WeightFormat::kBF16, N, K);
  std::vector<uint32_t> packed(lanes_packed_words(N, K));
  pack_bf16_lanes(reinterpret_cast<const uint16_t*>(t.w.data()), N, K, packed.data());
  std::vector<float> x(size_t(M) * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 17) - 8) * 0.25f;
  const int groups = (N + 15) / 16;
  std::vector<float> y(size_t(M) * size_t(groups) * 16);
  for (auto _ : st) {
    pool.parallel_for(
        groups,
        [&](int64_t g0, int64_t g1) {
          k->bf16_lanes(packed.data(), K, int(g0), int(g1), x.data(), M, K, y.data(), groups * 16);
        },
        64);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["bytes/s"] =
      benchmark::Counter(double(t.w.size()), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["FLOP/s"] =
      benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}

const char* name_of(WeightFormat f) {
  static const char* n[] = {"fp8",  "fp4",     "bf16",  "f32",   "fp8w",  "q8_0",
                            "q4_0", "q5_0",    "q2_k",  "q3_k",  "q4_k",  "q5_k",
                            "q6_k", "iq2_xxs", "iq1_s", "iq1_m", "mxfp4", "q8b"};
  static_assert(sizeof(n) / sizeof(n[0]) == kWeightFormats);
  return n[int(f)];
}

void register_all() {
  for (const KernelTable* k : supported_kernel_tables())
    for (WeightFormat f :
         {WeightFormat::kFP8, WeightFormat::kFP4, WeightFormat::kMXFP4, WeightFormat::kBF16,
          WeightFormat::kF32, WeightFormat::kQ8_0, WeightFormat::kQ4_K, WeightFormat::kQ2_K,
          WeightFormat::kIQ2_XXS, WeightFormat::kIQ1_S, WeightFormat::kIQ1_M})
      for (int threads : {1, 2}) {
        const std::string p =
            std::string(k->name) + "/" + name_of(f) + "/t" + std::to_string(threads);
        // decode: ~128 MiB of FP8/bf16 codes (64 MiB FP4), far past the LLC
        const int K = 4096, N = f == WeightFormat::kF32 ? 8192 : 32768;
        benchmark::RegisterBenchmark((p + "/gemv").c_str(), run, k, f, 1, N, K, threads)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        // the vocabulary head's shape (bf16 [129280, 1024] in the bench preset): short rows
        if (f == WeightFormat::kBF16)
          for (WeightFormat h : {WeightFormat::kBF16, WeightFormat::kQ8B})
            for (int D : {1024, 2048})  // (bench and anchor presets; q8b: --head-type q8)
              benchmark::RegisterBenchmark(
                  (std::string(k->name) + "/" + name_of(h) + "/t" + std::to_string(threads) +
                   "/gemv_head" + (D == 1024 ? "" : "_2048"))
                      .c_str(),
                  run, k, h, 1, 129280, D, threads)
                  ->Unit(benchmark::kMillisecond)
                  ->UseRealTime();
        // the default (tiny) model's head [129280, 128]: a plain step's one row, a DSpark draft's
        // 5 and a verify pass's 6 rows
        if (f == WeightFormat::kBF16)
          for (int rows : {1, 5, 6})
            benchmark::RegisterBenchmark((p + "/head_k128_rows" + std::to_string(rows)).c_str(),
                                         run, k, f, rows, 129280, 128, threads)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
        // the default model's DSpark Markov head (rank 16, zero-padded to 32): one row per
        // drafted token
        if (f == WeightFormat::kBF16)
          benchmark::RegisterBenchmark((p + "/markov_k32").c_str(), run, k, f, 1, 129280, 32,
                                       threads)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        // the default model's distinct head rows [38027, 128] (forward/vocab_product.h) at 1, 5
        // and 6 rows: the bf16 GEMM family against bf16_lanes
        if (f == WeightFormat::kBF16)
          for (int rows : {1, 5, 6}) {
            const std::string r = std::to_string(rows);
            benchmark::RegisterBenchmark((p + "/distinct_head_rows" + r).c_str(), run, k, f, rows,
                                         38027, 128, threads)
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
            if (k->bf16_lanes)
              benchmark::RegisterBenchmark((p + "/lanes_head_rows" + r).c_str(), run_lanes, k, rows,
                                           38027, 128, threads)
                  ->Unit(benchmark::kMicrosecond)
                  ->UseRealTime();
          }
        // a batched decode step's few rows per routed expert (row-by-row kernel vs panel)
        for (int rows : {2, 4, 8, 16})
          benchmark::RegisterBenchmark((p + "/gemv_rows" + std::to_string(rows)).c_str(), run, k, f,
                                       rows, N, K, threads)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        // the same decode step on a weight that stays in L2: the kernel's own speed limit
        benchmark::RegisterBenchmark((p + "/gemv_l2").c_str(), run, k, f, 1, 256, 1024, threads)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark((p + "/gemm64").c_str(), run, k, f, 64, 256, 1024, threads)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
}

}  // namespace
}  // namespace cedar

int main(int argc, char** argv) {
  cedar::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
