// Dialect B (ds4's layout, model/gguf_dialect_ds4.cpp): every preset's config written as ds4's keys
// reads back as that config; ds4's Engram projection names; and a file whose keys disagree with
// its config JSON or with cedar's Engram derivation is refused naming the key (each case made by
// patching one value of a correct file, as a hostile or broken converter would leave it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/gguf_dialect.h"
#include "model/gguf_writer.h"
#include "model/presets.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;

ModelConfig preset(const std::string& name) {
  ModelConfig c = preset_config(name);
  c.validate();
  return c;
}

std::vector<int32_t> token_map(const ModelConfig& c) {
  std::vector<int32_t> map(size_t(c.vocab_size));
  for (size_t i = 0; i < map.size(); ++i)
    map[i] = int32_t(i % size_t(c.engram_compressed_vocab_size));
  return map;
}

// The bytes of a file with ds4's keys for `c` and its tokens (no tensors: the keys decide).
std::vector<uint8_t> ds4_file(const ModelConfig& c) {
  gguf::Writer w(16384);
  gguf::write_ds4_keys(c, c.engram_layer_ids.empty() ? std::vector<int32_t>{} : token_map(c), w);
  w.add_string_array("tokenizer.ggml.tokens", std::vector<std::string>(size_t(c.vocab_size), "t"));
  const std::string path =
      (fs::temp_directory_path() / ("cedar-ds4-" + std::to_string(::getpid()) + ".gguf")).string();
  w.write(path);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> b{std::istreambuf_iterator<char>(in), {}};
  fs::remove(path);
  return b;
}

// The offset of the value of `key` (after its type id; an array's after its element type and
// count) in a file's bytes.
size_t value_at(const std::vector<uint8_t>& b, const std::string& key, bool array) {
  std::string needle(8, '\0');
  const uint64_t n = key.size();
  std::memcpy(needle.data(), &n, 8);
  needle += key;
  const std::string_view all(reinterpret_cast<const char*>(b.data()), b.size());
  const size_t at = all.find(needle);
  EXPECT_NE(at, std::string_view::npos) << key;
  return at + needle.size() + 4 + (array ? 4 + 8 : 0);
}

