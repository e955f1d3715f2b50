// VocabProduct (forward/vocab_product.h): a vocabulary-wide bf16 product computed once per
// distinct weight row. With repeated rows it keeps the distinct ones: its outputs are the whole
// product's (bit for bit in the reference table, within the bf16 tolerance in the fast ones,
// which run bf16_lanes), the same at every row count (the decode step's, a draft's 5, a verify
// pass's 6, a prefill's); without enough repeats it runs the whole weight.
#include "forward/vocab_product.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "forward/linear.h"
#include "kernels/kernel_table.h"
#include "numerics/bf16.h"
#include "numerics/q8b.h"

namespace cedar {
namespace {

// A [V, K] bf16 weight: `used` random rows at random ids, every other id one shared row.
std::vector<uint16_t> weight_with_shared_row(int V, int K, int used, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<uint16_t> shared(static_cast<size_t>(K)), w(size_t(V) * size_t(K));
  for (auto& x : shared) x = f32_to_bf16_bits(nd(rng));
  std::vector<char> is_used(static_cast<size_t>(V), 0);
  for (int i = 0; i < used; ++i) is_used[rng() % unsigned(V)] = 1;
  for (int v = 0; v < V; ++v)
    for (int k = 0; k < K; ++k)
      w[size_t(v) * size_t(K) + size_t(k)] =
          is_used[size_t(v)] ? f32_to_bf16_bits(nd(rng)) : shared[size_t(k)];
  return w;
}

Linear bf16_linear(const std::vector<uint16_t>& w, int V, int K) {
  Linear l;
  l.kind = Linear::Kind::BF16;
  l.out = V;
  l.in = K;
  l.w = reinterpret_cast<const uint8_t*>(w.data());
  l.name = "head";
  return l;
}

std::vector<float> bf16_rows(int m, int K, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(m) * size_t(K));
  for (auto& v : x) v = round_bf16(nd(rng));
  return x;
}

// The sum |x w| of each output of row i: the scale of any summation order's rounding error.
std::vector<double> magnitudes(const std::vector<uint16_t>& w, int V, int K,
                               const std::vector<float>& x, int m) {
  std::vector<double> mag(size_t(m) * V, 0.0);
  for (int i = 0; i < m; ++i)
    for (int v = 0; v < V; ++v)
      for (int k = 0; k < K; ++k)
        mag[size_t(i) * V + v] +=
            std::fabs(double(x[size_t(i) * K + k]) * bf16_to_f32(w[size_t(v) * K + size_t(k)]));
  return mag;
}

TEST(VocabProduct, RepeatedRowsGiveTheWholeProduct) {
  const int V = 5000, K = 128;
  const std::vector<uint16_t> w = weight_with_shared_row(V, K, 900, 3);
  const Linear whole = bf16_linear(w, V, K);
  const VocabProduct p(whole);
  EXPECT_EQ(p.rows(), V);
  EXPECT_GT(p.distinct_rows(), 700);  // the used rows (some ids drawn twice) + the shared one
  EXPECT_LT(p.distinct_rows(), 902);
  ASSERT_TRUE(p.classes());
  ThreadPool pool(2);
  const Ctx rctx{choose_kernels("ref"), pool};
  for (const KernelTable* k : supported_kernel_tables()) {
    const Ctx ctx{*k, pool};
    const std::vector<float> x = bf16_rows(17, K, 17);
    std::vector<float> all(size_t(17) * V), ref(all.size());
    p.forward(ctx, x.data(), 17, all.data());
    linear(rctx, whole, x.data(), 17, ref.data(), LinearOut::kF32);
    if (k->name == "ref") {  // the distinct rows through linear(): the whole product's bits
      EXPECT_EQ(0, std::memcmp(all.data(), ref.data(), all.size() * sizeof(float)));
    } else {  // bf16_lanes: within the bf16 products' tolerance
      const std::vector<double> mag = magnitudes(w, V, K, x, 17);
      for (size_t i = 0; i < all.size(); ++i)
        ASSERT_LE(std::fabs(double(all[i]) - double(ref[i])), mag[i] * 0x1p-14) << k->name << i;
    }
    // a decode step's 1 row, a draft's 5, a verify pass's 6: each row's bits as in the 17
    for (int m : {1, 5, 6}) {
      std::vector<float> b(size_t(m) * V);
      p.forward(ctx, x.data(), m, b.data());
      EXPECT_EQ(0, std::memcmp(all.data(), b.data(), b.size() * sizeof(float)))
          << k->name << " m=" << m;
    }
    // the distinct rows alone: class c is the output of every id of class c
    std::vector<float> d(size_t(17) * size_t(p.distinct_ld()));
    p.forward_distinct(ctx, x.data(), 17, d.data());
    for (int i = 0; i < 17; ++i)
      for (int v = 0; v < V; ++v)
        ASSERT_EQ(d[size_t(i) * size_t(p.distinct_ld()) + size_t(p.class_of(v))],
                  all[size_t(i) * V + size_t(v)])
            << k->name << " v=" << v;
  }
  // classes are numbered in order of their lowest ids: each id's class is an earlier one or the
  // next new one
  int next = 0;
  for (int v = 0; v < V; ++v) {
    ASSERT_LE(p.class_of(v), next) << v;
    if (p.class_of(v) == next) ++next;
  }
  EXPECT_EQ(next, p.distinct_rows());
  // the classes are the ids' pattern of repeats, whatever the values
  std::vector<uint16_t> w2 = w;
  for (auto& b : w2) b ^= 0x0001;  // other values, the same rows repeated
  const Linear other = bf16_linear(w2, V, K);
  const VocabProduct q(other);
  for (int v = 0; v < V; ++v) ASSERT_EQ(p.class_of(v), q.class_of(v)) << v;
  std::vector<uint16_t> w3 = weight_with_shared_row(V, K, 900, 4);  // other ids used
  const Linear third = bf16_linear(w3, V, K);
  const VocabProduct t(third);
  int differ = 0;
  for (int v = 0; v < V; ++v) differ += p.class_of(v) != t.class_of(v);
  EXPECT_GT(differ, 0);
}

TEST(VocabProduct, DistinctRowsRunWhole) {
  ThreadPool pool(2);
  const Ctx ctx{*supported_kernel_tables().back(), pool};
  // no repeat at all (a model trained on the whole vocabulary), and repeats only after the
  // first eighth (the scan stops there), and too few repeats: all run the weight itself
  const int V = 4096, K = 64;
  std::vector<uint16_t> w = weight_with_shared_row(V, K, 100000, 5);
  for (int v = 0; v < V; ++v) w[size_t(v) * K] = uint16_t(v);  // every row distinct
  std::vector<uint16_t> late = w;
  for (int v = V / 2; v < V; ++v) std::memcpy(&late[size_t(v) * K], &late[0], K * 2);
  std::vector<uint16_t> few = w;
  for (int v = 0; v < V / 8; ++v) std::memcpy(&few[size_t(v) * K], &few[0], K * 2);
  for (const auto* wt : {&w, &late, &few}) {
    const Linear whole = bf16_linear(*wt, V, K);
    const VocabProduct p(whole);
    EXPECT_EQ(p.distinct_rows(), V);
    EXPECT_FALSE(p.classes());
    const std::vector<float> x = bf16_rows(3, K, 9);
    std::vector<float> a(size_t(3) * V), b(a.size());
    linear(ctx, whole, x.data(), 3, a.data(), LinearOut::kF32);
    p.forward(ctx, x.data(), 3, b.data());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
}

// --head-type q8: the rows that run (the distinct ones, or the whole weight) requantized to Q8B.
// Every table computes the product of the Q8B values (the reference's exactly: linear() over a
// bf16 weight holding those values, which are bf16-exact here), batch-invariant, and within one
// Q8B step of the bf16 product per element.
TEST(VocabProduct, Q8HeadIsTheProductOfTheRequantizedRows) {
  ThreadPool pool(2);
  const Ctx rctx{choose_kernels("ref"), pool};
  const int K = 96;  // three blocks: a half-empty last unit in the dot-product table
  for (const int used : {300, 100000}) {  // repeated rows (classes), and every row distinct
    const int V = 2000;
    std::vector<uint16_t> w = weight_with_shared_row(V, K, used, 21);
    if (used > V)
      for (int v = 0; v < V; ++v) w[size_t(v) * K] = f32_to_bf16_bits(float(v) * 1e-4f);
    const Linear whole = bf16_linear(w, V, K);
    const VocabProduct p(whole, HeadType::kQ8);
    ASSERT_TRUE(p.requantized());
    EXPECT_EQ(p.classes(), used < V);
    // the requantized weight as bf16 values (q x s has at most 15 significant bits: compare
    // against its exact fp32 sum instead where it is not bf16)
    std::vector<float> wq(size_t(V) * K);
    for (int v = 0; v < V; ++v) {
      std::vector<uint8_t> codes(K);
      std::vector<uint16_t> sc(K / 32);
      q8b_quantize_row(w.data() + size_t(v) * K, K, codes.data(), sc.data());
      for (int k = 0; k < K; ++k) {
        wq[size_t(v) * K + k] = q8b_value(codes[size_t(k)], sc[size_t(k / 32)]);
        const float orig = bf16_to_f32(w[size_t(v) * K + k]);
        // within half a step of the bf16 value (the scale: the block max / 127, rounded up)
        ASSERT_LE(std::fabs(wq[size_t(v) * K + k] - orig), 0.5f * bf16_to_f32(sc[size_t(k / 32)]));
      }
    }
    const int m = 7;
    const std::vector<float> x = bf16_rows(m, K, 23);
    std::vector<double> exact(size_t(m) * V, 0.0), mag(exact.size(), 0.0);
    for (int i = 0; i < m; ++i)
      for (int v = 0; v < V; ++v)
        for (int k = 0; k < K; ++k) {
          const double t = double(x[size_t(i) * K + k]) * double(wq[size_t(v) * K + k]);
          exact[size_t(i) * V + v] += t;
          mag[size_t(i) * V + v] += std::fabs(t);
        }
    std::vector<float> ref_out(exact.size());
    p.forward(rctx, x.data(), m, ref_out.data());
    for (size_t i = 0; i < exact.size(); ++i)  // the reference: the exact sum, rounded once
      ASSERT_EQ(ref_out[i], float(exact[i])) << i;
    for (const KernelTable* k : supported_kernel_tables()) {
      const Ctx ctx{*k, pool};
      std::vector<float> all(exact.size());
      p.forward(ctx, x.data(), m, all.data());
      for (size_t i = 0; i < all.size(); ++i)
        ASSERT_LE(std::fabs(double(all[i]) - exact[i]), mag[i] * 0x1p-14) << k->name << " " << i;
      for (int rows : {1, 5}) {  // each row's bits whatever shares the call
        std::vector<float> b(size_t(rows) * V);
        p.forward(ctx, x.data(), rows, b.data());
        EXPECT_EQ(0, std::memcmp(all.data(), b.data(), b.size() * sizeof(float)))
            << k->name << " rows=" << rows;
      }
    }
  }
  // only a bf16 head is requantized, and only with whole 32-value blocks
  const std::vector<uint16_t> w = weight_with_shared_row(64, 48, 10, 2);
  EXPECT_FALSE(VocabProduct(bf16_linear(w, 64, 48), HeadType::kQ8).requantized());
  EXPECT_EQ(parse_head_type("q8"), HeadType::kQ8);
  EXPECT_EQ(parse_head_type("stored"), HeadType::kStored);
  EXPECT_THROW(parse_head_type("q4"), std::runtime_error);
}

}  // namespace
}  // namespace cedar
