// Every kernel table this CPU runs against "ref" for the non-GEMM kernels (docs/NUMERICS.md
// "Fast kernels"): the FP4 quantizers and top-k bit-exact on random and adversarial inputs;
// rope, hc_pre and hc_post bit-exact; rms_norm and swiglu within one bf16 ulp (and nearly always
// equal); index_scores equal for >= 99.9% of rows and within one bf16 ulp otherwise; sparse_attn
// within two bf16 ulps of each head's largest |output|, >= 99.9% of the elements within one ulp of
// their own magnitude and >= 99.5% equal (measured: at most 1 head ulp, 99.99%, 99.96%). Also batch
// invariance: a head's attention output does not depend on the heads beside it, an index score not
// on the rows beside it, and the same call twice gives the same bits. dense_attn (the vision
// tower's) within two bf16 ulps of each query row's largest |output|, >= 99% within one ulp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"
#include "packed_keys.h"

namespace cedar {
namespace {

const KernelTable& ref_table() { return kernels::ref::table(); }

std::vector<float> bf16_normal(size_t n, unsigned seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(nd(rng));
  return v;
}

// One bf16 ulp at the magnitude of v (the spacing of bf16 values in v's binade).
double bf16_ulp(double v) {
  v = std::fabs(v);
  if (v < 0x1p-126) return 0x1p-133;
  int e;
  std::frexp(v, &e);  // v in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 1 - 7);
}

// How far apart two values are, in bf16 ulps of the larger magnitude (bit-equal: 0).
double ulps_apart(float a, float b) {
  if (std::memcmp(&a, &b, 4) == 0) return 0;
  return std::fabs(double(a) - double(b)) / bf16_ulp(std::max(std::fabs(a), std::fabs(b)));
}

class FastOps : public ::testing::TestWithParam<const KernelTable*> {};

// ---- quantizers: bit-exact ----

// Blocks that hit every rounding decision: zeros of both signs, the amax floor, E2M1 midpoints
// exactly (x / s on a midpoint), values past the E4M3 scale range (saturation), tiny and large
// magnitudes, equal values, random bf16.
std::vector<float> quant_input(int n, int block, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(n));
  static const float kMid[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.5f, 3.0f};
  for (int b0 = 0; b0 < n; b0 += block) {
    const int kind = int(rng() % 8);
    const float mag = std::ldexp(1.0f, int(rng() % 60) - 40);
    for (int i = b0; i < b0 + block; ++i) {
      float v;
      const float sgn = (rng() & 1) ? -1.0f : 1.0f;
      switch (kind) {
        case 0:
          v = (rng() & 1) ? 0.0f : -0.0f;
          break;
        case 1:  // E2M1 midpoints times a power of two: x / s lands on them (amax set below)
        case 4:
          v = sgn * kMid[rng() % 10] * mag;
          break;
        case 2:
          v = sgn * float(rng() % 4000) * 8.0f;  // E4M3 scale saturates above 6 * 448
          break;
        case 3:
          v = mag;
          break;
        default:
          v = round_bf16(sgn * std::ldexp(float(rng() % 1000) / 256.0f, -int(rng() % 10)) * mag);
      }
      x[size_t(i)] = v;
    }
    // amax 6 * 2^e: the E4M3 scale is 2^e; amax 5.5 * 2^e: the UE8M0 scale is 2^e
    if (kind == 1) x[size_t(b0)] = 6.0f * mag;
    if (kind == 4) x[size_t(b0)] = 5.5f * mag;
  }
  return x;
}

TEST_P(FastOps, Fp4QuantizersAreBitExact) {
  const KernelTable& k = *GetParam();
  std::mt19937 rng(17);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 32 * (1 + trial % 16);
    const auto x = quant_input(n, 16 << (trial % 2), rng);
    {
      std::vector<uint8_t> p0(size_t(n / 2)), s0(size_t(n / 16)), p1 = p0, s1 = s0;
      ref_table().fp4_act_quant_e4m3(x.data(), n, p0.data(), s0.data());
      k.fp4_act_quant_e4m3(x.data(), n, p1.data(), s1.data());
      ASSERT_EQ(p0, p1) << k.name << " e4m3 trial " << trial;
      ASSERT_EQ(s0, s1) << k.name << " e4m3 trial " << trial;
    }
    {
      std::vector<uint8_t> p0(size_t(n / 2)), s0(size_t(n / 32)), p1 = p0, s1 = s0;
      ref_table().fp4_act_quant_ue8m0(x.data(), n, p0.data(), s0.data());
      k.fp4_act_quant_ue8m0(x.data(), n, p1.data(), s1.data());
      ASSERT_EQ(p0, p1) << k.name << " ue8m0 trial " << trial;
      ASSERT_EQ(s0, s1) << k.name << " ue8m0 trial " << trial;
    }
  }
  // n = 16: a single E4M3-scaled block
  const std::vector<float> x16 = quant_input(16, 16, rng);
  uint8_t p0[8], s0[1], p1[8], s1[1];
  ref_table().fp4_act_quant_e4m3(x16.data(), 16, p0, s0);
  k.fp4_act_quant_e4m3(x16.data(), 16, p1, s1);
  EXPECT_EQ(0, std::memcmp(p0, p1, 8));
  EXPECT_EQ(s0[0], s1[0]);
}