// config_from_gguf's error for the file, "" when it loads
std::string load_error(const std::vector<uint8_t>& b) {
  try {
    const gguf::Header h = gguf::parse_header(b.data(), b.size(), "ds4.gguf");
    gguf::config_from_gguf(h, "ds4.gguf");
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

TEST(GgufDs4, PresetConfigsRoundTripThroughDs4Keys) {
  for (const std::string& name : preset_names()) {
    const ModelConfig c = preset(name);
    const std::vector<uint8_t> b = ds4_file(c);
    const gguf::Header h = gguf::parse_header(b.data(), b.size(), "ds4.gguf");
    ASSERT_EQ(gguf::detect_dialect(h).dialect, gguf::Dialect::kB) << name;
    const ModelConfig r = gguf::config_from_gguf(h, "ds4.gguf");
    // the text model: everything but the DSpark stages and the vision tower
    ModelConfig want = c;
    want.num_nextn_predict_layers = 0;
    want.has_vision = false;
    want.validate();
    EXPECT_EQ(r.to_json().dump(), want.to_json().dump()) << name;
  }
}

TEST(GgufDs4, EngramProjectionsHaveDs4Names) {
  using gguf::Dialect;
  EXPECT_EQ(gguf::gguf_tensor_name("layers.1.engram.wkv.weight", nullptr, Dialect::kB),
            "blk.1.engram_kv.weight");
  EXPECT_EQ(gguf::gguf_tensor_name("layers.1.engram.wkv.scale", nullptr, Dialect::kB),
            "blk.1.engram_kv.weight");
  EXPECT_EQ(gguf::gguf_tensor_name("layers.1.engram.q_weight", nullptr, Dialect::kB),
            "blk.1.engram_q_norm.weight");
  EXPECT_EQ(gguf::gguf_tensor_name("layers.1.engram.k_weight", nullptr, Dialect::kB),
            "blk.1.engram_k_norm.weight");
  EXPECT_EQ(gguf::gguf_tensor_name("layers.1.engram.wkv.weight"), "blk.1.engram_wkv.weight");
  EXPECT_EQ(gguf::gguf_tensor_name("layers.1.engram.embed.weight", nullptr, Dialect::kB),
            "blk.1.engram_embd.weight");
  EXPECT_EQ(gguf::gguf_tensor_name("layers.2.attn.wq_a.weight", nullptr, Dialect::kB),
            "blk.2.attn_q_a.weight");
}

struct Patch {
  const char* key;
  bool array;
  uint8_t delta;       // added to the value's first byte (or, for a string, its last)
  const char* expect;  // in the error
};

TEST(GgufDs4, KeysThatDisagreeAreRefusedByName) {
  const ModelConfig c = preset("tiny");
  ASSERT_FALSE(c.engram_layer_ids.empty());
  const std::vector<uint8_t> good = ds4_file(c);
  ASSERT_EQ(load_error(good), "");
  const Patch patches[] = {
      {"deepseek41.hidden_size", false, 1, "deepseek41.hidden_size disagrees"},
      {"deepseek41.rms_norm_eps", false, 1, "deepseek41.rms_norm_eps disagrees"},
      {"deepseek41.compress_ratios", true, 1, "deepseek41.compress_ratios disagrees"},
      {"deepseek41.kv_source_layer_ids", true, 1, "deepseek41.kv_source_layer_ids disagrees"},
      {"deepseek41.engram.layer_ids", true, 1, "deepseek41.engram.layer_ids differ"},
      {"deepseek41.engram.rows", true, 1, "deepseek41.engram.rows differ"},
      {"deepseek41.engram.primes", true, 2, "deepseek41.engram.primes differ"},
      {"deepseek41.engram.multipliers", true, 2, "deepseek41.engram.multipliers differ"},
      {"deepseek41.engram.compressed_vocab_size", false, 1, "compressed_vocab_size differs"},
      {"deepseek41.engram.pad_id", false, 1, "deepseek41.engram.pad_id is not"},
      {"deepseek41.engram.encoding", false, 1, "is not e4m3_e8m0_32_row264"},
  };
  for (const Patch& p : patches) {
    std::vector<uint8_t> b = good;
    const bool str = std::string(p.key).ends_with("encoding");
    size_t at = value_at(b, p.key, p.array);
    if (str) {  // the string's last byte
      uint64_t n;
      std::memcpy(&n, &b[at], 8);
      at += 8 + n - 1;
    }
    b[at] = uint8_t(b[at] + p.delta);
    const std::string e = load_error(b);
    EXPECT_NE(e.find(p.expect), std::string::npos) << p.key << ": '" << e << "'";
  }
  // a token map entry outside the compressed vocabulary
  {
    std::vector<uint8_t> b = good;
    const size_t at = value_at(b, "deepseek41.engram.token_map", true);
    const uint32_t big = uint32_t(c.engram_compressed_vocab_size);
    std::memcpy(&b[at + 4 * 5], &big, 4);
    EXPECT_NE(load_error(b).find("outside the compressed vocabulary"), std::string::npos);
  }
  // a token map that does not reach the last compressed id (only token 99091 maps there)
  {
    std::vector<uint8_t> b = good;
    const size_t at = value_at(b, "deepseek41.engram.token_map", true);
    const int64_t last = c.engram_compressed_vocab_size - 1;
    ASSERT_GE(last + c.engram_compressed_vocab_size, c.vocab_size);  // token `last` only
    std::memset(&b[at + 4 * size_t(last)], 0, 4);
    EXPECT_NE(load_error(b).find("spans 99091 compressed ids"), std::string::npos) << load_error(b);
  }
  // the config JSON itself: not an object, and a value the config validation refuses
  {
    std::vector<uint8_t> b = good;
    const size_t at = value_at(b, "deepseek41.config", false) + 8;
    ASSERT_EQ(b[at], '{');
    b[at] = '[';
    const std::string e = load_error(b);
    EXPECT_NE(e.find("deepseek41.config"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace cedar
