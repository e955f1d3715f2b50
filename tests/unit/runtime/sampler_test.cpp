// Sampler: exact expectations on hand-made logits for every filter, the documented order, the
// counter-based random source, and the empirical distribution of the full pipeline.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

namespace cedar::runtime {
namespace {

std::vector<int32_t> ids_of(const std::vector<Candidate>& c) {
  std::vector<int32_t> ids;
  for (const auto& x : c) ids.push_back(x.id);
  return ids;
}

// softmax of v / t over the listed ids, in double
std::vector<double> softmax(const std::vector<float>& v, const std::vector<int32_t>& ids,
                            double t) {
  double mx = -INFINITY;
  for (int32_t i : ids) mx = std::max(mx, double(v[size_t(i)]));
  std::vector<double> e;
  double s = 0;
  for (int32_t i : ids) {
    e.push_back(std::exp((double(v[size_t(i)]) - mx) / t));
    s += e.back();
  }
  for (auto& x : e) x /= s;
  return e;
}

TEST(Sampler, PenaltiesSubtractFrequencyTimesCountPlusPresence) {
  std::vector<float> v = {1.0f, 2.0f, 3.0f, 4.0f};
  SamplingParams p;
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  apply_penalties(std::span<float>(v), {{1, 2}, {3, 1}, {9, 4}}, p);  // id 9: outside, ignored
  EXPECT_EQ(v, (std::vector<float>{1.0f, 2.0f - 1.0f - 0.25f, 3.0f, 4.0f - 0.5f - 0.25f}));
  SamplingParams none;
  std::vector<float> w = {1.0f, 2.0f};
  apply_penalties(std::span<float>(w), {{0, 3}}, none);
  EXPECT_EQ(w, (std::vector<float>{1.0f, 2.0f}));
  p.frequency_penalty = 2.5;
  EXPECT_THROW(p.validate(), std::invalid_argument);
}

TEST(Sampler, TokenLogprobsAreALogSoftmaxWithSortedAlternatives) {
  const std::vector<float> v = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  const TokenLogprobs t = token_logprobs(std::span<const float>(v), 4, 3);
  double z = 0;
  for (float x : v) z += std::exp(double(x));
  EXPECT_NEAR(t.logprob, 1.0 - std::log(z), 1e-12);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].first, 1);  // the tie 2.0 / 2.0 -> lower id first
  EXPECT_EQ(t.top[1].first, 3);
  EXPECT_EQ(t.top[2].first, 4);
  EXPECT_NEAR(t.top[0].second, 2.0 - std::log(z), 1e-12);
  EXPECT_DOUBLE_EQ(t.top[2].second, t.logprob);
  EXPECT_TRUE(token_logprobs(std::span<const float>(v), 0, 0).top.empty());
  EXPECT_EQ(token_logprobs(std::span<const float>(v), 0, 20).top.size(), v.size());
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  const std::vector<float> v = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  EXPECT_EQ(argmax(v), 1);
  SamplingParams p;
  p.temperature = 0.0;
  const Sampler s(p);
  for (int64_t pos = 0; pos < 50; ++pos) EXPECT_EQ(s.sample(v, pos), 1);
  // top_k = 1 is greedy at any temperature
  p.temperature = 5.0;
  p.top_k = 1;
  EXPECT_EQ(Sampler(p).sample(v, 7), 1);
  const auto c = sampling_candidates(v, p);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].id, 1);
  EXPECT_EQ(c[0].p, 1.0);
}

