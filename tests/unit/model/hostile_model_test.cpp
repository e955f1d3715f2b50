// Hostile model files: every count a config.json or a GGUF file's keys claim is checked before
// memory or a loop follows it, and files that are not regular files are refused at once. Each
// case starts from a valid tiny model, changes one claim, and expects Checkpoint::open to refuse
// it naming the file, the key and the bound, with the process's peak memory barely moving
// (tests/unit/peak_memory.h); `cedar inspect` prints the same refusal and exits 1. The GGUF file
// holds the tiny config's keys and no tensors (writing the tensors takes seconds): its config is
// derived, and then its first tensor is found missing -- unless the changed key is refused
// first, as each case expects.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../peak_memory.h"
#include "model/checkpoint.h"
#include "model/gguf_dialect.h"
#include "model/gguf_writer.h"
#include "model/make_model.h"
#include "model/presets.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kSmallGrowth = int64_t(64) << 20;  // what a refusal may cost at most

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The refusal Checkpoint::open gives `path` ("" when it opens), with its peak memory growth.
std::string refusal(const std::string& path, int64_t* growth) {
  std::string what;
  *growth = testing::peak_growth_bytes([&] {
    try {
      Checkpoint::open(path);
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
  });
  return what;
}

// `cedar <args>` under a 60 s guard (a hang is a failure, not a stuck test run).
std::pair<int, std::string> cedar(const std::string& args) {
  const char* env = std::getenv("CEDAR_BIN");
  const std::string bin = env && *env ? env : CEDAR_BIN;
  FILE* p = ::popen(("timeout 60 '" + bin + "' " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = p ? ::pclose(p) : -1;
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class HostileModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("cedar_hostile_model_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    MakeModelOptions o;
    o.preset = "tiny";
    o.seed = 3;
    o.out_dir = (root_ / "tiny").string();
    o.tokenizer = CEDAR_DEFAULT_TOKENIZER;
    make_model(o);
    write_keys_only_gguf((root_ / "tiny.gguf").string());
  }
  // The tiny config's dialect-A keys, with the roles a file without tensors can have (window
  // layers only: roles come from tensor presence) and no Engram, and a vocabulary of 1024.
  static void write_keys_only_gguf(const std::string& path) {
    ModelConfig c = preset_config("tiny");
    c.compress_ratios.assign(size_t(c.num_hidden_layers), 0);
    c.kv_source_layer_ids.clear();
    c.index_source_layer_ids.clear();
    c.candidate_source_layer_id = -1;
    c.engram_layer_ids.clear();
    c.num_nextn_predict_layers = 0;
    c.has_vision = false;
    c.vocab_size = 1024;
    c.validate();
    gguf::Writer w;
    gguf::write_config_keys(c, w);
    std::vector<std::string> tokens;
    for (int i = 0; i < 1024; ++i) tokens.push_back("t" + std::to_string(i));
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_string("tokenizer.huggingface.json", "{}");  // stored, read only when a model runs
    w.write(path);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  void SetUp() override {
    dir_ = root_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const auto& e : fs::directory_iterator(root_ / "tiny"))  // the shard by link
      if (e.path().extension() == ".safetensors")
        fs::create_symlink(e.path(), dir_ / e.path().filename());
      else
        fs::copy_file(e.path(), dir_ / e.path().filename());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // config.json of the tiny model with one edit (the earlier ones undone)
  void edit_config(const std::function<void(json&)>& edit) {
    json j = json::parse(slurp(root_ / "tiny" / "config.json"));
    edit(j);
    std::ofstream(dir_ / "config.json", std::ios::trunc) << j.dump();
  }

  // A copy of the GGUF file with one scalar key's value bytes replaced (same type and size).
  std::string gguf_with(const std::string& key, const void* value, size_t n) {
    std::string bytes = slurp(root_ / "tiny.gguf");
    std::string needle(8, '\0');
    const uint64_t len = key.size();
    std::memcpy(needle.data(), &len, 8);
    needle += key;
    const size_t at = bytes.find(needle);
    EXPECT_NE(at, std::string::npos) << key;
    if (at == std::string::npos) return "";
    bytes.replace(at + needle.size() + 4, n, static_cast<const char*>(value), n);  // after type
    const std::string path = (dir_ / "hostile.gguf").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return path;
  }

  // Checkpoint::open and `cedar inspect --model` both refuse `path` naming every part, and the
  // refusal allocates little.
  void expect_refused(const std::string& path, std::initializer_list<std::string> parts) {
    int64_t growth = 0;
    const std::string m = refusal(path, &growth);
    EXPECT_FALSE(m.empty()) << path << " opened";
    for (const auto& p : parts)
      EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
    EXPECT_LT(growth, kSmallGrowth) << m;
    const auto [rc, out] = cedar("inspect --model '" + path + "'");
    EXPECT_EQ(rc, 1) << out;
    for (const auto& p : parts)
      EXPECT_NE(out.find(p), std::string::npos) << "'" << p << "' not in: " << out;
  }

  static fs::path root_;
  fs::path dir_;
};
fs::path HostileModel::root_;

TEST_F(HostileModel, TheUnchangedFiles) {
  EXPECT_NO_THROW(Checkpoint::open(dir_.string()));
  // the keys pass: the file is refused for the tensors it lacks
  expect_refused((root_ / "tiny.gguf").string(), {"tiny.gguf: tensor '", "' is missing"});
}

TEST_F(HostileModel, ConfigJsonCountsAreBoundedBeforeUse) {
  edit_config([](json& j) { j["text_config"]["n_routed_experts"] = 1000000; });
  expect_refused(dir_.string(), {"config.json", "text_config.n_routed_experts", "limit of 16384"});
  edit_config([](json& j) { j["text_config"]["n_routed_experts"] = 1000000000; });
  expect_refused(dir_.string(), {"config.json", "text_config.n_routed_experts", "limit of 16384"});
  edit_config([](json& j) { j["text_config"]["hc_sinkhorn_iters"] = 1000000000; });
  expect_refused(dir_.string(), {"text_config.hc_sinkhorn_iters", "exceeds the limit of 1000"});
}

TEST_F(HostileModel, ConfigJsonClaimingMoreTensorsThanTheShardsHoldIsRefused) {
  // within every limit (7 layers x 16384 experts), but the shard holds 8 experts per layer
  edit_config([](json& j) {
    j["text_config"]["n_routed_experts"] = 16384;
    j["text_config"]["num_hidden_layers"] = 7;
  });
  expect_refused(dir_.string(), {"config.json describes more than", "far more than the",
                                 "the checkpoint can hold", "n_routed_experts 16384"});
}

TEST_F(HostileModel, GgufKeysAreBoundedBeforeTheLayersAreWalked) {
  const uint32_t layers = 2147483647;  // spun for minutes over "blk.N." names before
  expect_refused(gguf_with("deepseek41.block_count", &layers, 4),
                 {"hostile.gguf", "deepseek41.block_count (text_config.num_hidden_layers)",
                  "2147483647 exceeds the limit of 1024"});
  const uint32_t experts = 1000000;
  expect_refused(gguf_with("deepseek41.expert_count", &experts, 4),
                 {"deepseek41.expert_count", "exceeds the limit of 16384"});
  const uint32_t iters = 1000000000;
  expect_refused(gguf_with("deepseek41.hyper_connection.sinkhorn_iterations", &iters, 4),
                 {"deepseek41.hyper_connection.sinkhorn_iterations", "exceeds the limit of 1000"});
  const float inf = std::numeric_limits<float>::infinity();
  expect_refused(gguf_with("deepseek41.rope.freq_base", &inf, 4),
                 {"deepseek41.rope.freq_base (text_config.rope_theta)", "must be finite"});
  const uint32_t many = 16384;  // within the limit: refused for the tensors it lacks
  expect_refused(gguf_with("deepseek41.expert_count", &many, 4),
                 {"its metadata describes more than 4096 tensors, far more than the 0 the "
                  "checkpoint can hold",
                  "n_routed_experts 16384"});
}

TEST_F(HostileModel, FifosAreRefusedAtOnce) {
  // a FIFO named config.json hung `cedar inspect` (the open waited for a writer)
  fs::remove(dir_ / "config.json");
  ASSERT_EQ(::mkfifo((dir_ / "config.json").c_str(), 0600), 0);
  expect_refused(dir_.string(), {"config.json: not a regular file (a FIFO)"});
  const auto [rc, out] = cedar("inspect --config '" + (dir_ / "config.json").string() + "'");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("config.json: not a regular file (a FIFO)"), std::string::npos) << out;
  fs::remove(dir_ / "config.json");
  fs::copy_file(root_ / "tiny" / "config.json", dir_ / "config.json");
  fs::remove(dir_ / "tokenizer.json");
  ASSERT_EQ(::mkfifo((dir_ / "tokenizer.json").c_str(), 0600), 0);
  expect_refused(dir_.string(), {"tokenizer.json: not a regular file (a FIFO)"});
}

}  // namespace
}  // namespace cedar
