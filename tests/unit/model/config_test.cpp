// ModelConfig: parsing the released config (HF nested and flat), the derived role table of
// spec §2.2 for all 40 layers, the to_json round trip, and one refusal per validation rule, each
// naming its key.
#include "model/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace cedar {
namespace {

using nlohmann::json;

std::string fixture_path() {
  return std::string(CEDAR_SOURCE_DIR) + "/tests/fixtures/released-config.json";
}

json released_json() {
  std::ifstream f(fixture_path());
  EXPECT_TRUE(bool(f)) << fixture_path();
  return json::parse(f);
}

// Expects from_json(j) to throw a runtime_error whose message contains every one of `parts`.
void expect_refused(const json& j, std::initializer_list<std::string> parts) {
  try {
    ModelConfig::from_json(j);
    ADD_FAILURE() << "config was accepted; expected an error mentioning " << *parts.begin();
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("config.json: ", 0), 0u) << m;
    for (const auto& p : parts)
      EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

void expect_refused_after(const std::function<void(json&)>& mutate,
                          std::initializer_list<std::string> parts) {
  json j = released_json();
  mutate(j);
  expect_refused(j, parts);
}

TEST(Config, ParsesReleasedValues) {
  ModelConfig c = ModelConfig::from_file(fixture_path());
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1280);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_intermediate_size, 2304);
  EXPECT_EQ(c.scoring_func, "sqrtsoftplus");
  EXPECT_EQ(c.topk_method, "noaux_tc");
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_DOUBLE_EQ(c.gate_temp, 1.0);
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 10.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-20);
  EXPECT_EQ(c.sliding_window, 128);
  ASSERT_EQ(c.compress_ratios.size(), 43u);
  EXPECT_EQ(c.kv_source_layer_ids, (std::vector<int>{2, 8, 14, 20}));
  EXPECT_EQ(c.index_source_layer_ids, (std::vector<int>{2, 8, 14, 20, 24, 28, 32, 36}));
  EXPECT_EQ(c.candidate_source_layer_id, 20);
  EXPECT_EQ(c.candidate_topk_blocks, 2048);
  EXPECT_EQ(c.candidate_block_size, 8);
  EXPECT_EQ(c.index_n_heads, 32);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(c.hc_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_DOUBLE_EQ(c.compress_rope_theta, 160000);
  EXPECT_DOUBLE_EQ(c.rope_factor, 16);
  EXPECT_DOUBLE_EQ(c.beta_fast, 32);
  EXPECT_DOUBLE_EQ(c.beta_slow, 1);
  EXPECT_EQ(c.original_max_position_embeddings, 65536);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  EXPECT_EQ(c.engram_layer_ids, (std::vector<int>{1, 14}));
  EXPECT_EQ(c.engram_num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(c.engram_max_ngram_size, 4);
  EXPECT_EQ(c.engram_vocab_size, 16000000);
  EXPECT_EQ(c.engram_n_heads, 8);
  EXPECT_EQ(c.engram_head_dim, 256);
  EXPECT_EQ(c.engram_pad_token_id, 2);
  EXPECT_EQ(c.engram_compressed_vocab_size, 99092);
  EXPECT_EQ(c.num_nextn_predict_layers, 3);
  EXPECT_EQ(c.dspark_block_size, 5);
  EXPECT_EQ(c.dspark_noise_token_id, 128799);
  EXPECT_EQ(c.dspark_target_layer_ids, (std::vector<int>{37, 38, 39}));
  EXPECT_EQ(c.dspark_markov_rank, 256);
  EXPECT_EQ(c.dspark_n_routed_experts, 128);
  EXPECT_EQ(c.dspark_num_experts_per_tok, 3);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.pad_token_id, 2);
  EXPECT_EQ(c.image_token_id, 129264);
  EXPECT_TRUE(c.has_vision);
  EXPECT_EQ(c.quant_method, "fp8");
  EXPECT_EQ(c.weight_block_size, (std::vector<int>{32, 32}));
  EXPECT_EQ(c.scale_fmt, "ue8m0");
  EXPECT_EQ(c.expert_dtype, "fp4");
}

// Spec §2.2, written out row by row: {ratio, role, kv source, top-k source}.
struct Row {
  int ratio;
  LayerRole role;
  int kv, topk;
};

