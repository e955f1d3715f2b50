// Reference GEMMs, sparse_attn, hc_split_sinkhorn, top-k, RMSNorm and RoPE against direct
// formulas and hand-computed cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "forward/rope.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"
#include "packed_keys.h"

namespace cedar {
namespace {

using namespace kernels::ref;

std::vector<float> bf16_normal(int n, unsigned seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = round_bf16(nd(rng));
  return v;
}

TEST(Fp8Gemm, MatchesTheBlockScaledFormula) {
  const int M = 3, K = 96, N = 40;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> code(0, 0x7e), sc(120, 130);
  std::vector<uint8_t> w(size_t(N) * K), ws(size_t((N + 31) / 32) * (K / 32));
  for (auto& c : w) c = uint8_t(code(rng) | ((rng() & 1) << 7));
  for (auto& c : ws) c = uint8_t(sc(rng));
  const auto x = bf16_normal(M * K, 5, 3.0f);
  std::vector<float> xq(size_t(M) * K), xs(size_t(M) * (K / 32));
  for (int m = 0; m < M; ++m) {
    std::vector<uint8_t> q(static_cast<size_t>(K)), s(static_cast<size_t>(K / 32));
    act_quant(x.data() + m * K, K, q.data(), s.data());
    for (int i = 0; i < K; ++i) xq[size_t(m * K + i)] = e4m3_to_f32(q[size_t(i)]);
    for (int b = 0; b < K / 32; ++b) xs[size_t(m * (K / 32) + b)] = ue8m0_to_f32(s[size_t(b)]);
  }
  // the prepared rows are [E4M3 values | scales]
  std::vector<float> act(size_t(M) * size_t(act_floats_quant(K)));
  prepare_quant(x.data(), M, K, act.data());
  for (int m = 0; m < M; ++m)
    for (int i = 0; i < K + K / 32; ++i)
      ASSERT_EQ(act[size_t(m * (K + K / 32) + i)],
                i < K ? xq[size_t(m * K + i)] : xs[size_t(m * (K / 32) + i - K)]);
  std::vector<float> out(size_t(M) * N);
  fp8_gemm(act.data(), M, K, w.data(), ws.data(), 0, N, out.data(), N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int k = 0; k < K / 32; ++k) {
        double p = 0;  // exact block sum
        for (int i = 0; i < 32; ++i)
          p += double(xq[size_t(m * K + k * 32 + i)]) *
               double(e4m3_to_f32(w[size_t(n * K + k * 32 + i)]));
        const float sw = ue8m0_to_f32(ws[size_t((n / 32) * (K / 32) + k)]);
        acc = acc + (float(p) * xs[size_t(m * (K / 32) + k)]) * sw;
      }
      EXPECT_EQ(out[size_t(m * N + n)], round_bf16(acc)) << m << "," << n;
    }
  // a column sub-range writes only its own outputs, with the same values
  std::vector<float> part(size_t(M) * 8);
  fp8_gemm(act.data(), M, K, w.data(), ws.data(), 17, 25, part.data(), 8);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < 8; ++n) EXPECT_EQ(part[size_t(m * 8 + n)], out[size_t(m * N + 17 + n)]);
}