// ---- top-k: bit-exact ----

std::vector<int> run_topk(const KernelTable& k, const std::vector<float>& v, int kk) {
  const int n = int(v.size());
  std::vector<int> out(size_t(std::clamp(kk, 0, n)), -1);
  k.topk(v.data(), n, kk, out.data());
  return out;
}

TEST_P(FastOps, TopkIsBitExact) {
  const KernelTable& k = *GetParam();
  std::mt19937 rng(5);
  const float kSpecial[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1.0f, -1.0f, 1e-40f, -1e-40f};
  for (int n : {1, 2, 3, 7, 8, 9, 31, 100, 1000, 4099, 16384, 32768}) {
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v) {
        switch (kind) {
          case 0:  // bf16 scores: many ties
            x = round_bf16(std::normal_distribution<float>(0.0f, 1.0f)(rng));
            break;
          case 1:  // a handful of values: ties at the k-th value nearly always
            x = float(int(rng() % 5) - 2);
            break;
          case 2:  // signed zeros, infinities, subnormals
            x = kSpecial[rng() % 8];
            break;
          case 3:  // all equal
            x = 0.5f;
            break;
          default:  // fp32 noise, masked rows at -inf
            x = (rng() % 4 == 0) ? -INFINITY : std::uniform_real_distribution<float>(-3, 3)(rng);
        }
      }
      for (int kk : {0, 1, 2, 6, 32, 512, n - 1, n, n + 3}) {
        if (kk < 0) continue;
        ASSERT_EQ(run_topk(ref_table(), v, kk), run_topk(k, v, kk))
            << k.name << " n=" << n << " kind=" << kind << " k=" << kk;
      }
    }
  }
}

// The draft's Markov step: the sums and the first maximum bit-exact, NaN and -inf included.
TEST_P(FastOps, AddArgmaxIsBitExact) {
  const KernelTable& k = *GetParam();
  std::mt19937 rng(9);
  const float kSpecial[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 1e-40f};
  int checked_nan_first = 0;
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 100, 4099, 129280}) {
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<float> a(static_cast<size_t>(n)), b(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        switch (kind) {
          case 0:  // logits and a small bias
            a[i] = std::normal_distribution<float>(0.0f, 3.0f)(rng);
            b[i] = std::normal_distribution<float>(0.0f, 0.1f)(rng);
            break;
          case 1:  // few values: ties everywhere
            a[i] = float(int(rng() % 4));
            b[i] = 0.0f;
            break;
          case 2:  // signed zeros, infinities, NaN, subnormals
            a[i] = kSpecial[rng() % 8];
            b[i] = kSpecial[rng() % 8];
            break;
          case 3:  // all -inf
            a[i] = -INFINITY;
            b[i] = 1.0f;
            break;
          default:  // one NaN at the start, the rest ordinary
            a[i] = i == 0 ? NAN : float(rng() % 1000);
            b[i] = 0.5f;
        }
      }
      std::vector<float> o0(a.size()), o1(a.size());
      const int64_t r0 = ref_table().add_argmax(a.data(), b.data(), n, o0.data());
      const int64_t r1 = k.add_argmax(a.data(), b.data(), n, o1.data());
      ASSERT_EQ(r0, r1) << k.name << " n=" << n << " kind=" << kind;
      ASSERT_EQ(0, std::memcmp(o0.data(), o1.data(), o0.size() * sizeof(float)))
          << k.name << " n=" << n << " kind=" << kind;
      if (kind == 4) checked_nan_first += r0 == 0;
    }
  }
  EXPECT_EQ(checked_nan_first, 12);  // NaN first keeps the scan at 0 in every length
  // a late maximum repeated: the first of them
  std::vector<float> a(1000, 1.0f), b(1000, 0.0f), o(1000);
  a[517] = a[900] = 2.0f;
  EXPECT_EQ(k.add_argmax(a.data(), b.data(), 1000, o.data()), 517);
}

