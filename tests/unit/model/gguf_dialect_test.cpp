// The deepseek41 GGUF layouts (model/gguf_dialect): a preset's config written as dialect-A keys
// (plus the layer-role tensors) reads back as the same config; every release tensor of a preset
// has a dialect-A name; the layouts of spec §6 are told apart; wrong constants are refused.
#include "model/gguf_dialect.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/presets.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;

struct File {
  std::vector<uint8_t> bytes;
  gguf::Header h;
};

// The keys of `c` and one placeholder F32 tensor per layer-role tensor the config implies.
// `tweak` may change the writer before the tensors are added.
// `map_vocab` (0: the config's): the compressed vocabulary the token map spans.
File write_preset(const ModelConfig& c, const std::function<void(gguf::Writer&)>& tweak = {},
                  int64_t map_vocab = 0) {
  if (map_vocab == 0) map_vocab = c.engram_compressed_vocab_size;
  gguf::Writer w;
  gguf::write_config_keys(c, w);
  std::vector<std::string> tokens(size_t(c.vocab_size), "t");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  if (!c.engram_layer_ids.empty()) {
    std::vector<int32_t> map(size_t(c.vocab_size));
    for (size_t i = 0; i < map.size(); ++i) map[i] = int32_t(i % size_t(map_vocab));
    w.add_i32_array("deepseek41.engram.token_map", map);
    w.add_u32("deepseek41.engram.pad_id", uint32_t(map[size_t(c.engram_pad_token_id)]));
  }
  if (tweak) tweak(w);
  auto one = [](uint8_t* p) { std::memset(p, 0, 4); };
  for (int l : c.kv_source_layer_ids)
    w.add_tensor("blk." + std::to_string(l) + ".attn_compressor_kv.weight", gguf::kF32, {1}, one);
  for (int l : c.index_source_layer_ids)
    w.add_tensor("blk." + std::to_string(l) + ".indexer.attn_q_b.weight", gguf::kF32, {1}, one);
  for (int l : c.engram_layer_ids)
    w.add_tensor("blk." + std::to_string(l) + ".engram_embd.weight", gguf::kF32, {1}, one);
  const std::string path =
      (fs::temp_directory_path() / ("cedar-dialect-" + std::to_string(::getpid()) + ".gguf"))
          .string();
  w.write(path);
  File f;
  std::ifstream in(path, std::ios::binary);
  f.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  fs::remove(path);
  f.h = gguf::parse_header(f.bytes.data(), f.bytes.size(), "test.gguf");
  return f;
}

TEST(GgufDialect, PresetConfigsRoundTrip) {
  for (const std::string& name : preset_names()) {
    ModelConfig c = preset_config(name);
    c.validate();
    const File f = write_preset(c);
    EXPECT_EQ(gguf::detect_dialect(f.h).dialect, gguf::Dialect::kA) << name;
    const ModelConfig r = gguf::config_from_gguf(f.h, "test.gguf");
    // the backbone (DSpark stages and the vision tower are not in a text GGUF)
    EXPECT_EQ(r.num_hidden_layers, c.num_hidden_layers) << name;
    EXPECT_EQ(r.hidden_size, c.hidden_size);
    EXPECT_EQ(r.vocab_size, c.vocab_size);
    EXPECT_EQ(r.num_attention_heads, c.num_attention_heads);
    EXPECT_EQ(r.head_dim, c.head_dim);
    EXPECT_EQ(r.q_lora_rank, c.q_lora_rank);
    EXPECT_EQ(r.o_lora_rank, c.o_lora_rank);
    EXPECT_EQ(r.o_groups, c.o_groups);
    EXPECT_EQ(r.n_routed_experts, c.n_routed_experts);
    EXPECT_EQ(r.num_experts_per_tok, c.num_experts_per_tok);
    EXPECT_EQ(r.moe_intermediate_size, c.moe_intermediate_size);
    EXPECT_EQ(r.compress_ratios, c.compress_ratios);
    EXPECT_EQ(r.kv_source_layer_ids, c.kv_source_layer_ids);
    EXPECT_EQ(r.index_source_layer_ids, c.index_source_layer_ids);
    EXPECT_EQ(r.candidate_source_layer_id, c.candidate_source_layer_id);
    EXPECT_EQ(r.candidate_topk_blocks, c.candidate_topk_blocks);
    EXPECT_EQ(r.candidate_block_size, c.candidate_block_size);
    EXPECT_EQ(r.index_topk, c.index_topk);
    EXPECT_EQ(r.engram_layer_ids, c.engram_layer_ids);
    EXPECT_EQ(r.engram_num_embeddings, c.engram_num_embeddings);
    EXPECT_EQ(r.engram_pad_token_id, c.engram_pad_token_id);
    // fp32 keys: what the engine uses (it takes these as floats)
    EXPECT_EQ(float(r.rms_norm_eps), float(c.rms_norm_eps));
    EXPECT_EQ(float(r.hc_eps), float(c.hc_eps));
    EXPECT_EQ(r.rope_theta, c.rope_theta);
    EXPECT_EQ(r.compress_rope_theta, c.compress_rope_theta);
    EXPECT_EQ(r.rope_factor, c.rope_factor);
    EXPECT_EQ(r.original_max_position_embeddings, c.original_max_position_embeddings);
    EXPECT_EQ(r.routed_scaling_factor, c.routed_scaling_factor);
    EXPECT_EQ(r.swiglu_limit, c.swiglu_limit);
    ASSERT_EQ(r.layers.size(), c.layers.size());
    for (size_t l = 0; l < c.layers.size(); ++l) {
      EXPECT_EQ(r.layers[l].role, c.layers[l].role) << name << " layer " << l;
      EXPECT_EQ(r.layers[l].kv_source, c.layers[l].kv_source);
      EXPECT_EQ(r.layers[l].index_source, c.layers[l].index_source);
    }
  }
}