TEST(Fp4Gemm, MatchesTheBlockScaledFormula) {
  const int M = 2, K = 64, N = 5;
  std::mt19937 rng(13);
  std::vector<uint8_t> w(size_t(N) * K / 2), ws(size_t(N) * (K / 32));
  for (auto& c : w) c = uint8_t(rng() & 0xff);
  for (auto& c : ws) c = uint8_t(118 + rng() % 10);
  std::vector<float> xq(size_t(M) * K), xs(size_t(M) * 2);
  for (auto& v : xq) v = e4m3_to_f32(uint8_t(rng() % 0x7e));
  for (auto& v : xs) v = std::ldexp(1.0f, -int(rng() % 8));
  std::vector<float> act;  // prepared rows: [E4M3 values | scales]
  for (int m = 0; m < M; ++m) {
    act.insert(act.end(), xq.begin() + m * K, xq.begin() + (m + 1) * K);
    act.insert(act.end(), xs.begin() + m * 2, xs.begin() + (m + 1) * 2);
  }
  std::vector<float> out(size_t(M) * N);
  fp4_gemm(act.data(), M, K, w.data(), ws.data(), 0, N, out.data(), N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int k = 0; k < 2; ++k) {
        double p = 0;
        for (int i = 0; i < 32; ++i) {
          const int e = k * 32 + i;
          const uint8_t byte = w[size_t(n * K / 2 + e / 2)];
          const float wv = e2m1_to_f32((e & 1) ? fp4_hi(byte) : fp4_lo(byte));
          p += double(xq[size_t(m * K + e)]) * double(wv);
        }
        acc = acc + (float(p) * xs[size_t(m * 2 + k)]) * ue8m0_to_f32(ws[size_t(n * 2 + k)]);
      }
      EXPECT_EQ(out[size_t(m * N + n)], round_bf16(acc));
    }
}

TEST(Bf16Gemm, ExactSumOfExactProducts) {
  const int K = 300;
  const auto x = bf16_normal(K, 1);
  const auto wv = bf16_normal(2 * K, 2);
  std::vector<uint16_t> w(wv.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16_bits(wv[i]);
  float out[2];
  gemm_bf16w(x.data(), 1, K, reinterpret_cast<const uint8_t*>(w.data()), nullptr, 0, 2, out, 2);
  for (int n = 0; n < 2; ++n) {
    long double s = 0;
    for (int i = 0; i < K; ++i) s += (long double)x[size_t(i)] * wv[size_t(n * K + i)];
    EXPECT_EQ(out[n], float(s));
  }
  // fp32 weights (mHC hc_fn): the exact products are summed (canonical rule 1), not products
  // rounded to fp32 first
  std::vector<float> w32(static_cast<size_t>(K));
  for (int i = 0; i < K; ++i) w32[size_t(i)] = 1.0f / float(i + 3);
  float o32;
  gemm_f32w(x.data(), 1, K, reinterpret_cast<const uint8_t*>(w32.data()), nullptr, 0, 1, &o32, 1);
  long double s = 0;
  for (int i = 0; i < K; ++i) s += (long double)x[size_t(i)] * w32[size_t(i)];
  EXPECT_EQ(o32, float(s));
  // the case where rounding each product first changes the sum
  const float a2[2] = {1.0f + 0x1p-23f, 1.0f + 0x1p-23f}, b2[2] = {1.0f + 0x1p-23f, -1.0f};
  float o2;
  gemm_f32w(a2, 1, 2, reinterpret_cast<const uint8_t*>(b2), nullptr, 0, 1, &o2, 1);
  EXPECT_EQ(o2, 0x1p-23f + 0x1p-46f);
}

// canonical-arithmetic rule 4: at these arguments the double 1/(1+exp(-x)) is exactly an fp32
// rounding midpoint and rounds up; the correctly rounded sigmoid is the lower neighbour.
TEST(Transcendentals, SigmoidMidpointsAreResolved) {
  for (uint32_t b : {0x372e0000u, 0x37360000u, 0x374e0000u}) {
    const float x = std::bit_cast<float>(b);
    const double d = 1.0 / (1.0 + std::exp(-double(x)));
    const float up = float(d), down = std::nextafter(up, 0.0f);
    ASSERT_EQ((double(up) + double(down)) * 0.5, d) << "not a midpoint: " << std::hex << b;
    EXPECT_EQ(fmath::sigmoid(x), down) << std::hex << b;
  }
  // ordinary arguments are unchanged: the double result rounded once
  for (float x : {-3.0f, -0.5f, 0.0f, 0.25f, 7.0f})
    EXPECT_EQ(fmath::sigmoid(x), float(1.0 / (1.0 + std::exp(-double(x)))));
}

// One head of sparse_attn over packed keys.
std::vector<float> attn1(const float* q, const test::PackedKeys& pk, float sink, float scale) {
  std::vector<float> o(size_t(pk.hd)), scratch(sparse_attn_scratch(1, pk.hd));
  sparse_attn(q, 1, pk.hd, pk.keys(), &sink, scale, o.data(), scratch.data());
  return o;
}

// sparse_attn against a naive full softmax in double: close, not equal (bf16 probabilities).
TEST(SparseAttn, CloseToNaiveSoftmax) {
  const int hd = 64, nk = 150;  // three blocks of 64: 128 window rows, 22 compressed rows
  const auto q = bf16_normal(hd, 21, 0.5f);
  const test::PackedKeys pk = test::pack_keys(bf16_normal(hd * nk, 22, 0.5f), hd, 128, 22);
  const std::vector<float>& kv = pk.values;
  const float sink = 0.3f, scale = float(std::pow(64.0, -0.5));
  const std::vector<float> o = attn1(q.data(), pk, sink, scale);
  std::vector<double> s(static_cast<size_t>(nk));
  double mx = sink;
  for (int j = 0; j < nk; ++j) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[size_t(i)]) * kv[size_t(j * hd + i)];
    s[size_t(j)] = d * scale;
    mx = std::max(mx, s[size_t(j)]);
  }
  double den = std::exp(sink - mx);
  for (int j = 0; j < nk; ++j) den += std::exp(s[size_t(j)] - mx);
  for (int i = 0; i < hd; ++i) {
    double num = 0;
    for (int j = 0; j < nk; ++j) num += std::exp(s[size_t(j)] - mx) * kv[size_t(j * hd + i)];
    EXPECT_NEAR(o[size_t(i)], num / den, 2e-2 * std::fabs(num / den) + 2e-3) << i;
  }
}