// ---- hc_pre / hc_post: bit-exact; rms_norm, swiglu: within one ulp ----

TEST_P(FastOps, HcPreHcPostAreBitExact) {
  const KernelTable& k = *GetParam();
  const int hc = 4;
  for (int D : {8, 100, 1024, 4096}) {
    const auto h = bf16_normal(size_t(hc) * D, unsigned(D), 1.0f);
    const auto y = bf16_normal(size_t(D), unsigned(D) + 1, 0.5f);
    std::mt19937 rng(static_cast<unsigned>(D));
    std::uniform_real_distribution<float> u(-1.5f, 1.5f);
    float mix[hc], post[hc], comb[hc * hc];
    for (float& m : mix) m = u(rng);
    for (float& m : post) m = u(rng);
    for (float& m : comb) m = u(rng);
    std::vector<float> x0(static_cast<size_t>(D)), x1(size_t(D), -7.0f);
    ref_table().hc_pre(h.data(), mix, hc, D, x0.data());
    k.hc_pre(h.data(), mix, hc, D, x1.data());
    for (int d = 0; d < D; ++d) ASSERT_EQ(ulps_apart(x0[size_t(d)], x1[size_t(d)]), 0) << d;
    std::vector<float> o0(size_t(hc) * D), o1(size_t(hc) * D, -7.0f);
    ref_table().hc_post(y.data(), h.data(), post, comb, hc, D, o0.data());
    k.hc_post(y.data(), h.data(), post, comb, hc, D, o1.data());
    for (size_t i = 0; i < o0.size(); ++i) ASSERT_EQ(ulps_apart(o0[i], o1[i]), 0) << i;
  }
}

TEST_P(FastOps, RopeIsBitExact) {
  const KernelTable& k = *GetParam();
  for (int rd : {2, 6, 8, 64, 70}) {
    for (bool inverse : {false, true}) {
      auto x0 = bf16_normal(size_t(rd), unsigned(rd) + (inverse ? 100 : 0), 3.0f);
      x0[0] = -0.0f;  // signed zeros keep their sign through the rotation as in the reference
      std::mt19937 rng(static_cast<unsigned>(rd));
      std::uniform_real_distribution<float> ang(-3.2f, 3.2f);
      std::vector<float> cs(size_t(rd / 2)), sn(cs.size());
      for (size_t i = 0; i < cs.size(); ++i) {
        const float a = ang(rng);
        cs[i] = std::cos(a);
        sn[i] = std::sin(a);
      }
      auto x1 = x0;
      ref_table().rope(x0.data(), rd, cs.data(), sn.data(), inverse);
      k.rope(x1.data(), rd, cs.data(), sn.data(), inverse);
      for (int i = 0; i < rd; ++i)
        ASSERT_EQ(std::memcmp(&x0[size_t(i)], &x1[size_t(i)], 4), 0) << rd << " " << i;
    }
  }
}

