// expected_tensors(): the release's inventory (spec §13 "Verification") and the per-role tensors
// of the tiny/small presets.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "model/checkpoint.h"
#include "model/presets.h"

namespace cedar {
namespace {

std::map<std::string, ExpectedTensor> by_name(const std::vector<ExpectedTensor>& v) {
  std::map<std::string, ExpectedTensor> m;
  for (const auto& t : v) EXPECT_TRUE(m.emplace(t.name, t).second) << "duplicate " << t.name;
  return m;
}

int64_t bytes_of(const ExpectedTensor& t) {
  int64_t n = int64_t(dtype_size(t.dtype));
  for (auto d : t.shape) n *= d;
  return n;
}

void expect_census(const std::vector<ExpectedTensor>& inv) {
  std::map<std::string, int> census;
  int64_t bytes = 0, expert_bytes = 0, engram_table_bytes = 0;
  for (const auto& t : inv) {
    census[dtype_name(t.dtype)]++;
    bytes += bytes_of(t);
    if (t.name.find(".ffn.experts.") != std::string::npos)  // backbone + DSpark
      expert_bytes += bytes_of(t);
    if (t.name.find("engram.embed.") != std::string::npos) engram_table_bytes += bytes_of(t);
  }
  EXPECT_EQ(inv.size(), 96085u);
  EXPECT_EQ(bytes, 510286023000);
  EXPECT_EQ(census["F8_E8M0"], 47589);
  EXPECT_EQ(census["I8"], 47232);
  EXPECT_EQ(census["BF16"], 520);
  EXPECT_EQ(census["F32"], 387);
  EXPECT_EQ(census["F8_E4M3"], 357);
  EXPECT_EQ(census.size(), 5u);
  // spec §13 size split: routed experts 275.7 GiB, Engram tables 188.8 GiB
  EXPECT_NEAR(double(expert_bytes) / (1 << 30), 275.7, 0.05);
  EXPECT_NEAR(double(engram_table_bytes) / (1 << 30), 188.8, 0.05);
}

TEST(Inventory, ReleasedConfigMatchesTheRelease) {
  const auto inv = expected_tensors(preset_config("released"));
  expect_census(inv);
  auto m = by_name(inv);
  // spot checks against the spec §13 table
  auto shape = [&](const std::string& n) {
    auto it = m.find(n);
    EXPECT_NE(it, m.end()) << n;
    return it == m.end() ? std::vector<int64_t>{} : it->second.shape;
  };
  EXPECT_EQ(shape("layers.0.attn.wq_a.scale"), (std::vector<int64_t>{40, 160}));
  EXPECT_EQ(shape("layers.0.attn.wq_b.scale"), (std::vector<int64_t>{1024, 40}));
  EXPECT_EQ(shape("layers.0.attn.wo_a.weight"), (std::vector<int64_t>{8192, 4096}));
  EXPECT_EQ(shape("layers.39.ffn.experts.383.w1.weight"), (std::vector<int64_t>{2304, 2560}));
  EXPECT_EQ(shape("layers.39.ffn.experts.383.w1.scale"), (std::vector<int64_t>{2304, 160}));
  EXPECT_EQ(shape("layers.39.ffn.experts.383.w2.weight"), (std::vector<int64_t>{5120, 1152}));
  EXPECT_EQ(shape("layers.39.ffn.experts.383.w2.scale"), (std::vector<int64_t>{5120, 72}));
  EXPECT_EQ(shape("layers.14.engram.embed.weight"), (std::vector<int64_t>{384016682, 256}));
  EXPECT_EQ(shape("layers.1.engram.embed.scale"), (std::vector<int64_t>{384006168, 8}));
  EXPECT_EQ(shape("layers.1.engram.wkv.weight"), (std::vector<int64_t>{25600, 6144}));
  EXPECT_EQ(shape("mtp.0.main_proj.weight"), (std::vector<int64_t>{5120, 15360}));
  EXPECT_EQ(shape("mtp.2.confidence_head.proj.weight"), (std::vector<int64_t>{1, 5376}));
  EXPECT_EQ(shape("mtp.1.ffn.gate.bias_vl"), (std::vector<int64_t>{128}));
  EXPECT_EQ(shape("aligner.w1.weight"), (std::vector<int64_t>{5120, 9216}));
  EXPECT_EQ(m.count("mtp.1.ffn.experts.128.w1.weight"), 0u);
  EXPECT_EQ(m.count("mtp.1.main_proj.weight"), 0u);
  EXPECT_EQ(m.count("layers.0.attn.wq_a"), 0u);  // Linear modules store X.weight + X.scale
  EXPECT_EQ(m.count("layers.20.attn.compressor.wgate.weight"), 0u);  // ratio 1: no gate
  EXPECT_EQ(m.count("layers.14.attn.compressor.wgate.weight"), 1u);
  EXPECT_EQ(m.at("layers.3.hc_attn_fn").dtype, DType::F32);
  EXPECT_EQ(m.at("layers.3.attn.wkv.scale").dtype, DType::F8_E8M0);
}

TEST(Inventory, ReleasedConfigFixtureParsesToTheSameInventory) {
  const std::string path = std::string(CEDAR_SOURCE_DIR) + "/tests/fixtures/released-config.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no fixture " << path;
  const auto a = expected_tensors(ModelConfig::from_file(path));
  const auto b = expected_tensors(preset_config("released"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].dtype, b[i].dtype) << a[i].name;
    EXPECT_EQ(a[i].shape, b[i].shape) << a[i].name;
  }
  expect_census(a);
}

// The per-layer name suffixes (experts collapsed to one), for comparing layer roles; `ns` is
// "layers" (the backbone) or "mtp" (the DSpark stages).
std::map<int, std::set<std::string>> layer_roles(const std::vector<ExpectedTensor>& inv,
                                                 const std::string& ns = "layers") {
  const std::regex re("^" + ns + R"(\.(\d+)\.(.*)$)");
  static const std::regex expert(R"(ffn\.experts\.\d+\.)");
  std::map<int, std::set<std::string>> out;
  for (const auto& t : inv) {
    std::smatch m;
    if (!std::regex_match(t.name, m, re)) continue;
    std::string rest = std::regex_replace(m[2].str(), expert, "ffn.experts.E.");
    if (rest == "ffn.gate.bias_vl") continue;  // VL-only
    out[std::stoi(m[1].str())].insert(rest);
  }
  return out;
}

TEST(Inventory, SmallKeepsTheReleasedRolesOfEveryLayer) {
  const auto small = expected_tensors(preset_config("small"));
  const auto rel = layer_roles(expected_tensors(preset_config("released")));
  const auto sm = layer_roles(small);
  ASSERT_EQ(sm.size(), 40u);
  for (int l = 0; l < 40; ++l) EXPECT_EQ(sm.at(l), rel.at(l)) << "layer " << l;
  // the DSpark stages too: main_proj/main_norm on stage 0, norm and the two heads on stage 2
  const auto rel_mtp = layer_roles(expected_tensors(preset_config("released")), "mtp");
  const auto sm_mtp = layer_roles(small, "mtp");
  ASSERT_EQ(sm_mtp.size(), 3u);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(sm_mtp.at(s), rel_mtp.at(s)) << "stage " << s;
  // a vision tower of the config's shape (scaled down), the release's delimiters and the
  // routers' image-row bias on every MoE layer
  const ModelConfig cfg = preset_config("small");
  ASSERT_TRUE(cfg.has_vision);
  int blocks = 0, bias_vl = 0, delimiters = 0;
  for (const auto& t : small) {
    if (t.name.rfind("vision.blocks.", 0) == 0 && t.name.find(".norm1.weight") != std::string::npos)
      ++blocks;
    if (t.name.find(".ffn.gate.bias_vl") != std::string::npos) ++bias_vl;
    if (t.name.rfind("image_", 0) == 0) {
      ++delimiters;
      EXPECT_EQ(t.shape, std::vector<int64_t>{cfg.hidden_size});
    }
    if (t.name == "vision.patch_embed.proj.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{cfg.vision.hidden_size, 588}));
    }
    if (t.name == "aligner.w1.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{cfg.hidden_size, cfg.vision.hidden_size * 9}));
    }
  }
  EXPECT_EQ(blocks, cfg.vision.num_hidden_layers);
  EXPECT_EQ(bias_vl, 40 + 3);  // backbone and DSpark stages: every gate of the release has one
  EXPECT_EQ(delimiters, 3);
}

TEST(Inventory, TinyHasOneLayerOfEveryRole) {
  const ModelConfig cfg = preset_config("tiny");
  const auto m = by_name(expected_tensors(cfg));
  auto has = [&](int l, const std::string& rest) {
    return m.count("layers." + std::to_string(l) + "." + rest) == 1;
  };
  for (int l = 0; l < 7; ++l) {
    const bool kv_src = l == 2 || l == 4, idx_src = l == 2 || l == 4 || l == 5;
    EXPECT_EQ(has(l, "attn.compressor.wkv.weight"), kv_src) << l;
    EXPECT_EQ(has(l, "attn.compressor.norm.weight"), kv_src) << l;
    EXPECT_EQ(has(l, "attn.compressor.wgate.weight"), l == 2) << l;  // ratio-2 source only
    EXPECT_EQ(has(l, "attn.indexer.wk.weight"), kv_src) << l;
    EXPECT_EQ(has(l, "attn.indexer.k_norm.weight"), kv_src) << l;
    EXPECT_EQ(has(l, "attn.indexer.wq_b.weight"), idx_src) << l;
    EXPECT_EQ(has(l, "attn.indexer.wq_b.scale"), idx_src) << l;
    EXPECT_EQ(has(l, "attn.indexer.weights_proj.weight"), idx_src) << l;
    EXPECT_EQ(has(l, "engram.embed.weight"), l == 1 || l == 2) << l;
    EXPECT_EQ(has(l, "engram.wkv.weight"), l == 1 || l == 2) << l;
    EXPECT_TRUE(has(l, "ffn.experts.7.w3.scale")) << l;
    EXPECT_FALSE(has(l, "ffn.experts.8.w1.weight")) << l;
    EXPECT_TRUE(has(l, "ffn.gate.bias_vl")) << l;  // tiny carries a vision tower
    EXPECT_TRUE(has(l, "hc_ffn_scale")) << l;
  }
  EXPECT_FALSE(has(7, "attn_norm.weight"));
  auto shape = [&](const std::string& n) { return m.at(n).shape; };
  using S = std::vector<int64_t>;
  EXPECT_EQ(shape("layers.0.attn.wq_a.weight"), (S{64, 128}));
  EXPECT_EQ(shape("layers.0.attn.wq_a.scale"), (S{2, 4}));
  EXPECT_EQ(shape("layers.0.attn.wq_b.weight"), (S{512, 64}));
  EXPECT_EQ(shape("layers.0.attn.wo_a.weight"), (S{128, 256}));
  EXPECT_EQ(shape("layers.0.attn.wo_a.scale"), (S{4, 8}));
  EXPECT_EQ(shape("layers.0.attn.wo_b.weight"), (S{128, 128}));
  EXPECT_EQ(shape("layers.0.ffn.experts.0.w1.weight"), (S{64, 64}));
  EXPECT_EQ(shape("layers.0.ffn.experts.0.w1.scale"), (S{64, 4}));
  EXPECT_EQ(shape("layers.0.ffn.experts.0.w2.weight"), (S{128, 32}));
  EXPECT_EQ(shape("layers.0.ffn.experts.0.w2.scale"), (S{128, 2}));
  EXPECT_EQ(shape("layers.5.attn.indexer.wq_b.weight"), (S{512, 64}));
  EXPECT_EQ(shape("layers.2.engram.embed.weight"), (S{cfg.engram_num_embeddings[1], 32}));
  EXPECT_EQ(shape("layers.2.engram.embed.scale"), (S{cfg.engram_num_embeddings[1], 1}));
  EXPECT_EQ(shape("layers.1.engram.wkv.weight"), (S{640, 192}));
  EXPECT_EQ(shape("layers.1.hc_attn_fn"), (S{24, 512}));
  EXPECT_EQ(shape("embed.weight"), (S{129280, 128}));
}

TEST(Inventory, BadConfigNamesTheKey) {
  ModelConfig c = preset_config("tiny");
  c.hidden_size = 100;
  try {
    expected_tensors(c);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_size"), std::string::npos) << e.what();
  }
  c = preset_config("tiny");
  c.engram_num_embeddings.pop_back();
  EXPECT_THROW(expected_tensors(c), std::runtime_error);
  c = preset_config("tiny");
  c.compress_ratios.resize(3);
  EXPECT_THROW(expected_tensors(c), std::runtime_error);
}

}  // namespace
}  // namespace cedar
