// A GGUF file as a checkpoint (model/gguf_source.cpp): the release quantizers give back the values
// of an exact decomposition and count the ones they cannot hold; a tiny model converted to GGUF
// opens as the same release tensors byte for byte (FP8 weights, FP4 experts and the Engram tables
// re-encoded, the rest in place); the tokenizer rebuilt from llama.cpp's keys is the
// tokenizer.json's; a transposed tensor is refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "model/checkpoint.h"
#include "model/gguf.h"
#include "model/gguf_convert.h"
#include "model/gguf_tokenizer.h"
#include "model/make_model.h"
#include "model/weight_quant.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"
#include "text/engram_token_map.h"
#include "text/tokenizer.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;

TEST(WeightQuant, ExactValuesComeBackAndOthersAreCounted) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 0.03f);
  const int64_t o = 40, i = 64;  // a ragged row block
  std::vector<float> w(size_t(o * i));
  for (float& v : w) v = n(rng);
  std::vector<uint8_t> codes(w.size()), scales(2 * 2);
  EXPECT_GT(quantize_fp8_blocks(w.data(), o, i, codes.data(), scales.data()), 0);
  // the quantized values are exact: a second pass keeps every code and scale
  std::vector<float> q(w.size());
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < i; ++c)
      q[size_t(r * i + c)] =
          e4m3_to_f32(codes[size_t(r * i + c)]) * ue8m0_to_f32(scales[size_t(r / 32 * 2 + c / 32)]);
  std::vector<uint8_t> codes2(w.size()), scales2(4);
  EXPECT_EQ(quantize_fp8_blocks(q.data(), o, i, codes2.data(), scales2.data()), 0);
  EXPECT_EQ(codes2, codes);  // 448's headroom: no block's largest code rounds below 224 here
  EXPECT_EQ(scales2, scales);
  q[7] = std::nextafter(q[7], 1.0f);  // one value off the grid
  EXPECT_EQ(quantize_fp8_blocks(q.data(), o, i, codes2.data(), scales2.data()), 1);

  std::vector<uint8_t> packed(size_t(o * i / 2)), s4(size_t(o * i / 32));
  quantize_fp4(w.data(), o, i, packed.data(), s4.data());
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < i; ++c) {
      const uint8_t b = packed[size_t(r * i / 2 + c / 2)];
      q[size_t(r * i + c)] = e2m1_to_f32(c % 2 ? fp4_hi(b) : fp4_lo(b)) *
                             ue8m0_to_f32(s4[size_t(r * i / 32 + c / 32)]);
    }
  // exact again, though a block whose largest code rounded down to 3 may now be split as codes
  // twice as large under half the scale: compare values
  std::vector<uint8_t> packed2(packed.size()), s42(s4.size());
  EXPECT_EQ(quantize_fp4(q.data(), o, i, packed2.data(), s42.data()), 0);
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < i; ++c) {
      const uint8_t b = packed2[size_t(r * i / 2 + c / 2)];
      ASSERT_EQ(e2m1_to_f32(c % 2 ? fp4_hi(b) : fp4_lo(b)) *
                    ue8m0_to_f32(s42[size_t(r * i / 32 + c / 32)]),
                q[size_t(r * i + c)]);
    }
}

// An FP8 weight (32x32 blocks, or per row for the Engram tables) or FP4 expert as fp32 values.
std::vector<float> values(const TensorView& w, const TensorView& s) {
  const bool fp4 = w.dtype == DType::I8;
  const int64_t o = w.dim(0), i = fp4 ? 2 * w.dim(1) : w.dim(1);
  const bool per_row = fp4 || s.dim(0) == o;
  std::vector<float> v(size_t(o * i));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < i; ++c) {
      const float sc = ue8m0_to_f32(s.data[(per_row ? r : r / 32) * s.dim(1) + c / 32]);
      const uint8_t b = fp4 ? w.data[r * (i / 2) + c / 2] : w.data[r * i + c];
      v[size_t(r * i + c)] =
          sc * (fp4 ? e2m1_to_f32(c % 2 ? fp4_hi(b) : fp4_lo(b)) : e4m3_to_f32(b));
    }
  return v;
}

class GgufSource : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("cedar_gguf_source_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    MakeModelOptions o;
    o.preset = "tiny";
    o.seed = 11;
    o.out_dir = (root_ / "tiny").string();
    o.tokenizer = CEDAR_DEFAULT_TOKENIZER;
    make_model(o);
    dir_ = Checkpoint::open(o.out_dir).release();
    // llama.cpp's keys only (no tokenizer.huggingface.json): the tokenizer is rebuilt from them
    const std::string json = dir_->tokenizer_json();
    GgufTokenizerKeys keys = tokenizer_keys(json, dir_->config().vocab_size, o.out_dir);
    keys.engram_map =
        text::build_engram_token_map(text::Tokenizer::from_json_text(json, o.out_dir)).map;
    keys.hf_json.clear();
    write_gguf(*dir_, keys, gguf_path());
  }
  static void TearDownTestSuite() {
    delete dir_;
    fs::remove_all(root_);
  }
  static std::string gguf_path() { return (root_ / "tiny.gguf").string(); }

  static fs::path root_;
  static Checkpoint* dir_;
};
fs::path GgufSource::root_;
Checkpoint* GgufSource::dir_ = nullptr;