// The vectorised scans against the plain sequential scan, on vocabulary-wide rows: ties, signed
// zeros, -inf, NaN (argmax moves past a NaN best), and the greedy sampler's NaN/+inf errors
// wherever they sit (vector body or tail).
TEST(Sampler, ArgmaxOfWideRowsIsTheSequentialScan) {
  auto scalar = [](const std::vector<float>& v) {
    size_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] > v[best] || std::isnan(v[best])) best = i;
    return int32_t(best);
  };
  std::mt19937 rng(11);
  SamplingParams p;
  p.temperature = 0.0;
  const Sampler greedy(p);
  for (size_t n : {1u, 5u, 16u, 17u, 31u, 129280u}) {
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<float> v(n);
      for (auto& x : v) {
        switch (kind) {
          case 0:
            x = std::normal_distribution<float>(0.0f, 4.0f)(rng);
            break;
          case 1:
            x = float(int(rng() % 3));
            break;  // ties everywhere
          case 2:
            x = (rng() % 2) ? 0.0f : -0.0f;
            break;  // signed zeros
          case 3:
            x = -INFINITY;
            break;  // nothing above -inf
          default:
            x = (rng() % 7 == 0) ? NAN : float(int(rng() % 50));  // NaNs
        }
      }
      ASSERT_EQ(argmax(v), scalar(v)) << "n=" << n << " kind=" << kind;
      if (kind < 4) {
        ASSERT_EQ(greedy.sample(v, 0), scalar(v)) << "n=" << n << " kind=" << kind;
      }
    }
    for (size_t at : {size_t(0), n / 2, n - 1}) {
      std::vector<float> v(n, 1.0f);
      v[at] = NAN;
      EXPECT_THROW(greedy.sample(v, 0), std::runtime_error) << "NaN at " << at;
      v[at] = INFINITY;
      EXPECT_THROW(greedy.sample(v, 0), std::runtime_error) << "+inf at " << at;
    }
  }
}

TEST(Sampler, TemperatureOnlyKeepsEveryTokenInIdOrder) {
  const std::vector<float> v = {1.0f, 2.0f, 0.0f, -INFINITY};
  SamplingParams p;
  p.temperature = 2.0;
  const auto c = sampling_candidates(v, p);
  ASSERT_EQ(ids_of(c), (std::vector<int32_t>{0, 1, 2}));  // -inf has probability 0: dropped
  const auto want = softmax(v, {0, 1, 2}, 2.0);
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(c[k].p, want[k], 1e-15);
  // exp(0.5)/(exp(0.5)+exp(1)+1) by hand
  EXPECT_NEAR(c[0].p, std::exp(0.5) / (std::exp(0.5) + std::exp(1.0) + 1.0), 1e-15);
}

TEST(Sampler, TopKKeepsTheKLargestTiesToLowerId) {
  const std::vector<float> v = {1.0f, 4.0f, 3.0f, 4.0f, 3.0f, 0.0f};
  SamplingParams p;
  p.top_k = 3;
  const auto c = sampling_candidates(v, p);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 2, 3}));  // 4, 4, the lower-id 3; in id order
  const auto want = softmax(v, {1, 2, 3}, 1.0);
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(c[k].p, want[k], 1e-15);
  // k >= vocab: no-op (all tokens, id order)
  p.top_k = 100;
  EXPECT_EQ(sampling_candidates(v, p).size(), v.size());
}

TEST(Sampler, TopPKeepsTheShortestPrefixReachingP) {
  // probabilities 0.5, 0.25, 0.125, 0.125 exactly (logits = log2 spacing)
  const std::vector<float> v = {float(std::log(0.125)), float(std::log(0.5)),
                                float(std::log(0.125)), float(std::log(0.25))};
  SamplingParams p;
  p.top_p = 0.6;
  EXPECT_EQ(ids_of(sampling_candidates(v, p)), (std::vector<int32_t>{1, 3}));
  p.top_p = 0.74;  // 0.5 + 0.25 reaches it: still two
  auto c = sampling_candidates(v, p);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(c[0].p, 2.0 / 3.0, 1e-7);  // renormalised
  EXPECT_NEAR(c[1].p, 1.0 / 3.0, 1e-7);
  p.top_p = 0.8;  // needs the third; the tie between ids 0 and 2 goes to the lower id
  EXPECT_EQ(ids_of(sampling_candidates(v, p)), (std::vector<int32_t>{0, 1, 3}));
  p.top_p = 0.1;  // always at least one token
  EXPECT_EQ(ids_of(sampling_candidates(v, p)), (std::vector<int32_t>{1}));
}