// Exact block semantics: probabilities rounded to bf16 relative to the running max of their
// block, the sink added at the end. Spelled out step by step on two-block cases (the second block
// holds the largest score, so the first gets rescaled); among them, cases whose answer changes if
// the probabilities were not rounded. Heads are independent: every head of a multi-head call
// equals its single-head result.
TEST(SparseAttn, ExactOnlineSoftmaxBlocks) {
  const int hd = 32, nk = 70;
  std::vector<float> rows(size_t(hd) * nk);
  for (int j = 0; j < nk; ++j)
    for (int d = 0; d < hd; ++d)
      rows[size_t(hd * j + d)] = round_bf16(float((j * 7 + d * 3) % 11) / 8.0f - 0.6f);
  rows[size_t(hd * 66)] = 3.0f;
  const test::PackedKeys pk = test::pack_keys(rows, hd, 50, 20);
  const float* kv = pk.values.data();
  const float sink = -1.0f, scale = 0.25f;

  auto run = [&](const float* q, bool round_p) {
    std::vector<float> acc(size_t(hd), 0.0f);
    float den = 0, mx = -1e30f;
    for (int b0 = 0; b0 < nk; b0 += 64) {
      const int nb = std::min(64, nk - b0);
      std::vector<float> s(static_cast<size_t>(nb));
      float bm = -INFINITY;
      for (int j = 0; j < nb; ++j) {
        double d = 0;
        for (int i = 0; i < hd; ++i) d += double(q[i] * kv[size_t(b0 + j) * hd + i]);
        s[size_t(j)] = float(d) * scale;
        bm = std::max(bm, s[size_t(j)]);
      }
      const float mn = std::max(mx, bm);
      const float alpha = float(std::exp(double(mx - mn)));
      double ps = 0;
      std::vector<double> a(size_t(hd), 0.0);
      for (int j = 0; j < nb; ++j) {
        const float p = float(std::exp(double(s[size_t(j)] - mn)));
        ps += p;
        const float pb = round_p ? round_bf16(p) : p;
        for (int i = 0; i < hd; ++i) a[size_t(i)] += double(pb * kv[size_t(b0 + j) * hd + i]);
      }
      den = den * alpha + float(ps);
      for (int i = 0; i < hd; ++i) acc[size_t(i)] = acc[size_t(i)] * alpha + float(a[size_t(i)]);
      mx = mn;
    }
    den = den + float(std::exp(double(sink - mx)));
    std::vector<float> o(static_cast<size_t>(hd));
    for (int i = 0; i < hd; ++i) o[size_t(i)] = round_bf16(acc[size_t(i)] / den);
    return o;
  };
  int sensitive = 0;
  std::vector<float> qs;  // every case as one head of a multi-head call
  std::vector<std::vector<float>> exacts;
  for (int t = 0; t < 64; ++t) {
    std::vector<float> q(static_cast<size_t>(hd));
    for (int i = 0; i < hd; ++i)
      q[size_t(i)] =
          round_bf16(float((i * 5 + t) % 9) / 16.0f + (i == 0 ? float(t) / 32.0f : 0.0f));
    const auto exact = run(q.data(), true);
    EXPECT_EQ(attn1(q.data(), pk, sink, scale), exact) << t;
    if (run(q.data(), false) != exact) ++sensitive;
    qs.insert(qs.end(), q.begin(), q.end());
    exacts.push_back(exact);
  }
  EXPECT_GT(sensitive, 0) << "no case where the bf16 rounding of p matters";
  const int H = 64;
  std::vector<float> sinks(size_t(H), sink), o(size_t(H) * hd), scratch(sparse_attn_scratch(H, hd));
  sparse_attn(qs.data(), H, hd, pk.keys(), sinks.data(), scale, o.data(), scratch.data());
  for (int h = 0; h < H; ++h)
    EXPECT_EQ(std::vector<float>(o.begin() + h * hd, o.begin() + (h + 1) * hd), exacts[size_t(h)])
        << h;
}