std::vector<Row> spec_table() {
  using R = LayerRole;
  std::vector<Row> t;
  t.push_back({0, R::SWA, -1, -1});
  t.push_back({0, R::SWA, -1, -1});
  for (int src : {2, 8, 14}) {
    t.push_back({2, R::Full, src, src});
    for (int i = 0; i < 5; ++i) t.push_back({2, R::Reuse, src, src});
  }
  t.push_back({1, R::Full, 20, 20});
  for (int i = 0; i < 3; ++i) t.push_back({1, R::Reuse, 20, 20});
  for (int src : {24, 28, 32, 36}) {
    t.push_back({1, R::Reindex, 20, src});
    for (int i = 0; i < 3; ++i) t.push_back({1, R::Reuse, 20, src});
  }
  return t;
}

void check_release_roles(const ModelConfig& c) {
  const auto t = spec_table();
  ASSERT_EQ(t.size(), 40u);
  ASSERT_EQ(c.layers.size(), 40u);
  int counts[4] = {0, 0, 0, 0};
  for (int l = 0; l < 40; ++l) {
    const LayerPlan& p = c.plan(l);
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_EQ(p.layer, l);
    EXPECT_EQ(p.ratio, t[size_t(l)].ratio);
    EXPECT_EQ(p.role, t[size_t(l)].role) << layer_role_name(p.role);
    EXPECT_EQ(p.kv_source, t[size_t(l)].kv);
    EXPECT_EQ(p.index_source, t[size_t(l)].topk);
    EXPECT_EQ(p.is_decoder, l >= 20);
    EXPECT_EQ(p.is_candidate_source, l == 20);
    EXPECT_EQ(p.uses_candidates, l == 24 || l == 28 || l == 32 || l == 36);
    EXPECT_EQ(p.is_kv_source, l == 2 || l == 8 || l == 14 || l == 20);
    EXPECT_EQ(p.is_index_source, p.role == LayerRole::Full || p.role == LayerRole::Reindex);
    EXPECT_EQ(p.has_engram, l == 1 || l == 14);
    EXPECT_EQ(p.engram_index, l == 1 ? 0 : l == 14 ? 1 : -1);
    counts[int(p.role)]++;
  }
  // "4 Full, 4 Reindex, 30 Reuse, 2 SWA backbone layers"
  EXPECT_EQ(counts[int(LayerRole::SWA)], 2);
  EXPECT_EQ(counts[int(LayerRole::Full)], 4);
  EXPECT_EQ(counts[int(LayerRole::Reindex)], 4);
  EXPECT_EQ(counts[int(LayerRole::Reuse)], 30);
}

TEST(Config, ReleasedRoleTableMatchesSpec) {
  check_release_roles(ModelConfig::from_file(fixture_path()));
}

TEST(Config, FlatTextConfigParsesTheSame) {
  json nested = released_json();
  json flat = nested["text_config"];
  flat["quantization_config"] = nested["quantization_config"];
  ModelConfig c = ModelConfig::from_json(flat);
  check_release_roles(c);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_FALSE(c.has_vision);
  EXPECT_EQ(c.weight_block_size, (std::vector<int>{32, 32}));
}

TEST(Config, ToJsonRoundTripsAndKeepsReleasedKeys) {
  json orig = released_json();
  ModelConfig c = ModelConfig::from_json(orig);
  json out = c.to_json();
  // Every released text key comes back with the same value (numbers compare by value).
  for (auto it = orig["text_config"].begin(); it != orig["text_config"].end(); ++it) {
    ASSERT_TRUE(out["text_config"].contains(it.key())) << it.key();
    EXPECT_EQ(out["text_config"][it.key()], it.value()) << it.key();
  }
  for (auto it = orig["quantization_config"].begin(); it != orig["quantization_config"].end(); ++it)
    EXPECT_EQ(out["quantization_config"][it.key()], it.value()) << it.key();
  for (const char* k :
       {"bos_token_id", "eos_token_id", "pad_token_id", "image_token_id", "model_type"})
    EXPECT_EQ(out[k], orig[k]) << k;
  EXPECT_TRUE(out.contains("vision_config"));
  ModelConfig back = ModelConfig::from_json(out);
  EXPECT_EQ(back.to_json(), out);
  check_release_roles(back);
}

TEST(Config, OptionalSectionsMayBeAbsent) {
  json j = released_json();
  auto& t = j["text_config"];
  for (const char* k :
       {"engram_layer_ids", "engram_num_embeddings", "engram_max_ngram_size", "engram_vocab_size",
        "engram_n_heads", "engram_head_dim", "engram_pad_token_id", "engram_compressed_vocab_size",
        "num_nextn_predict_layers", "rope_scaling", "candidate_source_layer_id",
        "candidate_topk_blocks", "candidate_block_size"})
    t.erase(k);
  j.erase("vision_config");
  ModelConfig c = ModelConfig::from_json(j);
  EXPECT_TRUE(c.engram_layer_ids.empty());
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_EQ(c.original_max_position_embeddings, 0);
  EXPECT_EQ(c.candidate_source_layer_id, -1);
  EXPECT_FALSE(c.has_vision);
  EXPECT_FALSE(c.plan(30).is_decoder);
  EXPECT_FALSE(c.plan(24).uses_candidates);
  EXPECT_EQ(c.plan(24).role, LayerRole::Reindex);
  // and it round-trips without the absent sections
  json out = c.to_json();
  EXPECT_FALSE(out["text_config"].contains("engram_layer_ids"));
  EXPECT_FALSE(out["text_config"].contains("candidate_source_layer_id"));
  EXPECT_EQ(ModelConfig::from_json(out).to_json(), out);
}

