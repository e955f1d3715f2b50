// SequenceState: the per-sequence formats (spec §10.1) at the release width, lossless storage of
// the quantized rows, and memory accounting from real allocations.
#include "state/sequence_state.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/ref/ref.h"
#include "model/config.h"
#include "numerics/bf16.h"

namespace cedar {
namespace {

ModelConfig released() {
  ModelConfig c = ModelConfig::from_file(std::string(CEDAR_SOURCE_DIR) +
                                         "/tests/fixtures/released-config.json");
  c.validate();
  return c;
}

std::vector<float> bf16_normal(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = round_bf16(nd(rng));
  return v;
}

TEST(SequenceState, ReleaseLayoutSizes) {
  const ModelConfig c = released();
  SequenceState st(c);
  ASSERT_EQ(st.window.size(), 40u);
  // window ring: 512 E4M3 codes + 16 UE8M0 scales = 528 B per row, 128 rows per layer
  size_t ring = 0;
  for (const auto& w : st.window) {
    EXPECT_EQ(w.window, 128);
    EXPECT_EQ(w.codes.size() + w.scales.size(), 128u * 528u);
    ring += w.codes.size() + w.scales.size();
  }
  EXPECT_EQ(ring, 2703360u);  // spec §10.2: 40 x 128 x 528 B
  int sources = 0;
  for (int l = 0; l < 40; ++l) {
    const auto& cc = st.compressed[size_t(l)];
    if (!c.plan(l).is_kv_source) {
      EXPECT_EQ(cc.ratio, 0);
      continue;
    }
    ++sources;
    EXPECT_EQ(cc.ratio, l == 20 ? 1 : 2);
    EXPECT_EQ(cc.tail_k.size(), l == 20 ? 0u : 512u);  // fp32 k of one parked token
  }
  EXPECT_EQ(sources, 4);
  EXPECT_EQ(st.n_tokens, 0);
}

TEST(SequenceState, CompressedRowsAre288PlusIndexKeys68BytesAndLossless) {
  const ModelConfig c = released();
  SequenceState st(c);
  CompressedKv& cc = st.compressed[20];
  const size_t before =
      cc.kv_fp4.size() + cc.kv_scale.size() + cc.ik_fp4.size() + cc.ik_scale.size();
  EXPECT_EQ(before, 0u);
  std::vector<std::vector<float>> kv_vals, ik_vals;
  for (int r = 0; r < 3; ++r) {
    const auto kv = bf16_normal(512, 10 + r), ik = bf16_normal(128, 20 + r);
    std::vector<uint8_t> kp(256), ks(32), ip(64), is(4);
    kernels::ref::fp4_act_quant_e4m3(kv.data(), 512, kp.data(), ks.data());
    kernels::ref::fp4_act_quant_ue8m0(ik.data(), 128, ip.data(), is.data());
    cc.append(kp.data(), ks.data(), ip.data(), is.data());
    std::vector<float> kd(512), id(128);
    kernels::ref::dequant_fp4_e4m3(kp.data(), ks.data(), 512, kd.data());
    kernels::ref::dequant_fp4_ue8m0(ip.data(), is.data(), 128, id.data());
    kv_vals.push_back(kd);
    ik_vals.push_back(id);
  }
  EXPECT_EQ(cc.n_rows, 3);
  EXPECT_EQ(cc.kv_fp4.size() + cc.kv_scale.size(), 3u * 288u);
  EXPECT_EQ(cc.ik_fp4.size() + cc.ik_scale.size(), 3u * 68u);
  for (int r = 0; r < 3; ++r) {
    std::vector<float> kd(512), id(128);
    cc.read_kv(r, kd.data());
    cc.read_index_key(r, id.data());
    EXPECT_EQ(kd, kv_vals[size_t(r)]);
    EXPECT_EQ(id, ik_vals[size_t(r)]);
    for (float v : kd) EXPECT_EQ(v, round_bf16(v));  // dequantized values are bf16 values
  }
  EXPECT_THROW(cc.read_kv(3, std::vector<float>(512).data()), std::runtime_error);
  EXPECT_GE(st.bytes(), 2703360u + 3u * (288u + 68u));
}

TEST(SequenceState, WindowRingIsLosslessAndIndexedByPositionModWindow) {
  const ModelConfig c = released();
  SequenceState st(c);
  WindowRing& w = st.window[3];
  const auto x = bf16_normal(512, 5);
  std::vector<float> v(512);
  const int64_t pos = 128 * 7 + 5;
  kernels::ref::act_quant(x.data(), 512, w.row_codes(pos), w.row_scales(pos));
  kernels::ref::dequant_fp8(w.row_codes(pos), w.row_scales(pos), 512, v.data());
  std::vector<float> r(512), r2(512);
  w.read(pos, r.data());
  w.read(5, r2.data());  // same slot
  EXPECT_EQ(r, v);
  EXPECT_EQ(r2, v);
  EXPECT_EQ(w.row_codes(pos), w.codes.data() + 5 * 512);
}

}  // namespace
}  // namespace cedar