TEST(GgufDialect, EveryReleaseTensorOfTheTextModelHasADialectAName) {
  ModelConfig c = preset_config("tiny");
  c.validate();
  std::map<std::string, std::set<int>> seen;  // gguf name -> experts (or -1)
  for (const ExpectedTensor& t : expected_tensors(c)) {
    int e = -2;
    const std::string g = gguf::gguf_tensor_name(t.name, &e);
    const bool outside = t.name.rfind("mtp.", 0) == 0 || t.name.rfind("vision.", 0) == 0 ||
                         t.name.rfind("aligner.", 0) == 0 || t.name.rfind("image_", 0) == 0;
    if (outside) {
      EXPECT_EQ(g, "") << t.name;
      continue;
    }
    ASSERT_NE(g, "") << t.name;
    const bool scale = t.name.ends_with(".scale");
    if (t.name.find(".experts.") != std::string::npos) {
      EXPECT_GE(e, 0) << t.name;
    } else {
      EXPECT_EQ(e, -1) << t.name;
    }
    // a weight and its scale share the GGUF tensor; no two weights share one
    if (!scale) {
      EXPECT_TRUE(seen[g].insert(e).second) << t.name << " -> " << g;
    }
  }
  EXPECT_EQ(gguf::gguf_tensor_name("layers.3.attn.wq_a.weight"), "blk.3.attn_q_a.weight");
  EXPECT_EQ(gguf::gguf_tensor_name("layers.3.attn.wq_a.scale"), "blk.3.attn_q_a.weight");
  int e = 0;
  EXPECT_EQ(gguf::gguf_tensor_name("layers.0.ffn.experts.5.w2.weight", &e),
            "blk.0.ffn_down_exps.weight");
  EXPECT_EQ(e, 5);
  EXPECT_EQ(gguf::gguf_tensor_name("embed.weight"), "token_embd.weight");
}

TEST(GgufDialect, LayoutsAreToldApartAndRefusedByName) {
  ModelConfig c = preset_config("tiny");
  c.validate();
  auto detect = [&](const std::function<void(gguf::Writer&)>& tweak) {
    return gguf::detect_dialect(write_preset(c, tweak).h);
  };
  EXPECT_EQ(
      detect([](gguf::Writer& w) { w.add_string("deepseek41.engram.encoding", "e4m3"); }).dialect,
      gguf::Dialect::kB);
  EXPECT_EQ(
      detect([](gguf::Writer& w) { w.add_u32("deepseek41.engram.num_embeddings", 1); }).dialect,
      gguf::Dialect::kD);
  EXPECT_EQ(
      detect([](gguf::Writer& w) { w.add_u32("deepseek41.engram.head_bucket_sizes", 1); }).dialect,
      gguf::Dialect::kC);
  // a V4.1 file labelled deepseek4
  {
    gguf::Writer w;
    w.add_string("general.architecture", "deepseek4");
    w.add_u32("deepseek4.block_count", 40);
    w.add_tensor("blk.1.engram_embd.weight", gguf::kF32, {1}, [](uint8_t*) {});
    const std::string p = (fs::temp_directory_path() / "cedar-e.gguf").string();
    w.write(p);
    std::ifstream in(p, std::ios::binary);
    std::vector<uint8_t> b{std::istreambuf_iterator<char>(in), {}};
    fs::remove(p);
    const gguf::Header h = gguf::parse_header(b.data(), b.size(), "e.gguf");
    const gguf::DialectInfo d = gguf::detect_dialect(h);
    EXPECT_EQ(d.dialect, gguf::Dialect::kMislabelledV4_1);
    try {
      gguf::config_from_gguf(h, "e.gguf");
      FAIL();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("converted before 2026-09-10"), std::string::npos)
          << e.what();
    }
  }
  // dialect A without the Engram constants (files published before 2026-09-11)
  {
    gguf::Writer w;
    w.add_string("general.architecture", "deepseek41");
    w.add_i32_array("deepseek41.engram.layer_ids", {1, 14});
    w.add_tensor("blk.1.engram_embd.weight", gguf::kF32, {1}, [](uint8_t*) {});
    const std::string p = (fs::temp_directory_path() / "cedar-a3.gguf").string();
    w.write(p);
    std::ifstream in(p, std::ios::binary);
    std::vector<uint8_t> b{std::istreambuf_iterator<char>(in), {}};
    fs::remove(p);
    const gguf::Header h = gguf::parse_header(b.data(), b.size(), "a3.gguf");
    EXPECT_EQ(gguf::detect_dialect(h).dialect, gguf::Dialect::kAIncomplete);
    try {
      gguf::config_from_gguf(h, "a3.gguf");
      FAIL();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("deepseek41.engram.multipliers"), std::string::npos)
          << e.what();
    }
  }
}

TEST(GgufDialect, ConstantsThatAreNotV41AreRefused) {
  ModelConfig c = preset_config("tiny");
  c.validate();
  // multipliers made for another compressed vocabulary than the token map spans (a file built
  // with another tokenizer or random stream)
  ModelConfig other = c;
  other.engram_compressed_vocab_size = c.engram_compressed_vocab_size - 1;
  const File f = write_preset(other, {}, c.engram_compressed_vocab_size);
  try {
    gguf::config_from_gguf(f.h, "m.gguf");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("multipliers"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cedar