TEST(Config, RefusesV4BlockSize) {
  expect_refused_after(
      [](json& j) {
        j["quantization_config"]["weight_block_size"] = {128, 128};
      },
      {"quantization_config.weight_block_size", "32x32", "[128,128]"});
}

TEST(Config, RefusesQuantizationVariants) {
  expect_refused_after([](json& j) { j["quantization_config"]["scale_fmt"] = "fp32"; },
                       {"quantization_config.scale_fmt"});
  expect_refused_after([](json& j) { j["quantization_config"]["expert_dtype"] = "fp8"; },
                       {"quantization_config.expert_dtype"});
  expect_refused_after([](json& j) { j["quantization_config"]["quant_method"] = "awq"; },
                       {"quantization_config.quant_method"});
  expect_refused_after([](json& j) { j.erase("quantization_config"); },
                       {"quantization_config", "missing"});
}

TEST(Config, RefusesMissingAndIllTypedKeys) {
  expect_refused_after([](json& j) { j["text_config"].erase("hidden_size"); },
                       {"text_config.hidden_size", "missing"});
  expect_refused_after([](json& j) { j["text_config"]["hidden_size"] = "5120"; },
                       {"text_config.hidden_size", "integer"});
  expect_refused_after([](json& j) { j["text_config"]["num_hidden_layers"] = 40.5; },
                       {"text_config.num_hidden_layers", "integer"});
  expect_refused_after([](json& j) { j["text_config"]["norm_topk_prob"] = 1; },
                       {"text_config.norm_topk_prob", "true/false"});
  expect_refused_after([](json& j) { j["text_config"]["compress_ratios"] = "0,0,2"; },
                       {"text_config.compress_ratios", "list"});
  expect_refused_after([](json& j) { j["text_config"]["rope_scaling"].erase("factor"); },
                       {"text_config.rope_scaling.factor", "missing"});
  expect_refused_after([](json& j) { j["text_config"].erase("engram_n_heads"); },
                       {"text_config.engram_n_heads", "missing"});
  expect_refused_after([](json& j) { j["text_config"]["rms_norm_eps"] = "1e-20"; },
                       {"text_config.rms_norm_eps", "number"});
  expect_refused(json::array({1, 2}), {"top level"});
}

TEST(Config, RefusesOtherModelGraphs) {
  expect_refused_after([](json& j) { j["text_config"]["scoring_func"] = "sigmoid"; },
                       {"text_config.scoring_func", "sqrtsoftplus"});
  expect_refused_after([](json& j) { j["text_config"]["topk_method"] = "greedy"; },
                       {"text_config.topk_method"});
  expect_refused_after([](json& j) { j["text_config"]["num_key_value_heads"] = 8; },
                       {"text_config.num_key_value_heads"});
  expect_refused_after([](json& j) { j["text_config"]["n_shared_experts"] = 2; },
                       {"text_config.n_shared_experts"});
  expect_refused_after([](json& j) { j["model_type"] = "deepseek_v4"; }, {"model_type"});
  expect_refused_after([](json& j) { j["text_config"]["kv_lora_rank"] = 512; },
                       {"text_config.kv_lora_rank"});
  expect_refused_after([](json& j) { j["text_config"]["hc_mult"] = 2; }, {"text_config.hc_mult"});
  expect_refused_after([](json& j) { j["text_config"]["num_experts_per_tok"] = 400; },
                       {"text_config.num_experts_per_tok"});
  expect_refused_after([](json& j) { j["text_config"]["tie_word_embeddings"] = true; },
                       {"text_config.tie_word_embeddings"});
}