TEST_P(FastOps, RmsNormWithinOneUlp) {
  const KernelTable& k = *GetParam();
  int64_t total = 0, equal = 0;
  for (int n : {8, 100, 128, 1024, 4096}) {
    for (int trial = 0; trial < 40; ++trial) {
      const auto x = bf16_normal(size_t(n), unsigned(n * 100 + trial), 0.1f + float(trial));
      const auto wf = bf16_normal(size_t(n), unsigned(trial), 1.0f);
      std::vector<uint16_t> w(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) w[size_t(i)] = f32_to_bf16_bits(wf[size_t(i)]);
      std::vector<float> o0(static_cast<size_t>(n)), o1(static_cast<size_t>(n));
      ref_table().rms_norm(x.data(), n, w.data(), float(1e-20), o0.data());
      k.rms_norm(x.data(), n, w.data(), float(1e-20), o1.data());
      for (int i = 0; i < n; ++i) {
        const double d = ulps_apart(o0[size_t(i)], o1[size_t(i)]);
        ASSERT_LE(d, 1.0) << k.name << " n=" << n << " i=" << i;
        equal += d == 0;
        ++total;
      }
    }
  }
  EXPECT_GE(equal, total * 999 / 1000) << k.name;
}

TEST_P(FastOps, SwigluWithinOneUlp) {
  const KernelTable& k = *GetParam();
  int64_t total = 0, equal = 0;
  for (int n : {8, 13, 128, 2304}) {
    for (int trial = 0; trial < 20; ++trial) {
      const auto g = bf16_normal(size_t(n), unsigned(n + trial), 4.0f);
      const auto u = bf16_normal(size_t(n), unsigned(n + trial + 99), 4.0f);
      for (float limit : {0.0f, 10.0f}) {
        for (bool weighted : {false, true}) {
          std::vector<float> o0(static_cast<size_t>(n)), o1(static_cast<size_t>(n));
          ref_table().swiglu(g.data(), u.data(), n, limit, weighted, 0.37f, o0.data());
          k.swiglu(g.data(), u.data(), n, limit, weighted, 0.37f, o1.data());
          for (int i = 0; i < n; ++i) {
            const double d = ulps_apart(o0[size_t(i)], o1[size_t(i)]);
            ASSERT_LE(d, 1.0) << k.name << " n=" << n << " g=" << g[size_t(i)];
            equal += d == 0;
            ++total;
          }
        }
      }
    }
  }
  EXPECT_GE(equal, total * 999 / 1000) << k.name;
}

// ---- index_scores ----

