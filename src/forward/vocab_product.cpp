#include "forward/vocab_product.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/scratch.h"
#include "numerics/q8b.h"

namespace cedar {

namespace {

uint64_t row_hash(const uint8_t* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The distinct rows of a weight: of[v] = the distinct row of row v, first[i] = the first row
// that holds distinct row i (in order of first occurrence).
struct Distinct {
  std::vector<int32_t> of, first;
};

// Empty when a copy of the distinct rows would not pay: no repeat in the first eighth of the rows
// (a model trained on the whole vocabulary: the scan stops there), or more than 3/4 of the rows
// distinct. Two different rows with one hash (never seen) also give up rather than chain.
Distinct find_distinct(const uint8_t* w, size_t row_bytes, int rows) {
  std::unordered_map<uint64_t, int32_t> seen;  // hash -> the first row with it
  Distinct d;
  d.of.resize(static_cast<size_t>(rows));
  bool repeats = false;
  for (int v = 0; v < rows; ++v) {
    if (v == rows / 8 && !repeats) return {};
    const uint8_t* row = w + size_t(v) * row_bytes;
    const auto [it, fresh] = seen.try_emplace(row_hash(row, row_bytes), v);
    if (fresh) {
      d.of[size_t(v)] = int32_t(d.first.size());
      d.first.push_back(v);
      continue;
    }
    if (std::memcmp(row, w + size_t(it->second) * row_bytes, row_bytes) != 0) return {};
    d.of[size_t(v)] = d.of[size_t(it->second)];
    repeats = true;
  }
  if (d.first.size() * 4 > size_t(rows) * 3) return {};
  return d;
}

}  // namespace

HeadType parse_head_type(std::string_view s) {
  if (s == "stored") return HeadType::kStored;
  if (s == "q8") return HeadType::kQ8;
  throw std::runtime_error("--head-type must be stored or q8, got '" + std::string(s) + "'");
}

VocabProduct::VocabProduct(const Linear& w, HeadType type, ThreadPool* pool)
    : rows_(w.out), distinct_(w) {
  if (w.kind != Linear::Kind::BF16) return;  // (only a bf16 head is requantized)
  const bool q8 = type == HeadType::kQ8 && w.in % kQ8bBlock == 0;
  const size_t rb = size_t(w.in) * 2;
  Distinct d = w.out < 8 ? Distinct{} : find_distinct(w.w, rb, w.out);
  if (d.first.empty()) {
    if (q8) requantize(pool);
    return;
  }
  of_ = std::move(d.of);
  const int u = int(d.first.size());
  words_.resize(size_t(u) * size_t(w.in));
  for (int i = 0; i < u; ++i)
    std::memcpy(words_.data() + size_t(i) * size_t(w.in), w.w + size_t(d.first[size_t(i)]) * rb,
                rb);
  distinct_.out = u;
  distinct_.w = reinterpret_cast<const uint8_t*>(words_.data());
  ld_ = u;
  if (q8) {  // (the Q8B product runs through linear(): no lanes layout)
    requantize(pool);
    words_.clear();
    words_.shrink_to_fit();
  } else if (w.in % 2 == 0) {
    packed_.resize(lanes_packed_words(u, w.in));
    pack_bf16_lanes(words_.data(), u, w.in, packed_.data());
    ld_ = (u + 15) / 16 * 16;
  }
  // the expansion's plan: the biggest class as runs (the default model's unused ids, 70% of the
  // vocabulary), the rest one id at a time
  std::vector<int32_t> count(static_cast<size_t>(u), 0);
  for (int32_t c : of_) ++count[size_t(c)];
  most_ = int32_t(std::max_element(count.begin(), count.end()) - count.begin());
  for (int v = 0; v < w.out; ++v)
    if (of_[size_t(v)] != most_) {
      other_ids_.push_back(v);
      other_of_.push_back(of_[size_t(v)]);
    }
}

// distinct_ (bf16) -> its Q8B copy, which distinct_ then points at
void VocabProduct::requantize(ThreadPool* pool) {
  const int N = distinct_.out, K = distinct_.in;
  q8_codes_.resize(size_t(N) * size_t(K));
  q8_scales_.resize(size_t(N) * size_t(K / kQ8bBlock));
  auto rows = [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      q8b_quantize_row(distinct_.bf16() + size_t(n) * size_t(K), K,
                       q8_codes_.data() + size_t(n) * size_t(K),
                       q8_scales_.data() + size_t(n) * size_t(K / kQ8bBlock));
  };
  if (pool)
    pool->parallel_for(N, rows, 64);
  else
    rows(0, N);
  distinct_.kind = Linear::Kind::Q8B;
  distinct_.w = q8_codes_.data();
  distinct_.scale = reinterpret_cast<const uint8_t*>(q8_scales_.data());
}

void VocabProduct::forward_distinct(const Ctx& ctx, const float* x, int m, float* d) const {
  const int K = distinct_.in;
  if (!packed_.empty() && ctx.k.bf16_lanes) {
    const int groups = ld_ / 16;  // (chunks of at least 64 groups: 1,024 outputs per row)
    ctx.pool.parallel_for(
        groups,
        [&](int64_t g0, int64_t g1) {
          ctx.k.bf16_lanes(packed_.data(), K, int(g0), int(g1), x, m, K, d, ld_);
        },
        64);
    return;
  }
  if (ld_ == distinct_.out) {
    linear(ctx, distinct_, x, m, d, LinearOut::kF32);
    return;
  }
  Scratch<float> dense(size_t(m) * size_t(distinct_.out));
  linear(ctx, distinct_, x, m, dense.data(), LinearOut::kF32);
  for (int i = 0; i < m; ++i)
    std::copy_n(dense.data() + size_t(i) * distinct_.out, distinct_.out, d + size_t(i) * ld_);
}

void VocabProduct::expand(const Ctx& ctx, const float* d, int m, float* out) const {
  const int64_t V = rows_;
  ctx.pool.parallel_for(
      V,
      [&](int64_t v0, int64_t v1) {
        const auto j0 = std::lower_bound(other_ids_.begin(), other_ids_.end(), int32_t(v0));
        const auto j1 = std::lower_bound(j0, other_ids_.end(), int32_t(v1));
        const size_t a = size_t(j0 - other_ids_.begin()), b = size_t(j1 - other_ids_.begin());
        for (int i = 0; i < m; ++i) {
          const float* di = d + size_t(i) * size_t(ld_);
          float* oi = out + size_t(i) * size_t(V);
          std::fill(oi + v0, oi + v1, di[most_]);
          for (size_t j = a; j < b; ++j) oi[other_ids_[j]] = di[other_of_[j]];
        }
      },
      16384);
}

void VocabProduct::forward(const Ctx& ctx, const float* x, int m, float* out) const {
  if (of_.empty()) {
    linear(ctx, distinct_, x, m, out, LinearOut::kF32);
    return;
  }
  Scratch<float> d(size_t(m) * size_t(ld_));
  forward_distinct(ctx, x, m, d.data());
  expand(ctx, d.data(), m, out);
}

}  // namespace cedar