TEST(Config, RefusesBadDimensions) {
  expect_refused_after([](json& j) { j["text_config"]["hidden_size"] = 5000; },
                       {"text_config.hidden_size", "multiple of 32"});
  expect_refused_after([](json& j) { j["text_config"]["head_dim"] = 500; },
                       {"text_config.head_dim", "multiple of 32"});
  expect_refused_after([](json& j) { j["text_config"]["qk_rope_head_dim"] = 1024; },
                       {"text_config.qk_rope_head_dim", "head_dim"});
  expect_refused_after([](json& j) { j["text_config"]["index_head_dim"] = 100; },
                       {"text_config.index_head_dim"});
  expect_refused_after([](json& j) { j["text_config"]["o_groups"] = 7; }, {"text_config.o_groups"});
}

TEST(Config, RefusesRolePatternsTheEngineDoesNotImplement) {
  // V4 ratios
  expect_refused_after([](json& j) { j["text_config"]["compress_ratios"][5] = 4; },
                       {"text_config.compress_ratios", "entry 5", "4"});
  // fewer ratios than layers
  expect_refused_after(
      [](json& j) { j["text_config"]["compress_ratios"] = std::vector<int>(39, 0); },
      {"text_config.compress_ratios", "needs at least"});
  // a KV source that is not an index source
  expect_refused_after(
      [](json& j) { j["text_config"]["index_source_layer_ids"] = {2, 14, 20, 24, 28, 32, 36}; },
      {"text_config.kv_source_layer_ids", "layer 8", "index source"});
  // layer 20 (ratio 1) would read KV source 14 (ratio 2)
  expect_refused_after(
      [](json& j) {
        j["text_config"]["kv_source_layer_ids"] = {2, 8, 14};
      },
      {"text_config.kv_source_layer_ids", "layer 20", "same ratio"});
  // a compressed layer with no source below it
  expect_refused_after(
      [](json& j) {
        j["text_config"]["kv_source_layer_ids"] = {8, 14, 20};
        j["text_config"]["index_source_layer_ids"] = {8, 14, 20, 24, 28, 32, 36};
      },
      {"text_config.kv_source_layer_ids", "layer 2", "no KV source"});
  // a source of ratio 0
  expect_refused_after(
      [](json& j) {
        j["text_config"]["kv_source_layer_ids"] = {1, 2, 8, 14, 20};
        j["text_config"]["index_source_layer_ids"] = {1, 2, 8, 14, 20, 24, 28, 32, 36};
      },
      {"text_config.kv_source_layer_ids", "layer 1", "ratio 0"});
  // source lists out of range / unsorted
  expect_refused_after(
      [](json& j) {
        j["text_config"]["index_source_layer_ids"] = {2, 8, 14, 20, 24, 28, 32, 36, 40};
      },
      {"text_config.index_source_layer_ids", "layer 40"});
  expect_refused_after(
      [](json& j) { j["text_config"]["index_source_layer_ids"] = {2, 8, 14, 20, 28, 24, 32, 36}; },
      {"text_config.index_source_layer_ids", "increasing"});
  // candidate source must be an index source with ratio 1
  expect_refused_after([](json& j) { j["text_config"]["candidate_source_layer_id"] = 14; },
                       {"text_config.candidate_source_layer_id", "ratio 1"});
  expect_refused_after([](json& j) { j["text_config"]["candidate_source_layer_id"] = 21; },
                       {"text_config.candidate_source_layer_id", "not an index source"});
  expect_refused_after([](json& j) { j["text_config"]["candidate_topk_blocks"] = 0; },
                       {"text_config.candidate_topk_blocks"});
  // a second decoder KV source: the candidate pool's row ids would not index its rows
  expect_refused_after(
      [](json& j) {
        j["text_config"]["kv_source_layer_ids"] = {2, 8, 14, 20, 28};
      },
      {"text_config.kv_source_layer_ids", "candidate source"});
  // DSpark ratio entries must be 0
  expect_refused_after([](json& j) { j["text_config"]["compress_ratios"][41] = 1; },
                       {"text_config.compress_ratios", "DSpark"});
}

TEST(Config, RefusesBadEngramAndDSpark) {
  expect_refused_after(
      [](json& j) {
        j["text_config"]["engram_layer_ids"] = {1, 40};
      },
      {"text_config.engram_layer_ids", "layer 40"});
  expect_refused_after([](json& j) { j["text_config"]["engram_num_embeddings"] = {384006168}; },
                       {"text_config.engram_num_embeddings"});
  expect_refused_after([](json& j) { j["text_config"]["engram_head_dim"] = 100; },
                       {"text_config.engram_head_dim"});
  expect_refused_after([](json& j) { j["text_config"]["engram_max_ngram_size"] = 1; },
                       {"text_config.engram_max_ngram_size"});
  expect_refused_after(
      [](json& j) {
        j["text_config"]["dspark_target_layer_ids"] = {37, 38, 45};
      },
      {"text_config.dspark_target_layer_ids"});
  expect_refused_after([](json& j) { j["text_config"].erase("dspark_markov_rank"); },
                       {"text_config.dspark_markov_rank", "missing"});
}

