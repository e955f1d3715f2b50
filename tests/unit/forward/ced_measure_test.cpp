// Measurement, not a check (runs only with CEDAR_CED_MEASURE=1; no timing asserts): CED vs exact
// prefill on the small preset (the release's 40-layer schedule) with a 2K-token prompt: the
// prefill time ratio, the relative L2 of the next-token logits, and the agreement of 64 greedy
// tokens (argmax of the last row, fed back by decode). Prints the numbers for docs/FORWARD.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "forward/transformer.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "text/engram_token_map.h"
#include "text/tokenizer.h"

namespace cedar {
namespace {

int32_t argmax(const std::vector<float>& v) {
  size_t b = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[b]) b = i;
  return int32_t(b);
}

TEST(CedMeasure, SmallPreset2kPrompt) {
  const char* on = std::getenv("CEDAR_CED_MEASURE");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "set CEDAR_CED_MEASURE=1 to measure";
  const char* e = std::getenv("CEDAR_BIN");
  const std::string bin = e && *e ? e : CEDAR_BIN;
  const int T = std::getenv("CEDAR_CED_T") ? std::atoi(std::getenv("CEDAR_CED_T")) : 2048;
  const int G = 64;
  const std::string dir = "/tmp/cedar_ced_measure_small";
  if (!std::filesystem::exists(dir + "/config.json")) {
    ASSERT_EQ(std::system((bin + " make-model --preset small --seed 1 --out " + dir).c_str()), 0);
  }
  auto ckpt = Checkpoint::open(dir);
  const auto tok = text::Tokenizer::load(dir + "/tokenizer.json");
  ThreadPool pool(0);
  Transformer model(*ckpt, choose_kernels("ref"), pool, text::build_engram_token_map(tok).map);
  const int64_t V = model.config().vocab_size;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> id(0, 127999);
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (auto& v : ids) v = id(rng);

  double rel_l2_sum = 0;
  int tf_agree = 0;
  // one prefill + 64 greedy decode steps; `force` (if given) feeds those tokens instead of the
  // model's own argmax (teacher forcing), comparing each step with `ref_steps`
  auto run = [&](PrefillMode mode, std::vector<std::vector<float>>& steps,
                 std::vector<int32_t>& gen, const std::vector<int32_t>* force,
                 const std::vector<std::vector<float>>* ref_steps) {
    SequenceState st = model.new_state();
    ForwardOptions o;
    o.mode = mode;
    std::vector<float> l(static_cast<size_t>(V));
    const auto t0 = std::chrono::steady_clock::now();
    model.forward(st, ids.data(), T, 0, o, l.data());
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    steps.assign(1, l);
    gen.clear();
    for (int k = 0; k < G; ++k) {
      const int32_t t = force ? (*force)[size_t(k)] : argmax(l);
      gen.push_back(argmax(l));
      if (ref_steps) {
        const auto& r = (*ref_steps)[size_t(k)];
        double num = 0, den = 0;
        for (size_t i = 0; i < r.size(); ++i) {
          num += double(l[i] - r[i]) * double(l[i] - r[i]);
          den += double(r[i]) * double(r[i]);
        }
        rel_l2_sum += std::sqrt(num / den);
        tf_agree += argmax(l) == argmax(r);
      }
      model.forward(st, &t, 1, st.n_tokens, o, l.data());
      steps.push_back(l);
    }
    return secs;
  };
  std::vector<std::vector<float>> se, sc, sf;
  std::vector<int32_t> ge, gc, gf;
  const double te = run(PrefillMode::kExact, se, ge, nullptr, nullptr);
  const double tc = run(PrefillMode::kCed, sc, gc, nullptr, nullptr);
  run(PrefillMode::kCed, sf, gf, &ge, &se);  // CED state fed the exact run's greedy tokens
  const auto& le = se[0];
  const auto& lc = sc[0];
  double num = 0, den = 0;
  for (size_t i = 0; i < le.size(); ++i) {
    num += double(lc[i] - le[i]) * double(lc[i] - le[i]);
    den += double(le[i]) * double(le[i]);
  }
  // how decisive the exact next-token distribution is: top-1 minus top-2 logit
  std::vector<float> sorted = le;
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  int agree = 0, prefix = 0;
  bool still = true;
  for (int k = 0; k < G; ++k) {
    agree += ge[size_t(k)] == gc[size_t(k)];
    still = still && ge[size_t(k)] == gc[size_t(k)];
    prefix += still;
  }
  std::printf(
      "small preset, T=%d, %d threads: exact prefill %.2f s (%.1f tok/s), CED %.2f s (%.1f "
      "tok/s), ratio %.2fx\n",
      T, pool.size(), te, T / te, tc, T / tc, te / tc);
  std::printf(
      "next-token logits relative L2 (CED vs exact): %.4e; argmax same: %s; exact top1-top2 "
      "gap %.4f\n",
      std::sqrt(num / den), argmax(le) == argmax(lc) ? "yes" : "no", sorted[0] - sorted[1]);
  std::printf("64 greedy tokens (free-running): %d/%d equal position-wise, first %d identical\n",
              agree, G, prefix);
  std::printf(
      "teacher-forced (CED state fed the exact greedy tokens): argmax agrees %d/%d steps, mean "
      "logits rel L2 %.4e; after the last step rel L2 %.4e\n",
      tf_agree, G, rel_l2_sum / G, [&] {
        double n2 = 0, d2 = 0;
        for (size_t i = 0; i < se[size_t(G)].size(); ++i) {
          n2 += double(sf[size_t(G)][i] - se[size_t(G)][i]) *
                double(sf[size_t(G)][i] - se[size_t(G)][i]);
          d2 += double(se[size_t(G)][i]) * double(se[size_t(G)][i]);
        }
        return std::sqrt(n2 / d2);
      }());
}

}  // namespace
}  // namespace cedar