// A random FP4 (UE8M0 / 32) vector as index_scores reads it: 2 * E2M1 codes and scale codes.
void fp4_codes(const std::vector<float>& x, int8_t* c2, uint8_t* sc) {
  static const int8_t kTwice[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const int n = int(x.size());
  std::vector<uint8_t> packed(size_t(n / 2));
  kernels::ref::fp4_act_quant_ue8m0(x.data(), n, packed.data(), sc);
  for (int i = 0; i < n; ++i)
    c2[i] = kTwice[(i & 1) ? fp4_hi(packed[size_t(i / 2)]) : fp4_lo(packed[size_t(i / 2)])];
}

struct IndexCase {
  int IH = 0, ihd = 0;
  int64_t rows = 0;
  std::vector<int8_t> qc;
  std::vector<uint8_t> qe, keys, ks;
  std::vector<float> w;
};

// spread: the per-block magnitudes of q and k vary by up to 2^spread (stresses the fp32 sum)
IndexCase make_index_case(int IH, int ihd, int64_t rows, unsigned seed, int spread) {
  IndexCase c;
  c.IH = IH;
  c.ihd = ihd;
  c.rows = rows;
  std::mt19937 rng(seed);
  auto vec = [&] {
    auto x = bf16_normal(size_t(ihd), unsigned(rng()), 1.0f);
    for (int b = 0; b < ihd / 32; ++b) {
      const float s = std::ldexp(1.0f, spread ? int(rng() % unsigned(spread + 1)) : 0);
      for (int i = 0; i < 32; ++i) x[size_t(b * 32 + i)] *= s;
    }
    return x;
  };
  c.qc.resize(size_t(IH) * ihd);
  c.qe.resize(size_t(IH) * (ihd / 32));
  for (int h = 0; h < IH; ++h)
    fp4_codes(vec(), c.qc.data() + h * ihd, c.qe.data() + h * (ihd / 32));
  c.keys.resize(size_t(rows) * (ihd / 2));
  c.ks.resize(size_t(rows) * (ihd / 32));
  for (int64_t t = 0; t < rows; ++t) {
    const auto x = vec();
    kernels::ref::fp4_act_quant_ue8m0(x.data(), ihd, c.keys.data() + t * (ihd / 2),
                                      c.ks.data() + t * (ihd / 32));
  }
  const auto w = bf16_normal(size_t(IH), seed + 1, 0.2f);
  c.w = w;
  return c;
}

std::vector<float> run_index(const KernelTable& k, const IndexCase& c, const int32_t* rows,
                             int64_t n) {
  std::vector<float> s(size_t(n), -7.0f);
  k.index_scores(c.qc.data(), c.qe.data(), c.w.data(), c.IH, c.ihd, c.keys.data(), c.ks.data(),
                 rows, n, s.data());
  return s;
}

TEST_P(FastOps, IndexScoresMatchRef) {
  const KernelTable& k = *GetParam();
  struct Shape {
    int IH, ihd;
    int64_t n;
    int spread;
  };
  int64_t total = 0, equal = 0;
  double worst = 0;
  for (const Shape& s : {Shape{4, 128, 3000, 0}, Shape{8, 128, 3000, 2}, Shape{32, 128, 500, 1},
                         Shape{1, 128, 9, 0}, Shape{4, 256, 1001, 3}, Shape{3, 512, 77, 0},
                         Shape{4, 64, 50, 0}, Shape{4, 128, 0, 0}, Shape{4, 128, 1, 0}}) {
    const IndexCase c =
        make_index_case(s.IH, s.ihd, s.n, unsigned(s.IH * 7 + s.ihd + s.n), s.spread);
    const auto r = run_index(ref_table(), c, nullptr, s.n);
    const auto f = run_index(k, c, nullptr, s.n);
    for (int64_t i = 0; i < s.n; ++i) {
      const double d = ulps_apart(r[size_t(i)], f[size_t(i)]);
      ASSERT_LE(d, 1.0) << k.name << " IH=" << s.IH << " ihd=" << s.ihd << " row " << i << ": "
                        << r[size_t(i)] << " vs " << f[size_t(i)];
      worst = std::max(worst, d);
      equal += d == 0;
      ++total;
    }
    // a row list (unsorted, repeated rows): the same score as in the full scan
    if (s.n > 0) {
      std::mt19937 rng(3);
      std::vector<int32_t> rows(size_t(s.n / 3 + 5));
      for (auto& t : rows) t = int32_t(rng() % uint32_t(s.n));
      const auto fr = run_index(k, c, rows.data(), int64_t(rows.size()));
      for (size_t j = 0; j < rows.size(); ++j)
        ASSERT_EQ(ulps_apart(fr[j], f[size_t(rows[j])]), 0) << k.name << " list entry " << j;
    }
  }
  std::printf("[ index_scores %s ] %lld rows, %lld equal, worst %.0f ulp\n",
              std::string(k.name).c_str(), (long long)total, (long long)equal, worst);
  EXPECT_GE(equal, total * 999 / 1000) << k.name;
}

// ---- sparse_attn ----

struct AttnResult {
  double worst_head_ulps = 0;  // max |fast - ref| in ulps of the head's largest |output|
  int64_t total = 0, within1 = 0, equal = 0;
};

std::vector<float> run_attn(const KernelTable& k, const std::vector<float>& q, int H, int hd,
                            const test::PackedKeys& pk, const std::vector<float>& sink,
                            float scale) {
  std::vector<float> out(size_t(H) * hd, -7.0f), scratch(k.sparse_attn_scratch(H, hd), 3.0f);
  k.sparse_attn(q.data(), H, hd, pk.keys(), sink.data(), scale, out.data(), scratch.data());
  return out;
}

void compare_attn(const std::vector<float>& r, const std::vector<float>& f, int H, int hd,
                  AttnResult* res) {
  for (int h = 0; h < H; ++h) {
    double mx = 0;
    for (int d = 0; d < hd; ++d) mx = std::max(mx, std::fabs(double(r[size_t(h) * hd + d])));
    const double u = bf16_ulp(mx);
    for (int d = 0; d < hd; ++d) {
      const float a = r[size_t(h) * hd + d], b = f[size_t(h) * hd + d];
      const double e = std::fabs(double(a) - double(b)) / u;
      res->worst_head_ulps = std::max(res->worst_head_ulps, e);
      res->within1 += ulps_apart(a, b) <= 1.0;
      res->equal += a == b;
      ++res->total;
    }
  }
}

TEST_P(FastOps, SparseAttnCloseToRef) {
  const KernelTable& k = *GetParam();
  struct Shape {
    int H, hd, n_win, n_comp;
    float key_sd;  // larger: sharper softmax
  };
  AttnResult res;
  unsigned seed = 1;
  for (const Shape& s :
       {Shape{4, 128, 0, 0, 1.0f}, Shape{4, 128, 1, 0, 1.0f}, Shape{4, 128, 0, 1, 1.0f},
        Shape{16, 128, 128, 256, 2.0f}, Shape{3, 128, 65, 0, 1.0f}, Shape{5, 256, 100, 77, 4.0f},
        Shape{6, 512, 128, 512, 2.0f}, Shape{1, 32, 7, 3, 1.0f}, Shape{64, 128, 128, 40, 8.0f},
        Shape{7, 64, 20, 200, 0.5f}, Shape{4, 128, 64, 64, 3.0f}}) {
    const int n = s.n_win + s.n_comp;
    const auto rows = bf16_normal(size_t(n) * s.hd, seed++, s.key_sd);
    const test::PackedKeys pk = test::pack_keys(rows, s.hd, s.n_win, s.n_comp);
    const auto q = bf16_normal(size_t(s.H) * s.hd, seed++, 1.0f);
    const auto sink = bf16_normal(size_t(s.H), seed++, 2.0f);
    const float scale = 1.0f / std::sqrt(float(s.hd));
    const auto r = run_attn(ref_table(), q, s.H, s.hd, pk, sink, scale);
    const auto f = run_attn(k, q, s.H, s.hd, pk, sink, scale);
    AttnResult one;
    compare_attn(r, f, s.H, s.hd, &one);
    EXPECT_LE(one.worst_head_ulps, 2.0)
        << k.name << " H=" << s.H << " hd=" << s.hd << " keys " << s.n_win << "+" << s.n_comp;
    if (one.worst_head_ulps > 0.5)
      std::printf("  H=%d hd=%d keys %d+%d: %.3f head ulps\n", s.H, s.hd, s.n_win, s.n_comp,
                  one.worst_head_ulps);
    res.worst_head_ulps = std::max(res.worst_head_ulps, one.worst_head_ulps);
    res.total += one.total;
    res.within1 += one.within1;
    res.equal += one.equal;
    // the same call again: the same bits
    ASSERT_EQ(f, run_attn(k, q, s.H, s.hd, pk, sink, scale)) << k.name;
  }
  std::printf(
      "[ sparse_attn %s ] %lld outputs, %lld equal, %lld within 1 ulp, worst %.3f head "
      "ulps\n",
      std::string(k.name).c_str(), (long long)res.total, (long long)res.equal,
      (long long)res.within1, res.worst_head_ulps);
  EXPECT_GE(res.within1, res.total * 999 / 1000) << k.name;
  EXPECT_GE(res.equal, res.total * 995 / 1000) << k.name;
}

// A head's output does not depend on the heads computed beside it (head groups of 4 / 2 / 1).
TEST_P(FastOps, SparseAttnHeadsAreIndependent) {
  const KernelTable& k = *GetParam();
  const int H = 7, hd = 128;
  const auto rows = bf16_normal(size_t(150) * hd, 8, 2.0f);
  const test::PackedKeys pk = test::pack_keys(rows, hd, 100, 50);
  const auto q = bf16_normal(size_t(H) * hd, 9, 1.0f);
  const auto sink = bf16_normal(size_t(H), 10, 2.0f);
  const auto all = run_attn(k, q, H, hd, pk, sink, 0.088f);
  for (int h = 0; h < H; ++h) {
    const std::vector<float> qh(q.begin() + h * hd, q.begin() + (h + 1) * hd);
    const auto one = run_attn(k, qh, 1, hd, pk, {sink[size_t(h)]}, 0.088f);
    for (int d = 0; d < hd; ++d)
      ASSERT_EQ(ulps_apart(one[size_t(d)], all[size_t(h) * hd + d]), 0) << k.name << " h=" << h;
  }
}

std::string table_name(const ::testing::TestParamInfo<const KernelTable*>& i) {
  return std::string(i.param->name);
}

// ---- dense_attn (the vision tower's) ----

// q, k, v of one head interleaved in rows of width ld = 3 * hd, as the fused wqkv output
std::vector<float> run_dense(const KernelTable& k, const std::vector<float>& qkv, int nq, int n,
                             int hd) {
  const int ld = 3 * hd;
  std::vector<float> out(size_t(nq) * hd, -7.0f), scratch(k.dense_attn_scratch(n, hd), 3.0f);
  k.dense_attn(qkv.data(), nq, qkv.data() + hd, qkv.data() + 2 * hd, n, hd, ld,
               float(1.0 / std::sqrt(double(hd))), out.data(), hd, scratch.data());
  return out;
}

TEST_P(FastOps, DenseAttnCloseToRef) {
  const KernelTable& k = *GetParam();
  struct Shape {
    int nq, n, hd;
    float sd;  // larger: sharper softmax
  };
  AttnResult res;
  unsigned seed = 100;
  for (const Shape& s : {Shape{1, 1, 16, 1.0f}, Shape{5, 37, 16, 1.0f}, Shape{64, 200, 64, 2.0f},
                         Shape{3, 300, 20, 1.0f}, Shape{9, 64, 64, 4.0f}, Shape{7, 1521, 16, 1.0f},
                         Shape{4, 90, 128, 0.5f}}) {
    const int n = std::max(s.nq, s.n);
    const auto qkv = bf16_normal(size_t(n) * 3 * s.hd, seed++, s.sd);
    const auto r = run_dense(ref_table(), qkv, s.nq, n, s.hd);
    const auto f = run_dense(k, qkv, s.nq, n, s.hd);
    AttnResult one;
    compare_attn(r, f, s.nq, s.hd, &one);  // each query's row like a head's
    EXPECT_LE(one.worst_head_ulps, 2.0) << k.name << " nq=" << s.nq << " n=" << n << " hd=" << s.hd;
    res.worst_head_ulps = std::max(res.worst_head_ulps, one.worst_head_ulps);
    res.total += one.total;
    res.within1 += one.within1;
    res.equal += one.equal;
    // one key: the output is that key's value row, exactly, in every table
    if (n == 1) {
      for (int d = 0; d < s.hd; ++d) EXPECT_EQ(f[size_t(d)], qkv[size_t(2 * s.hd + d)]) << k.name;
    }
    // a query's output does not depend on the queries computed with it
    for (int i = 0; i < s.nq; i += 3) {
      std::vector<float> alone(qkv.begin() + size_t(i) * 3 * s.hd,
                               qkv.begin() + size_t(i + 1) * 3 * s.hd);
      const int ld = 3 * s.hd;
      std::vector<float> o(size_t(s.hd)), sc(k.dense_attn_scratch(n, s.hd));
      k.dense_attn(alone.data(), 1, qkv.data() + s.hd, qkv.data() + 2 * s.hd, n, s.hd, ld,
                   float(1.0 / std::sqrt(double(s.hd))), o.data(), s.hd, sc.data());
      ASSERT_TRUE(std::equal(o.begin(), o.end(), f.begin() + size_t(i) * s.hd))
          << k.name << " query " << i;
    }
  }
  std::printf(
      "[ dense_attn %s ] %lld outputs, %lld equal, %lld within 1 ulp, worst %.3f row ulps\n",
      std::string(k.name).c_str(), (long long)res.total, (long long)res.equal,
      (long long)res.within1, res.worst_head_ulps);
  EXPECT_GE(res.within1, res.total * 99 / 100) << k.name;
}

INSTANTIATE_TEST_SUITE_P(Tables, FastOps, ::testing::ValuesIn(supported_kernel_tables()),
                         table_name);

}  // namespace
}  // namespace cedar