TEST(Config, RefusesCountsOverTheirLimitsNamingKeyAndBound) {
  // each a claim a hostile file made; each would have become a loop bound or an allocation
  expect_refused_after([](json& j) { j["text_config"]["n_routed_experts"] = 1000000; },
                       {"text_config.n_routed_experts", "1000000 exceeds the limit of 16384"});
  expect_refused_after([](json& j) { j["text_config"]["n_routed_experts"] = 1000000000; },
                       {"text_config.n_routed_experts", "exceeds the limit of 16384"});
  expect_refused_after([](json& j) { j["text_config"]["num_hidden_layers"] = 2147483647; },
                       {"text_config.num_hidden_layers", "exceeds the limit of 1024"});
  expect_refused_after([](json& j) { j["text_config"]["hc_sinkhorn_iters"] = 1000000000; },
                       {"text_config.hc_sinkhorn_iters", "exceeds the limit of 1000"});
  expect_refused_after([](json& j) { j["text_config"]["hc_sinkhorn_iters"] = 0; },
                       {"text_config.hc_sinkhorn_iters", "must be positive"});
  expect_refused_after([](json& j) { j["text_config"]["max_position_embeddings"] = 1LL << 40; },
                       {"text_config.max_position_embeddings", "exceeds the limit of"});
  expect_refused_after([](json& j) { j["text_config"]["engram_n_heads"] = 1000000; },
                       {"text_config.engram_n_heads", "exceeds the limit of 1024"});
  expect_refused_after([](json& j) { j["vision_config"]["num_hidden_layers"] = 1000000000; },
                       {"vision_config.num_hidden_layers", "exceeds the limit of 1024"});
  // within each limit, but not together: layers x experts bounds the tensor inventory
  expect_refused_after(
      [](json& j) { j["text_config"]["n_routed_experts"] = 16384; },
      {"text_config.n_routed_experts x num_hidden_layers", "655744 exceeds the limit of 262144"});
}

TEST(Config, RefusesNonFiniteValues) {
  for (const char* k : {"rope_theta", "compress_rope_theta", "rms_norm_eps", "hc_eps",
                        "routed_scaling_factor", "swiglu_limit"}) {
    for (double v :
         {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
      expect_refused_after([&](json& j) { j["text_config"][k] = v; },
                           {std::string("text_config.") + k, "must be finite"});
  }
  expect_refused_after(
      [](json& j) {
        j["text_config"]["rope_scaling"]["factor"] = -std::numeric_limits<double>::infinity();
      },
      {"text_config.rope_scaling.factor", "must be finite"});
  expect_refused_after([](json& j) { j["text_config"]["rope_theta"] = -1.0; },
                       {"text_config.rope_theta", "must be positive"});
  expect_refused_after(
      [](json& j) { j["vision_config"]["rope_theta"] = std::numeric_limits<double>::infinity(); },
      {"vision_config.rope_theta", "must be finite"});
}

TEST(Config, FromFileErrorsNameTheFile) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("cedar_cfg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string bad = (dir / "config.json").string();
  { std::ofstream(bad) << "{\"text_config\": {"; }
  try {
    ModelConfig::from_file(bad);
    ADD_FAILURE() << "bad JSON accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("invalid JSON"), std::string::npos) << e.what();
  }
  try {
    ModelConfig::from_file((dir / "nope.json").string());
    ADD_FAILURE() << "missing file accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.json"), std::string::npos) << e.what();
  }
  // a FIFO is refused at once (an ordinary open would wait for a writer forever)
  const std::string fifo = (dir / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    ModelConfig::from_file(fifo);
    ADD_FAILURE() << "FIFO accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": not a regular file (a FIFO)");
  }
  // and so is a config.json larger than any config (read whole, so its size is memory)
  const std::string big = (dir / "big.json").string();
  { std::ofstream(big) << " "; }
  fs::resize_file(big, kMaxConfigJsonBytes + 1);
  try {
    ModelConfig::from_file(big);
    ADD_FAILURE() << "oversized file accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than a config.json may have"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Config, RoleNames) {
  EXPECT_STREQ(layer_role_name(LayerRole::SWA), "SWA");
  EXPECT_STREQ(layer_role_name(LayerRole::Full), "Full");
  EXPECT_STREQ(layer_role_name(LayerRole::Reindex), "Reindex");
  EXPECT_STREQ(layer_role_name(LayerRole::Reuse), "Reuse");
}

}  // namespace
}  // namespace cedar