TEST(Sampler, TopPOnAWideRowEqualsAFullSort) {
  // 5000 tokens, a flat-ish distribution: the bucketed selection must keep the same set as
  // sorting everything (in id order).
  std::vector<float> v(5000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7919) % 1000) / 250.0f;
  SamplingParams p;
  p.top_p = 0.9;
  const auto c = sampling_candidates(v, p);
  std::vector<int32_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = int32_t(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return v[size_t(a)] != v[size_t(b)] ? v[size_t(a)] > v[size_t(b)] : a < b;
  });
  const auto probs = softmax(v, order, 1.0);
  double cum = 0;
  size_t keep = 0;
  while (keep < order.size()) {
    cum += probs[keep++];
    if (cum >= 0.9) break;
  }
  ASSERT_EQ(c.size(), keep);
  ASSERT_GT(keep, 256u);  // several whole buckets and a partial one
  order.resize(keep);
  std::sort(order.begin(), order.end());
  EXPECT_EQ(ids_of(c), order);
}

TEST(Sampler, TopPCutsInsideATieInIdOrder) {
  // one likely token and 1000 tied ones (weights 1 and e^-4 = 0.0183): top-p 0.5 of the mass
  // (~9.66) takes the likely token and the first 473 tied ids, in id order
  std::vector<float> v(1001, 1.0f);
  v[500] = 5.0f;
  SamplingParams p;
  p.top_p = 0.5;
  const auto c = sampling_candidates(v, p);
  const double w = std::exp(-4.0), target = 0.5 * (1.0 + 1000 * w);
  size_t want = 1;
  for (double cum = 1.0; cum < target; cum += w) ++want;
  ASSERT_EQ(c.size(), want);
  std::vector<int32_t> ids;
  for (int32_t i = 0; ids.size() + 1 < want; ++i)
    if (i != 500) ids.push_back(i);
  ids.push_back(500);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids_of(c), ids);
}

TEST(Sampler, MinPIsRelativeToTheMostLikelyToken) {
  // p = 0.5, 0.25, 0.125, 0.125
  const std::vector<float> v = {float(std::log(0.5)), float(std::log(0.25)), float(std::log(0.125)),
                                float(std::log(0.125))};
  SamplingParams p;
  p.min_p = 0.3;  // floor 0.15: drops the two 0.125 tokens
  auto c = sampling_candidates(v, p);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(c[0].p, 2.0 / 3.0, 1e-7);
  p.min_p = 0.24;  // floor 0.12: everything kept
  EXPECT_EQ(sampling_candidates(v, p).size(), 4u);
}

TEST(Sampler, FiltersApplyInTheDocumentedOrder) {
  // logits 3,2,1,0 at T=1 -> p ~ .644, .237, .087, .032
  const std::vector<float> v = {3.0f, 2.0f, 1.0f, 0.0f};
  SamplingParams p;
  p.top_k = 3;    // drops id 3; renormalised over {0,1,2}: .665, .245, .090
  p.top_p = 0.9;  // .665+.245 = .910 >= .9: keeps {0,1}
  p.min_p = 0.5;  // floor .333: keeps {0}
  EXPECT_EQ(ids_of(sampling_candidates(v, p)), (std::vector<int32_t>{0}));
  p.min_p = 0.3;  // floor .2: keeps {0,1}
  EXPECT_EQ(ids_of(sampling_candidates(v, p)), (std::vector<int32_t>{0, 1}));
  // temperature before top-p: T = 10 flattens the row so top-p 0.9 needs all three of top-k
  p.temperature = 10.0;
  p.min_p = 0.0;
  EXPECT_EQ(ids_of(sampling_candidates(v, p)), (std::vector<int32_t>{0, 1, 2}));
}