TEST(SparseAttn, EmptyListGivesZeros) {
  const float q[32] = {1, 2};
  float o[32], sink = 0.5f;
  std::fill_n(o, 32, 5.0f);
  std::vector<float> scratch(sparse_attn_scratch(1, 32));
  sparse_attn(q, 1, 32, AttnKeys{}, &sink, 1.0f, o, scratch.data());
  for (float v : o) EXPECT_EQ(v, 0.0f);
}

TEST(HcSplitSinkhorn, ColumnsSumToOneRowsNearlyAndPrePostInRange) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0, 2);
  float m[24], scale[3] = {0.7f, 1.3f, 0.9f}, base[24];
  for (int i = 0; i < 24; ++i) {
    m[i] = nd(rng);
    base[i] = nd(rng) * 0.1f;
  }
  float pre[4], post[4], C[16];
  hc_split_sinkhorn(m, scale, base, 4, 20, 1e-6f, pre, post, C);
  for (int j = 0; j < 4; ++j) {
    double cs = 0, rs = 0;
    for (int i = 0; i < 4; ++i) {
      cs += C[i * 4 + j];
      rs += C[j * 4 + i];
      EXPECT_GT(C[i * 4 + j], 0.0f);
    }
    EXPECT_NEAR(cs, 1.0, 1e-5);
    EXPECT_NEAR(rs, 1.0, 1e-3);
    EXPECT_GT(pre[j], 0.0f);
    EXPECT_LT(pre[j], 1.0f + 1e-5f);
    EXPECT_GT(post[j], 0.0f);
    EXPECT_LT(post[j], 2.0f);
  }
  // pre = sigmoid(m*scale0 + base) + eps, in fp32 steps
  EXPECT_EQ(pre[1], fmath::sigmoid(m[1] * scale[0] + base[1]) + 1e-6f);
  EXPECT_EQ(post[2], 2.0f * fmath::sigmoid(m[6] * scale[1] + base[6]));
}