TEST_F(GgufSource, OpensAsTheSameReleaseTensors) {
  const auto g = Checkpoint::open(gguf_path());
  EXPECT_EQ(g->format(), Checkpoint::Format::kGguf);
  EXPECT_EQ(g->load_stats().inexact_values, 0);
  EXPECT_GT(g->load_stats().in_place, 0);
  EXPECT_GT(g->load_stats().reencoded, 0);
  int compared = 0;
  // every tensor of the file's text model (DSpark and vision are sidecars in the GGUF world)
  for (const auto& [name, u] : g->tensors()) {
    ASSERT_TRUE(dir_->has(name)) << name;
    const TensorView& t = dir_->get(name);
    ASSERT_EQ(u.dtype, t.dtype) << name;
    ASSERT_EQ(u.shape, t.shape) << name;
    ASSERT_EQ(u.nbytes, t.nbytes) << name;
    if (t.dtype == DType::F8_E8M0) continue;  // compared through their weights
    if (t.dtype == DType::F8_E4M3 || t.dtype == DType::I8) {
      // the same values, possibly as another power-of-two split (a block whose largest code
      // rounded to 224 or less comes back as codes twice as large under half the scale)
      const std::string sn = name.substr(0, name.size() - 7) + ".scale";
      ASSERT_EQ(values(t, dir_->get(sn)), values(u, g->get(sn))) << name;
    } else {
      ASSERT_EQ(std::memcmp(u.data, t.data, t.nbytes), 0) << name;
    }
    ++compared;
  }
  EXPECT_GT(compared, 100);
  EXPECT_EQ(size_t(g->load_stats().in_place + g->load_stats().reencoded), g->tensors().size());
  EXPECT_EQ(g->config().num_nextn_predict_layers, 0);
}

TEST_F(GgufSource, TokenizerFromLlamaCppKeysIsTheTokenizerJson) {
  const auto g = Checkpoint::open(gguf_path());
  const text::Tokenizer a = text::Tokenizer::from_json_text(dir_->tokenizer_json(), "dir");
  const text::Tokenizer b = text::Tokenizer::from_json_text(g->tokenizer_json(), "gguf");
  ASSERT_EQ(a.vocab_size(), b.vocab_size());
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    ASSERT_EQ(a.id_to_token(id), b.id_to_token(id)) << id;
    ASSERT_EQ(a.is_special(id), b.is_special(id)) << id;
    ASSERT_EQ(a.is_added(id), b.is_added(id)) << id;
  }
  for (const char* s :
       {"Hello, world! 1234567 numbers", "日本語のテキストと中文混合", "  spaces\n\n\tand tabs ",
        "<｜User｜>hi<｜Assistant｜></think>ok<｜end▁of▁sentence｜>", "émoji 🤖 ok?!..."}) {
    EXPECT_EQ(a.encode(s, false), b.encode(s, false)) << s;
    EXPECT_EQ(a.encode(s, true), b.encode(s, true)) << s;
  }
  EXPECT_EQ(g->engram_token_map(), text::build_engram_token_map(b).map);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
// Where the tensor table's entry of `tensor` (its length-prefixed name) starts its name.
size_t table_entry(const std::string& bytes, const std::string& tensor) {
  size_t at = bytes.find(tensor);
  while (at != std::string::npos) {
    uint64_t len = 0;
    std::memcpy(&len, bytes.data() + at - 8, 8);
    if (len == tensor.size()) break;
    at = bytes.find(tensor, at + 1);
  }
  EXPECT_NE(at, std::string::npos) << tensor;
  return at;
}

// Swaps the two dimensions of one 2-D tensor in a copy of the file's tensor table.
std::string with_transposed(const std::string& path, const std::string& tensor) {
  std::string bytes = file_bytes(path);
  const size_t dims = table_entry(bytes, tensor) + tensor.size();
  uint32_t n = 0;
  std::memcpy(&n, bytes.data() + dims, 4);
  EXPECT_EQ(n, 2u);
  std::swap_ranges(bytes.begin() + long(dims + 4), bytes.begin() + long(dims + 12),
                   bytes.begin() + long(dims + 12));
  const std::string out = path + ".transposed.gguf";
  std::ofstream(out, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return out;
}

TEST_F(GgufSource, TransposedTensorIsRefusedByName) {
  const std::string bad = with_transposed(gguf_path(), "blk.2.attn_output_a.weight");
  try {
    Checkpoint::open(bad);
    FAIL() << "a transposed attn_output_a loaded";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("blk.2.attn_output_a.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("stored transposed"), std::string::npos) << m;
  }
}

// A tensor the model does not read (here a renamed one, as a file of another layout has) is
// refused by its name before anything is looked for.
TEST_F(GgufSource, UnexpectedTensorIsRefusedByName) {
  std::string bytes = file_bytes(gguf_path());
  const std::string from = "blk.3.attn_q_a_norm.weight", to = "blk.3.attn_q_a_nxrm.weight";
  bytes.replace(table_entry(bytes, from), from.size(), to);
  const std::string bad = gguf_path() + ".renamed.gguf";
  std::ofstream(bad, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  try {
    Checkpoint::open(bad);
    FAIL() << "a file with an unexpected tensor loaded";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'" + to + "' is not one of the model's"), std::string::npos) << m;
  }
}

TEST_F(GgufSource, OpenSniffsTheFormat) {
  EXPECT_THROW(Checkpoint::open((root_ / "missing").string()), std::runtime_error);
  const std::string text = (root_ / "not_a_model.txt").string();
  std::ofstream(text) << "hello";
  try {
    Checkpoint::open(text);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a model directory or a GGUF file"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace cedar
