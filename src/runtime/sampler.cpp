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

namespace {

// Steps 1-2: the k largest logits (ties -> lower id), finite ones only, in ascending id order.
void top_k_ids(const float* z, int32_t n, int k, std::vector<int32_t>& ids) {
  ids.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) ids[size_t(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), ByValueDesc{z});
  ids.resize(size_t(k));
  std::erase_if(ids, [&](int32_t i) { return z[i] == -INFINITY; });
  std::sort(ids.begin(), ids.end());
}

// Step 4 on weights c[i].p = exp((z - zmax) / T) (ascending ids; total their sum): keeps the
// shortest prefix of the descending order (ties -> lower id) whose mass reaches top_p * total,
// in id order. That prefix is every token above some logit v plus the first t tokens at v (in id
// order, equal logits having equal weights), found by a quickselect on the logit weighted by
// mass: linear in the row on average, no sort (a 129K-id row with a flat distribution keeps tens
// of thousands of ids, and a vocabulary's unused ids tie).
void top_p_filter(const float* z, double top_p, double total, std::vector<Candidate>& c) {
  const double target = top_p * total;
  struct Zw {
    float z;
    double w;
  };
  static thread_local std::vector<Zw> work, next;
  work.clear();
  for (const auto& x : c) work.push_back({z[x.id], x.p});
  double cum = 0.0;  // the mass of the tokens known to be above the current range
  float v = 0.0f;
  size_t t = 0;
  for (int round = 0;; ++round) {
    if (round == 64) {  // (a pathological order: finish with a sort of what is left)
      std::sort(work.begin(), work.end(), [](const Zw& a, const Zw& b) { return a.z > b.z; });
      size_t k = 0;
      while (k < work.size() && (k == 0 || cum < target)) cum += work[k++].w;
      v = work[k - 1].z;
      for (size_t i = k; i-- > 0 && work[i].z == v;) ++t;
      break;
    }
    // the median of three of the range as the pivot (deterministic: the same row, the same cut)
    float a = work.front().z, b = work[work.size() / 2].z, d = work.back().z;
    if (a > b) std::swap(a, b);
    const float pivot = std::max(a, std::min(b, d));
    // (branch-free sums and copies: the comparisons are unpredictable on a flat row)
    double above = 0.0, at = 0.0, w_at = 0.0;
    size_t n_at = 0, n_below = 0;
    for (const auto& x : work) {
      above += x.w * double(x.z > pivot);
      at += x.w * double(x.z == pivot);
      n_at += x.z == pivot;
      n_below += x.z < pivot;
    }
    for (const auto& x : work)  // (the tied tokens' common weight)
      if (x.z == pivot) {
        w_at = x.w;
        break;
      }
    auto keep_where = [&](bool upper) {
      next.resize(work.size());
      size_t k = 0;
      for (const auto& x : work) {
        next[k] = x;
        k += upper ? x.z > pivot : x.z < pivot;
      }
      next.resize(k);
      std::swap(work, next);
    };
    if (cum + above >= target) {  // the cut is above the pivot
      keep_where(true);
    } else if (cum + above + at >= target || n_below == 0) {  // at the pivot
      cum += above;
      v = pivot;
      while (t < n_at && (t == 0 || cum < target)) {
        cum += w_at;
        ++t;
      }
      break;
    } else {  // below it
      cum += above + at;
      keep_where(false);
    }
  }
  size_t out = 0, taken_at = 0;
  for (const auto& x : c) {
    const float zx = z[x.id];
    if (zx > v || (zx == v && taken_at++ < t)) c[out++] = x;
  }
  c.resize(out);
}

// Steps 1-5 into c (reused: a 129K-id row is 2 MB of candidates).
void filter(std::span<const float> logits, const SamplingParams& p, std::vector<Candidate>& c) {
  const RowScan scan = scan_row(logits);
  check_row(logits, scan);
  c.clear();
  if (p.greedy()) {
    c.push_back(Candidate{first_max(logits, scan), 1.0});
    return;
  }
  if (scan.max == -INFINITY) throw std::runtime_error("sampler: every logit is -inf");
  const int32_t n = int32_t(logits.size());
  const float* z = logits.data();
  // 1-3. the kept ids (top-k, or every finite one) with weights exp((z - zmax) / T): the most
  // likely token's is exactly 1 (top-k keeps it)
  const double zmax = double(scan.max), T = p.temperature;
  auto weight = [&](int32_t i) { return std::exp((double(z[i]) - zmax) / T); };
  if (p.top_k > 0 && p.top_k < n) {
    static thread_local std::vector<int32_t> ids;
    top_k_ids(z, n, p.top_k, ids);
    for (int32_t i : ids) c.push_back(Candidate{i, weight(i)});
  } else {
    c.reserve(size_t(n));
    for (int32_t i = 0; i < n; ++i)
      if (z[i] != -INFINITY) c.push_back(Candidate{i, weight(i)});
  }
  double total = 0.0;
  for (const auto& x : c) total += x.p;
  // 4. top-p
  if (p.top_p < 1.0) top_p_filter(z, p.top_p, total, c);
  // 5. min-p: p_i >= min_p * max p, that is weight >= min_p (the largest weight is 1)
  if (p.min_p > 0.0) std::erase_if(c, [&](const Candidate& x) { return x.p < p.min_p; });
  double kept = 0.0;
  for (const auto& x : c) kept += x.p;
  for (auto& x : c) x.p /= kept;
}

}  // namespace

std::vector<Candidate> sampling_candidates(std::span<const float> logits, const SamplingParams& p) {
  std::vector<Candidate> c;
  filter(logits, p, c);
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
  static thread_local std::vector<Candidate> c;
  filter(logits, p_, c);
  return pick_candidate(c, sample_uniform(p_.seed, uint64_t(position)));
}

}  // namespace cedar::runtime
