#include "runtime/sampler.h"

#include <emmintrin.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace cedar::runtime {

namespace {

// SplitMix64 finaliser: a bijective avalanche mix of 64 bits.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Sort key of steps 2 and 4: larger value first, ties to the lower id, so the order is total
// and independent of the sort algorithm.
struct ByValueDesc {
  const float* z;
  bool operator()(int32_t a, int32_t b) const {
    if (z[a] != z[b]) return z[a] > z[b];
    return a < b;
  }
};

// One pass over a row, 16 values at a time (SSE2, every x86-64): its largest value and whether
// it holds a NaN or +inf. A row is a whole vocabulary (129,280 values) and the small models decode
// a token in about a millisecond: the scalar scans here cost half of that.
struct RowScan {
  float max = -INFINITY;
  bool nan = false, inf = false;
};
RowScan scan_row(std::span<const float> row) {
  const float* v = row.data();
  const size_t n = row.size();
  __m128 mx[4], nan = _mm_setzero_ps(), inf = _mm_setzero_ps();
  for (auto& m : mx) m = _mm_set1_ps(-INFINITY);
  const __m128 pinf = _mm_set1_ps(INFINITY);
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 4; ++j) {
      const __m128 x = _mm_loadu_ps(v + i + 4 * j);
      nan = _mm_or_ps(nan, _mm_cmpunord_ps(x, x));
      inf = _mm_or_ps(inf, _mm_cmpeq_ps(x, pinf));
      mx[j] = _mm_max_ps(mx[j], x);  // (a NaN lane is reported, its max not used)
    }
  RowScan r;
  alignas(16) float lanes[16];
  for (int j = 0; j < 4; ++j) _mm_store_ps(lanes + 4 * j, mx[j]);
  for (float x : lanes) r.max = std::max(r.max, x);
  r.nan = _mm_movemask_ps(nan) != 0;
  r.inf = _mm_movemask_ps(inf) != 0;
  for (; i < n; ++i) {
    r.nan = r.nan || std::isnan(v[i]);
    r.inf = r.inf || v[i] == INFINITY;
    if (!std::isnan(v[i])) r.max = std::max(r.max, v[i]);
  }
  return r;
}

// The first index holding m (present in the row), 16 values at a time.
size_t first_equal(std::span<const float> row, float m) {
  const float* v = row.data();
  const size_t n = row.size();
  const __m128 mv = _mm_set1_ps(m);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    int hit = 0;
    for (int j = 0; j < 4; ++j)
      hit |= _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(v + i + 4 * j), mv)) << (4 * j);
    if (hit) return i + size_t(__builtin_ctz(unsigned(hit)));
  }
  for (; i < n; ++i)
    if (v[i] == m) return i;
  return 0;  // (not reached when m is in the row)
}

void check_row(std::span<const float> logits, const RowScan& scan) {
  if (logits.empty()) throw std::runtime_error("sampler: empty logits row");
  if (!scan.nan && !scan.inf) return;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v) || v == INFINITY)
      throw std::runtime_error("sampler: logit of token " + std::to_string(i) + " is " +
                               (std::isnan(v) ? "NaN" : "+inf"));
  }
}
void check_row(std::span<const float> logits) { check_row(logits, scan_row(logits)); }

// the first maximum of a row without NaN
int32_t first_max(std::span<const float> logits, const RowScan& scan) {
  return int32_t(first_equal(logits, scan.max));
}

}  // namespace

void SamplingParams::validate() const {
  if (!std::isfinite(temperature))
    throw std::invalid_argument("temperature must be a finite number");
  if (!(top_p > 0.0 && top_p <= 1.0)) throw std::invalid_argument("top_p must be in (0, 1]");
  if (!(min_p >= 0.0 && min_p <= 1.0)) throw std::invalid_argument("min_p must be in [0, 1]");
  if (top_k < 0) throw std::invalid_argument("top_k must be >= 0");
  if (!(frequency_penalty >= -2.0 && frequency_penalty <= 2.0))
    throw std::invalid_argument("frequency_penalty must be in [-2, 2]");
  if (!(presence_penalty >= -2.0 && presence_penalty <= 2.0))
    throw std::invalid_argument("presence_penalty must be in [-2, 2]");
}

void apply_penalties(std::span<float> logits, const std::unordered_map<int32_t, int>& counts,
                     const SamplingParams& p) {
  if (!p.has_penalties()) return;
  for (const auto& [id, c] : counts) {
    if (c <= 0 || id < 0 || size_t(id) >= logits.size()) continue;
    logits[size_t(id)] =
        float(double(logits[size_t(id)]) - p.frequency_penalty * double(c) - p.presence_penalty);
  }
}

