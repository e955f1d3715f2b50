#include "forward/vocab_product.h"

#include <cstring>
#include <unordered_map>
#include <utility>

#include "base/scratch.h"

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

VocabProduct::VocabProduct(const Linear& w) : rows_(w.out), distinct_(w) {
  if (w.kind != Linear::Kind::BF16 || w.out < 8) return;
  const size_t rb = size_t(w.in) * 2;
  Distinct d = find_distinct(w.w, rb, w.out);
  if (d.first.empty()) return;
  of_ = std::move(d.of);
  const int u = int(d.first.size());
  words_.resize(size_t(u) * size_t(w.in));
  for (int i = 0; i < u; ++i)
    std::memcpy(words_.data() + size_t(i) * size_t(w.in), w.w + size_t(d.first[size_t(i)]) * rb,
                rb);
  distinct_.out = u;
  distinct_.w = reinterpret_cast<const uint8_t*>(words_.data());
}

void VocabProduct::forward(const Ctx& ctx, const float* x, int m, float* out) const {
  if (of_.empty()) {
    linear(ctx, distinct_, x, m, out, LinearOut::kF32);
    return;
  }
  const size_t U = size_t(distinct_.out), V = size_t(rows_);
  Scratch<float> d(size_t(m) * U);
  linear(ctx, distinct_, x, m, d.data(), LinearOut::kF32);
  ctx.pool.parallel_for(
      int64_t(V),
      [&](int64_t v0, int64_t v1) {
        for (int i = 0; i < m; ++i) {
          const float* di = d.data() + size_t(i) * U;
          float* oi = out + size_t(i) * V;
          for (int64_t v = v0; v < v1; ++v) oi[v] = di[of_[size_t(v)]];
        }
      },
      4096);
}

}  // namespace cedar