TEST(TopK, CudaTieRuleAndRadixOrder) {
  std::vector<int> out(3);
  const float v[6] = {1.0f, 2.0f, 2.0f, 2.0f, 0.5f, 2.0f};
  topk(v, 6, 3, out.data());  // four 2.0s: the three lowest indices win
  EXPECT_EQ(out, (std::vector<int>{1, 2, 3}));
  const float z[4] = {-0.0f, 0.0f, -0.0f, -1.0f};
  out.resize(1);
  topk(z, 4, 1, out.data());  // +0.0 ranks above -0.0
  EXPECT_EQ(out[0], 1);
  const float inf[5] = {-INFINITY, 3.0f, INFINITY, -INFINITY, -INFINITY};
  out.resize(4);
  topk(inf, 5, 4, out.data());  // +inf, 3, then the two lowest-index -inf
  EXPECT_EQ(out, (std::vector<int>{0, 1, 2, 3}));
  out.resize(2);
  topk(inf, 5, 2, out.data());
  EXPECT_EQ(out, (std::vector<int>{1, 2}));
  // k larger than n is clamped
  std::vector<int> all(5, -1);
  topk(inf, 5, 9, all.data());
  EXPECT_EQ(all, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(RmsNorm, FollowsTheRoundingSteps) {
  const auto x = bf16_normal(64, 9, 4.0f);
  std::vector<uint16_t> w(64);
  for (int i = 0; i < 64; ++i) w[size_t(i)] = f32_to_bf16_bits(0.5f + float(i) / 64.0f);
  std::vector<float> out(64);
  rms_norm(x.data(), 64, w.data(), 1e-20f, out.data());
  double ss = 0;
  for (float v : x) ss += double(v * v);
  const float var = float(ss / 64.0);
  const float r = float(1.0 / std::sqrt(double(var + 1e-20f)));
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(out[size_t(i)], round_bf16(bf16_to_f32(w[size_t(i)]) * (x[size_t(i)] * r)));
}

TEST(Rope, YarnBandAndRotation) {
  // theta 160000, rd 64, original 65536: pairs 0..15 keep their frequency, >= 25 divided by 16
  RopeTable plain(64, 160000.0, false, 16, 32, 1, 65536);
  RopeTable yarn(64, 160000.0, true, 16, 32, 1, 65536);
  for (int k = 0; k <= 15; ++k) EXPECT_EQ(yarn.freqs()[size_t(k)], plain.freqs()[size_t(k)]) << k;
  for (int k = 25; k < 32; ++k)
    EXPECT_EQ(yarn.freqs()[size_t(k)], plain.freqs()[size_t(k)] / 16.0f) << k;
  EXPECT_LT(yarn.freqs()[20], plain.freqs()[20]);
  EXPECT_GT(yarn.freqs()[20], plain.freqs()[20] / 16.0f);
  EXPECT_EQ(plain.freqs()[0], 1.0f);
  // rotation then inverse rotation returns (nearly) the input; position 0 is the identity
  std::vector<float> c(32), s(32);
  auto x = bf16_normal(64, 31);
  const auto x0 = x;
  yarn.angles(0, c.data(), s.data());
  rope(x.data(), 64, c.data(), s.data(), false);
  EXPECT_EQ(x, x0);
  yarn.angles(1234, c.data(), s.data());
  rope(x.data(), 64, c.data(), s.data(), false);
  EXPECT_NE(x, x0);
  EXPECT_EQ(x[0], round_bf16(x0[0] * c[0] - x0[1] * s[0]));
  rope(x.data(), 64, c.data(), s.data(), true);
  for (int i = 0; i < 64; ++i)
    EXPECT_NEAR(x[size_t(i)], x0[size_t(i)], 0.02f * std::fabs(x0[size_t(i)]) + 1e-2f);
}

}  // namespace
}  // namespace cedar