double sample_uniform(uint64_t seed, uint64_t position) {
  // Two rounds so that neighbouring (seed, position) pairs are unrelated.
  const uint64_t h =
      mix64(mix64(seed + 0x9e3779b97f4a7c15ULL) ^ (position * 0xd1b54a32d192ed03ULL));
  return double(h >> 11) * 0x1.0p-53;
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t id, int top_n) {
  if (logits.empty()) throw std::runtime_error("sampler: empty logits row");
  double mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, double(v));
  double s = 0;
  for (float v : logits) s += std::exp(double(v) - mx);
  const double lse = mx + std::log(s);
  TokenLogprobs t;
  t.id = id;
  t.logprob = double(logits[size_t(id)]) - lse;
  const size_t k = std::min(logits.size(), size_t(std::max(0, top_n)));
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  std::partial_sort(order.begin(), order.begin() + long(k), order.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < k; ++i)
    t.top.emplace_back(order[i], double(logits[size_t(order[i])]) - lse);
  return t;
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw std::runtime_error("sampler: empty logits row");
  const RowScan scan = scan_row(logits);
  if (!scan.nan) return first_max(logits, scan);
  size_t best = 0;  // (NaN: a NaN best gives way to the next value)
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best] || std::isnan(logits[best])) best = i;
  return int32_t(best);
}

std::vector<Candidate> sampling_candidates(std::span<const float> logits, const SamplingParams& p) {
  check_row(logits);
  if (p.greedy()) return {Candidate{argmax(logits), 1.0}};
  const int32_t n = int32_t(logits.size());

  // 1-2. Temperature does not change the order, so top-k selects on the raw logits.
  std::vector<int32_t> ids;
  bool sorted = false;
  const float* z = logits.data();
  if (p.top_k > 0 && p.top_k < n) {
    ids.resize(size_t(n));
    for (int32_t i = 0; i < n; ++i) ids[size_t(i)] = i;
    std::partial_sort(ids.begin(), ids.begin() + p.top_k, ids.end(), ByValueDesc{z});
    ids.resize(size_t(p.top_k));
    sorted = true;
  } else {
    ids.reserve(size_t(n));
    for (int32_t i = 0; i < n; ++i)
      if (z[i] != -INFINITY) ids.push_back(i);
  }
  // Drop -inf (probability 0) entries top-k may have kept.
  std::erase_if(ids, [&](int32_t i) { return z[i] == -INFINITY; });
  if (ids.empty()) throw std::runtime_error("sampler: every logit is -inf");

  // 3. Softmax of z / T over the kept tokens, in double.
  float zmax = -INFINITY;
  for (int32_t i : ids) zmax = std::max(zmax, z[i]);
  std::vector<Candidate> c(ids.size());
  double total = 0.0;
  for (size_t k = 0; k < ids.size(); ++k) {
    const double e = std::exp((double(z[ids[k]]) - double(zmax)) / p.temperature);
    c[k] = Candidate{ids[k], e};
    total += e;
  }
  for (auto& x : c) x.p /= total;

  // 4. Top-p over the sorted distribution (the order of the logits is the order of p).
  if (p.top_p < 1.0) {
    auto desc = [&](const Candidate& a, const Candidate& b) { return ByValueDesc{z}(a.id, b.id); };
    // The kept set is a prefix of the sorted order: sort only a growing head (partial_sort
    // leaves the head exactly as a full sort would), so a peaked distribution over a 129K
    // vocabulary costs a partial sort of a few hundred entries.
    size_t head = sorted ? c.size() : std::min<size_t>(c.size(), 256);
    if (!sorted) std::partial_sort(c.begin(), c.begin() + ptrdiff_t(head), c.end(), desc);
    for (;;) {
      double cum = 0.0;
      size_t keep = 0;
      while (keep < head) {
        cum += c[keep].p;
        ++keep;
        if (cum >= p.top_p) break;
      }
      if (cum >= p.top_p || head == c.size()) {
        c.resize(keep);
        break;
      }
      const size_t next = std::min(c.size(), head * 4);
      std::partial_sort(c.begin() + ptrdiff_t(head), c.begin() + ptrdiff_t(next), c.end(), desc);
      head = next;
    }
    sorted = true;
  }

  // 5. Min-p relative to the most likely token (renormalisation does not change the ratio).
  if (p.min_p > 0.0) {
    double pmax = 0.0;
    for (const auto& x : c) pmax = std::max(pmax, x.p);
    const double floor_p = p.min_p * pmax;
    std::erase_if(c, [&](const Candidate& x) { return x.p < floor_p; });
  }

  double kept = 0.0;
  for (const auto& x : c) kept += x.p;
  for (auto& x : c) x.p /= kept;
  return c;
}

int32_t pick_candidate(const std::vector<Candidate>& cands, double u) {
  if (cands.empty()) throw std::runtime_error("sampler: no candidates");
  double total = 0.0;
  for (const auto& x : cands) total += x.p;
  const double target = u * total;
  double cum = 0.0;
  for (const auto& x : cands) {
    cum += x.p;
    if (cum > target) return x.id;
  }
  // Rounding left u * total at or above the final sum: the last token with mass.
  for (size_t k = cands.size(); k-- > 0;)
    if (cands[k].p > 0.0) return cands[k].id;
  return cands.back().id;
}

int32_t Sampler::sample(std::span<const float> logits, int64_t position) const {
  if (p_.greedy()) {
    const RowScan scan = scan_row(logits);
    check_row(logits, scan);
    return first_max(logits, scan);
  }
  return pick_candidate(sampling_candidates(logits, p_),
                        sample_uniform(p_.seed, uint64_t(position)));
}

}  // namespace cedar::runtime