TEST(Sampler, PickWalksTheCumulativeMass) {
  const std::vector<Candidate> c = {{7, 0.5}, {3, 0.25}, {9, 0.25}};
  EXPECT_EQ(pick_candidate(c, 0.0), 7);
  EXPECT_EQ(pick_candidate(c, 0.49), 7);
  EXPECT_EQ(pick_candidate(c, 0.5), 3);  // cumulative must exceed u
  EXPECT_EQ(pick_candidate(c, 0.74), 3);
  EXPECT_EQ(pick_candidate(c, 0.75), 9);
  EXPECT_EQ(pick_candidate(c, 0.9999999), 9);
}

TEST(Sampler, UniformIsAPureFunctionOfSeedAndPosition) {
  EXPECT_EQ(sample_uniform(42, 1000), sample_uniform(42, 1000));
  EXPECT_NE(sample_uniform(42, 1000), sample_uniform(42, 1001));
  EXPECT_NE(sample_uniform(42, 1000), sample_uniform(43, 1000));
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = sample_uniform(7, uint64_t(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
}

TEST(Sampler, SampleDependsOnlyOnLogitsSeedAndPosition) {
  const std::vector<float> v = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  SamplingParams p;
  p.seed = 123;
  const Sampler a(p), b(p);
  // interleaving / order of calls does not matter
  std::vector<int32_t> fwd, bwd(64);
  for (int64_t pos = 0; pos < 64; ++pos) fwd.push_back(a.sample(v, pos));
  for (int64_t pos = 63; pos >= 0; --pos) bwd[size_t(pos)] = b.sample(v, pos);
  EXPECT_EQ(fwd, bwd);
  // and equals the pipeline spelled out
  for (int64_t pos = 0; pos < 64; ++pos)
    EXPECT_EQ(fwd[size_t(pos)],
              pick_candidate(sampling_candidates(v, p), sample_uniform(123, uint64_t(pos))));
  // a different seed gives a different sequence
  p.seed = 124;
  const Sampler c(p);
  std::vector<int32_t> other;
  for (int64_t pos = 0; pos < 64; ++pos) other.push_back(c.sample(v, pos));
  EXPECT_NE(fwd, other);
}

TEST(Sampler, EmpiricalFrequenciesMatchTheDistribution) {
  const std::vector<float> v = {0.0f, 1.0f, 2.0f, -1.0f};
  SamplingParams p;
  p.temperature = 0.7;
  p.top_k = 3;
  p.seed = 5;
  const auto c = sampling_candidates(v, p);
  const Sampler s(p);
  std::map<int32_t, int> count;
  const int n = 200000;
  for (int i = 0; i < n; ++i) ++count[s.sample(v, i)];
  EXPECT_EQ(count.count(3), 0u);  // cut by top-k
  for (const auto& x : c) EXPECT_NEAR(double(count[x.id]) / n, x.p, 0.005) << x.id;
}

TEST(Sampler, RejectsBadParametersAndRows) {
  SamplingParams p;
  p.top_p = 0.0;
  EXPECT_THROW(p.validate(), std::invalid_argument);
  p.top_p = 1.5;
  EXPECT_THROW(Sampler{p}, std::invalid_argument);
  p = {};
  p.min_p = -0.1;
  EXPECT_THROW(p.validate(), std::invalid_argument);
  p = {};
  p.top_k = -1;
  EXPECT_THROW(p.validate(), std::invalid_argument);
  p = {};
  p.temperature = NAN;
  EXPECT_THROW(p.validate(), std::invalid_argument);
  p = {};
  const Sampler s(p);
  EXPECT_THROW(s.sample(std::vector<float>{}, 0), std::runtime_error);
  EXPECT_THROW(s.sample(std::vector<float>{1.0f, NAN}, 0), std::runtime_error);
  EXPECT_THROW(s.sample(std::vector<float>{1.0f, INFINITY}, 0), std::runtime_error);
  EXPECT_THROW(s.sample(std::vector<float>{-INFINITY, -INFINITY}, 0), std::runtime_error);
}

}  // namespace
}  // namespace cedar::runtime
