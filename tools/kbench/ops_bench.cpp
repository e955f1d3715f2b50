// Non-GEMM kernel micro-benchmarks, every table this CPU runs, one thread: sparse_attn (one
// query: H=16, hd=128, 128 window + 256 compressed keys, and the released H=64, hd=512, 128 +
// 512), index_scores (IH=4 and 8, ihd=128, 16K key rows: rows/s is the number), topk (n=16384,
// k=32 and 512, bf16 scores), and the row kernels rms_norm / hc_pre / hc_post / swiglu at
// D=1024. Not a test.
//   build/cedar_ops_bench [--benchmark_filter=index]
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"

namespace cedar {
namespace {

std::vector<float> normal(size_t n, unsigned seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(nd(rng));
  return v;
}

void bench_attn(benchmark::State& st, const KernelTable* k, int H, int hd, int n_win, int n_comp) {
  const auto rows = normal(size_t(n_win + n_comp) * hd, 1, 2.0f);
  std::vector<uint8_t> wc(size_t(n_win) * hd), ws(size_t(n_win) * (hd / 32));
  std::vector<uint8_t> cc(size_t(n_comp) * (hd / 2)), cs(size_t(n_comp) * (hd / 16));
  std::vector<KeyRow> win, comp;
  for (int j = 0; j < n_win; ++j) {
    kernels::ref::act_quant(rows.data() + size_t(j) * hd, hd, wc.data() + size_t(j) * hd,
                            ws.data() + size_t(j) * (hd / 32));
    win.push_back({wc.data() + size_t(j) * hd, ws.data() + size_t(j) * (hd / 32)});
  }
  for (int j = 0; j < n_comp; ++j) {
    kernels::ref::fp4_act_quant_e4m3(rows.data() + size_t(n_win + j) * hd, hd,
                                     cc.data() + size_t(j) * (hd / 2),
                                     cs.data() + size_t(j) * (hd / 16));
    comp.push_back({cc.data() + size_t(j) * (hd / 2), cs.data() + size_t(j) * (hd / 16)});
  }
  AttnKeys keys{win.data(), n_win, comp.data(), n_comp};
  const auto q = normal(size_t(H) * hd, 2, 1.0f), sink = normal(size_t(H), 3, 1.0f);
  std::vector<float> out(size_t(H) * hd), scratch(k->sparse_attn_scratch(H, hd));
  for (auto _ : st) {
    k->sparse_attn(q.data(), H, hd, keys, sink.data(), 1.0f / std::sqrt(float(hd)), out.data(),
                   scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["queries/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}

void bench_index(benchmark::State& st, const KernelTable* k, int IH, int ihd, int n) {
  std::mt19937 rng(4);
  std::vector<int8_t> qc(size_t(IH) * ihd);
  static const int8_t kTwice[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  for (auto& c : qc) c = int8_t(kTwice[rng() % 8] * ((rng() & 1) ? 1 : -1));
  std::vector<uint8_t> qe(size_t(IH) * (ihd / 32)), ks(size_t(n) * (ihd / 32));
  for (auto& e : qe) e = uint8_t(124 + rng() % 4);
  for (auto& e : ks) e = uint8_t(124 + rng() % 4);
  std::vector<uint8_t> keys(size_t(n) * (ihd / 2));
  for (auto& b : keys) b = uint8_t(rng());
  const auto w = normal(size_t(IH), 5, 0.2f);
  std::vector<float> score(static_cast<size_t>(n));
  for (auto _ : st) {
    k->index_scores(qc.data(), qe.data(), w.data(), IH, ihd, keys.data(), ks.data(), nullptr, n,
                    score.data());
    benchmark::DoNotOptimize(score.data());
  }
  st.counters["rows/s"] = benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
}

void bench_topk(benchmark::State& st, const KernelTable* k, int n, int kk) {
  const auto v = normal(size_t(n), 6, 1.0f);
  std::vector<int> out(static_cast<size_t>(kk));
  for (auto _ : st) {
    k->topk(v.data(), n, kk, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void bench_rms_norm(benchmark::State& st, const KernelTable* k, int D) {
  const auto x = normal(size_t(D), 7, 1.0f);
  std::vector<uint16_t> w(size_t(D), 0x3f80);
  std::vector<float> out(static_cast<size_t>(D));
  for (auto _ : st) {
    k->rms_norm(x.data(), D, w.data(), 1e-20f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void bench_hc_pre(benchmark::State& st, const KernelTable* k, int D) {
  const auto h = normal(size_t(4) * D, 8, 1.0f);
  const float mix[4] = {0.3f, 0.2f, 0.4f, 0.1f};
  std::vector<float> out(static_cast<size_t>(D));
  for (auto _ : st) {
    k->hc_pre(h.data(), mix, 4, D, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void bench_hc_post(benchmark::State& st, const KernelTable* k, int D) {
  const auto h = normal(size_t(4) * D, 9, 1.0f), y = normal(size_t(D), 10, 1.0f);
  const float post[4] = {0.3f, 0.2f, 0.4f, 0.1f};
  float comb[16];
  for (int i = 0; i < 16; ++i) comb[i] = 0.0625f * float(i);
  std::vector<float> out(size_t(4) * D);
  for (auto _ : st) {
    k->hc_post(y.data(), h.data(), post, comb, 4, D, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void bench_swiglu(benchmark::State& st, const KernelTable* k, int D) {
  const auto g = normal(size_t(D), 11, 3.0f), u = normal(size_t(D), 12, 3.0f);
  std::vector<float> out(static_cast<size_t>(D));
  for (auto _ : st) {
    k->swiglu(g.data(), u.data(), D, 10.0f, true, 0.5f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void register_all() {
  for (const KernelTable* k : supported_kernel_tables()) {
    const std::string p = std::string(k->name) + "/";
    benchmark::RegisterBenchmark((p + "sparse_attn/H16/hd128/128+256").c_str(), bench_attn, k, 16,
                                 128, 128, 256)
        ->Unit(benchmark::kMicrosecond);
    // the released shape: 64 heads of 512, a full window and index_topk compressed rows
    benchmark::RegisterBenchmark((p + "sparse_attn/H64/hd512/128+512").c_str(), bench_attn, k, 64,
                                 512, 128, 512)
        ->Unit(benchmark::kMicrosecond);
    for (int IH : {4, 8})
      benchmark::RegisterBenchmark((p + "index_scores/IH" + std::to_string(IH) + "/16K").c_str(),
                                   bench_index, k, IH, 128, 16384)
          ->Unit(benchmark::kMicrosecond);
    for (int kk : {32, 512})
      benchmark::RegisterBenchmark((p + "topk/16384/k" + std::to_string(kk)).c_str(), bench_topk, k,
                                   16384, kk)
          ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((p + "rms_norm/1024").c_str(), bench_rms_norm, k, 1024);
    benchmark::RegisterBenchmark((p + "hc_pre/1024").c_str(), bench_hc_pre, k, 1024);
    benchmark::RegisterBenchmark((p + "hc_post/1024").c_str(), bench_hc_post, k, 1024);
    benchmark::RegisterBenchmark((p + "swiglu/1024").c_str(), bench_swiglu, k, 1024);
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
