// ModelConfig: parse config.json (HF nested layout or a flat text config), write it back, and
// validate that it describes the V4.1 graph the engine implements (spec v41-architecture.md §2).
// Every error names the key: "config.json: text_config.<key>: <what is wrong>".
#include "model/config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <utility>

#include "base/file_reader.h"
#include "base/json_limits.h"

namespace cedar {

using nlohmann::json;

const char* layer_role_name(LayerRole r) {
  switch (r) {
    case LayerRole::SWA:
      return "SWA";
    case LayerRole::Full:
      return "Full";
    case LayerRole::Reindex:
      return "Reindex";
    case LayerRole::Reuse:
      return "Reuse";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(const std::string& key, const std::string& what) {
  throw std::runtime_error("config.json: " + key + ": " + what);
}

std::string type_of(const json& v) { return v.type_name(); }

// One JSON object being read, with its dotted path for error messages ("text_config.").
struct Section {
  const json* j;
  std::string prefix;

  bool has(const char* k) const { return j->contains(k) && !(*j)[k].is_null(); }
  const json& at(const char* k) const {
    if (!has(k)) fail(prefix + k, "missing");
    return (*j)[k];
  }
  std::string key(const char* k) const { return prefix + k; }

  int64_t get_i64(const char* k) const {
    const json& v = at(k);
    if (!v.is_number_integer()) fail(key(k), "expected an integer, got " + type_of(v));
    return v.get<int64_t>();
  }
  int get_int(const char* k) const {
    int64_t v = get_i64(k);
    if (v < INT_MIN || v > INT_MAX) fail(key(k), "value " + std::to_string(v) + " out of range");
    return int(v);
  }
  double get_num(const char* k) const {
    const json& v = at(k);
    if (!v.is_number()) fail(key(k), "expected a number, got " + type_of(v));
    return v.get<double>();
  }
  bool get_bool(const char* k) const {
    const json& v = at(k);
    if (!v.is_boolean()) fail(key(k), "expected true/false, got " + type_of(v));
    return v.get<bool>();
  }
  std::string get_str(const char* k) const {
    const json& v = at(k);
    if (!v.is_string()) fail(key(k), "expected a string, got " + type_of(v));
    return v.get<std::string>();
  }
  std::vector<int64_t> get_i64_list(const char* k) const {
    const json& v = at(k);
    if (!v.is_array()) fail(key(k), "expected a list of integers, got " + type_of(v));
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number_integer())
        fail(key(k), "entry " + std::to_string(i) + ": expected an integer, got " + type_of(v[i]));
      out.push_back(v[i].get<int64_t>());
    }
    return out;
  }
  std::vector<int> get_int_list(const char* k) const {
    std::vector<int> out;
    for (int64_t x : get_i64_list(k)) {
      if (x < INT_MIN || x > INT_MAX) fail(key(k), "value " + std::to_string(x) + " out of range");
      out.push_back(int(x));
    }
    return out;
  }
  // Optional keys keep the default already in *out.
  void opt(const char* k, int* out) const {
    if (has(k)) *out = get_int(k);
  }
  void opt(const char* k, int64_t* out) const {
    if (has(k)) *out = get_i64(k);
  }
  void opt(const char* k, double* out) const {
    if (has(k)) *out = get_num(k);
  }
  void opt(const char* k, bool* out) const {
    if (has(k)) *out = get_bool(k);
  }
  void opt(const char* k, std::string* out) const {
    if (has(k)) *out = get_str(k);
  }
};

std::string list_str(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// ref: vision.py VisionArgs / image_processor.py; the shape keys are required (a tower of
// another shape must not be read with the release's constants), the rest default to the release.
void parse_vision(const Section& v, VisionConfig* out) {
  if (v.has("model_type") && v.get_str("model_type") != "deepseek_v41_vision")
    fail(v.key("model_type"),
         "'" + v.get_str("model_type") + "' is not the V4.1 vision tower (deepseek_v41_vision)");
  VisionConfig& c = *out;
  for (const auto& [k, dst] : std::initializer_list<std::pair<const char*, int*>>{
           {"num_hidden_layers", &c.num_hidden_layers},
           {"hidden_size", &c.hidden_size},
           {"num_attention_heads", &c.num_attention_heads},
           {"intermediate_size", &c.intermediate_size},
           {"patch_size", &c.patch_size},
           {"downsample_ratio", &c.downsample_ratio}}) {
    if (!v.has(k)) fail(v.key(k), "missing (the vision tower's shape)");
    *dst = v.get_int(k);
  }
  v.opt("rope_theta", &c.rope_theta);
  v.opt("max_image_tokens", &c.max_image_tokens);
  v.opt("min_pixels", &c.min_pixels);
  c.max_wh_ratio = v.has("max_wh_ratio") ? v.get_num("max_wh_ratio") : 0.0;
  // (the ranges: check_limits(), config_limits.cpp)
}

const char* kT = "text_config.";
const char* kQ = "quantization_config.";

std::string tk(const char* k) { return std::string(kT) + k; }

}  // namespace

ModelConfig ModelConfig::from_json(const json& root) {
  if (!root.is_object()) fail("(top level)", "expected a JSON object, got " + type_of(root));
  ModelConfig c;
  const bool nested = root.contains("text_config");
  if (nested && !root["text_config"].is_object())
    fail("text_config", "expected an object, got " + type_of(root["text_config"]));
  Section top{&root, ""};
  Section t{nested ? &root["text_config"] : &root, nested ? kT : ""};

  // Top level (ids default to the release's when absent).
  if (top.has("model_type")) {
    std::string mt = top.get_str("model_type");
    if (mt != "deepseek_v41" && mt != "deepseek_v41_text")
      fail("model_type", "'" + mt + "' is not DeepSeek-V4.1 (expected deepseek_v41)");
  }
  if (nested && t.has("model_type")) {
    std::string mt = t.get_str("model_type");
    if (mt != "deepseek_v41_text" && mt != "deepseek_v41")
      fail(t.key("model_type"), "'" + mt + "' is not DeepSeek-V4.1 (expected deepseek_v41_text)");
  }
  // Token ids may sit at the top level (HF) or inside text_config.
  for (Section* s : {&top, &t}) {
    s->opt("bos_token_id", &c.bos_token_id);
    s->opt("eos_token_id", &c.eos_token_id);
    s->opt("pad_token_id", &c.pad_token_id);
    s->opt("image_token_id", &c.image_token_id);
  }
  c.has_vision = root.contains("vision_config") && !root["vision_config"].is_null();
  if (c.has_vision && !root["vision_config"].is_object())
    fail("vision_config", "expected an object, got " + type_of(root["vision_config"]));
  if (c.has_vision) parse_vision(Section{&root["vision_config"], "vision_config."}, &c.vision);

  // Quantization.
  if (!root.contains("quantization_config"))
    fail("quantization_config", "missing (V4.1 needs fp8 / [32,32] / ue8m0 / fp4)");
  if (!root["quantization_config"].is_object())
    fail("quantization_config", "expected an object, got " + type_of(root["quantization_config"]));
  Section q{&root["quantization_config"], kQ};
  c.quant_method = q.get_str("quant_method");
  c.weight_block_size = q.get_int_list("weight_block_size");
  c.scale_fmt = q.get_str("scale_fmt");
  c.expert_dtype = q.get_str("expert_dtype");
  if (q.has("activation_scheme") && q.get_str("activation_scheme") != "dynamic")
    fail(q.key("activation_scheme"), "'" + q.get_str("activation_scheme") +
                                         "' is not supported (V4.1 quantizes activations "
                                         "dynamically)");

  // Text config: required keys.
  c.vocab_size = t.get_i64("vocab_size");
  c.hidden_size = t.get_int("hidden_size");
  c.num_hidden_layers = t.get_int("num_hidden_layers");
  c.num_attention_heads = t.get_int("num_attention_heads");
  c.num_key_value_heads = t.get_int("num_key_value_heads");
  c.head_dim = t.get_int("head_dim");
  c.qk_rope_head_dim = t.get_int("qk_rope_head_dim");
  c.q_lora_rank = t.get_int("q_lora_rank");
  c.o_lora_rank = t.get_int("o_lora_rank");
  c.o_groups = t.get_int("o_groups");
  c.n_routed_experts = t.get_int("n_routed_experts");
  c.n_shared_experts = t.get_int("n_shared_experts");
  c.num_experts_per_tok = t.get_int("num_experts_per_tok");
  c.moe_intermediate_size = t.get_int("moe_intermediate_size");
  c.scoring_func = t.get_str("scoring_func");
  c.topk_method = t.get_str("topk_method");
  c.norm_topk_prob = t.get_bool("norm_topk_prob");
  c.routed_scaling_factor = t.get_num("routed_scaling_factor");
  c.swiglu_limit = t.get_num("swiglu_limit");
  c.rms_norm_eps = t.get_num("rms_norm_eps");
  c.sliding_window = t.get_int("sliding_window");
  c.compress_ratios = t.get_int_list("compress_ratios");
  c.kv_source_layer_ids = t.get_int_list("kv_source_layer_ids");
  c.index_source_layer_ids = t.get_int_list("index_source_layer_ids");
  c.index_n_heads = t.get_int("index_n_heads");
  c.index_head_dim = t.get_int("index_head_dim");
  c.index_topk = t.get_int("index_topk");
  c.hc_mult = t.get_int("hc_mult");
  c.hc_sinkhorn_iters = t.get_int("hc_sinkhorn_iters");
  c.hc_eps = t.get_num("hc_eps");
  c.rope_theta = t.get_num("rope_theta");
  c.compress_rope_theta = t.get_num("compress_rope_theta");
  c.max_position_embeddings = t.get_i64("max_position_embeddings");

  // Optional: the candidate pool (CED). Absent = no hierarchical selection.
  if (t.has("candidate_source_layer_id")) {
    c.candidate_source_layer_id = t.get_int("candidate_source_layer_id");
    c.candidate_topk_blocks = t.get_int("candidate_topk_blocks");
    c.candidate_block_size = t.get_int("candidate_block_size");
  }
  // Optional: YaRN. Absent = plain RoPE on every layer.
  if (t.has("rope_scaling")) {
    const json& rs = t.at("rope_scaling");
    if (!rs.is_object()) fail(t.key("rope_scaling"), "expected an object, got " + type_of(rs));
    Section r{&rs, t.prefix + "rope_scaling."};
    if (r.has("rope_type") && r.get_str("rope_type") != "yarn")
      fail(r.key("rope_type"), "'" + r.get_str("rope_type") + "' is not supported (only yarn)");
    c.rope_factor = r.get_num("factor");
    c.beta_fast = r.get_num("beta_fast");
    c.beta_slow = r.get_num("beta_slow");
    c.original_max_position_embeddings = r.get_i64("original_max_position_embeddings");
  }
  // Optional: Engram. Absent or empty engram_layer_ids = no Engram; otherwise all keys needed.
  if (t.has("engram_layer_ids")) c.engram_layer_ids = t.get_int_list("engram_layer_ids");
  if (!c.engram_layer_ids.empty()) {
    c.engram_num_embeddings = t.get_i64_list("engram_num_embeddings");
    c.engram_max_ngram_size = t.get_int("engram_max_ngram_size");
    c.engram_vocab_size = t.get_i64("engram_vocab_size");
    c.engram_n_heads = t.get_int("engram_n_heads");
    c.engram_head_dim = t.get_int("engram_head_dim");
    c.engram_pad_token_id = t.get_int("engram_pad_token_id");
    c.engram_compressed_vocab_size = t.get_i64("engram_compressed_vocab_size");
  }
  // Optional: DSpark draft stages.
  t.opt("num_nextn_predict_layers", &c.num_nextn_predict_layers);
  if (c.num_nextn_predict_layers > 0) {
    c.dspark_block_size = t.get_int("dspark_block_size");
    c.dspark_n_routed_experts = t.get_int("dspark_n_routed_experts");
    c.dspark_num_experts_per_tok = t.get_int("dspark_num_experts_per_tok");
    c.dspark_markov_rank = t.get_int("dspark_markov_rank");
    c.dspark_target_layer_ids = t.get_int_list("dspark_target_layer_ids");
    c.dspark_noise_token_id = t.get_i64("dspark_noise_token_id");
  }
  // Optional with release defaults.
  t.opt("gate_temp", &c.gate_temp);
  t.opt("tie_word_embeddings", &c.tie_word_embeddings);

  // Keys whose only accepted value is the V4.1 one: refuse a config that asks for another graph.
  if (t.has("hidden_act") && t.get_str("hidden_act") != "silu")
    fail(t.key("hidden_act"), "'" + t.get_str("hidden_act") + "' is not supported (V4.1: silu)");
  if (t.has("attention_bias") && t.get_bool("attention_bias"))
    fail(t.key("attention_bias"), "true is not supported (V4.1 has no biases)");
  if (t.has("first_k_dense_replace") && t.get_int("first_k_dense_replace") != 0)
    fail(t.key("first_k_dense_replace"), "must be 0 (every V4.1 layer is MoE)");
  for (const char* k : {"num_hash_layers", "n_hash_layers"})
    if (t.has(k) && t.get_int(k) != 0) fail(t.key(k), "must be 0 (V4.1 has no hash-routed layers)");
  if (t.has("kv_lora_rank"))
    fail(t.key("kv_lora_rank"), "present, but V4.1 has no kv LoRA (this looks like a V3 config)");

  c.validate();
  return c;
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  return from_text(read_regular_file(path, kMaxConfigJsonBytes, "config.json"), path);
}

ModelConfig ModelConfig::from_text(std::string_view text, const std::string& label) {
  json j;
  try {
    if (json_nesting_depth(text) > kMaxJsonDepth)
      throw std::runtime_error(label + ": JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                               " levels");
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(label + ": invalid JSON: " + e.what());
  }
  return from_json(j);
}

json ModelConfig::to_json() const {
  json t = json::object();
  t["model_type"] = "deepseek_v41_text";
  t["vocab_size"] = vocab_size;
  t["hidden_size"] = hidden_size;
  t["moe_intermediate_size"] = moe_intermediate_size;
  t["num_hidden_layers"] = num_hidden_layers;
  t["num_attention_heads"] = num_attention_heads;
  t["num_key_value_heads"] = num_key_value_heads;
  t["head_dim"] = head_dim;
  t["qk_rope_head_dim"] = qk_rope_head_dim;
  t["q_lora_rank"] = q_lora_rank;
  t["o_lora_rank"] = o_lora_rank;
  t["o_groups"] = o_groups;
  t["hidden_act"] = "silu";
  t["swiglu_limit"] = swiglu_limit;
  t["rms_norm_eps"] = rms_norm_eps;
  t["tie_word_embeddings"] = tie_word_embeddings;
  t["max_position_embeddings"] = max_position_embeddings;
  t["rope_theta"] = rope_theta;
  if (original_max_position_embeddings > 0)
    t["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", rope_factor},
                         {"beta_fast", beta_fast},
                         {"beta_slow", beta_slow},
                         {"original_max_position_embeddings", original_max_position_embeddings}};
  t["n_routed_experts"] = n_routed_experts;
  t["n_shared_experts"] = n_shared_experts;
  t["num_experts_per_tok"] = num_experts_per_tok;
  t["scoring_func"] = scoring_func;
  t["topk_method"] = topk_method;
  t["norm_topk_prob"] = norm_topk_prob;
  t["routed_scaling_factor"] = routed_scaling_factor;
  if (gate_temp != 1.0) t["gate_temp"] = gate_temp;  // not an HF key; only when non-default
  t["sliding_window"] = sliding_window;
  t["compress_ratios"] = compress_ratios;
  t["compress_rope_theta"] = compress_rope_theta;
  t["kv_source_layer_ids"] = kv_source_layer_ids;
  t["index_source_layer_ids"] = index_source_layer_ids;
  t["index_n_heads"] = index_n_heads;
  t["index_head_dim"] = index_head_dim;
  t["index_topk"] = index_topk;
  if (candidate_source_layer_id >= 0) {
    t["candidate_source_layer_id"] = candidate_source_layer_id;
    t["candidate_topk_blocks"] = candidate_topk_blocks;
    t["candidate_block_size"] = candidate_block_size;
  }
  t["hc_mult"] = hc_mult;
  t["hc_sinkhorn_iters"] = hc_sinkhorn_iters;
  t["hc_eps"] = hc_eps;
  if (!engram_layer_ids.empty()) {
    t["engram_layer_ids"] = engram_layer_ids;
    t["engram_num_embeddings"] = engram_num_embeddings;
    t["engram_max_ngram_size"] = engram_max_ngram_size;
    t["engram_vocab_size"] = engram_vocab_size;
    t["engram_n_heads"] = engram_n_heads;
    t["engram_head_dim"] = engram_head_dim;
    t["engram_pad_token_id"] = engram_pad_token_id;
    t["engram_compressed_vocab_size"] = engram_compressed_vocab_size;
  }
  t["num_nextn_predict_layers"] = num_nextn_predict_layers;
  if (num_nextn_predict_layers > 0) {
    t["dspark_block_size"] = dspark_block_size;
    t["dspark_noise_token_id"] = dspark_noise_token_id;
    t["dspark_target_layer_ids"] = dspark_target_layer_ids;
    t["dspark_markov_rank"] = dspark_markov_rank;
    t["dspark_n_routed_experts"] = dspark_n_routed_experts;
    t["dspark_num_experts_per_tok"] = dspark_num_experts_per_tok;
  }

  json j = json::object();
  j["architectures"] = {"DeepseekV41ForCausalLM"};
  j["model_type"] = "deepseek_v41";
  j["dtype"] = "bfloat16";
  j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_token_id;
  j["pad_token_id"] = pad_token_id;
  j["image_token_id"] = image_token_id;
  j["quantization_config"] = {{"quant_method", quant_method},
                              {"activation_scheme", "dynamic"},
                              {"weight_block_size", weight_block_size},
                              {"scale_fmt", scale_fmt},
                              {"expert_dtype", expert_dtype}};
  j["text_config"] = t;
  if (has_vision) {
    const VisionConfig& v = vision;
    j["vision_config"] = {
        {"model_type", "deepseek_v41_vision"},
        {"num_hidden_layers", v.num_hidden_layers},
        {"hidden_size", v.hidden_size},
        {"num_attention_heads", v.num_attention_heads},
        {"intermediate_size", v.intermediate_size},
        {"patch_size", v.patch_size},
        {"rope_theta", v.rope_theta},
        {"downsample_ratio", v.downsample_ratio},
        {"max_image_tokens", v.max_image_tokens},
        {"min_pixels", v.min_pixels},
        {"max_wh_ratio", v.max_wh_ratio > 0 ? json(v.max_wh_ratio) : json(nullptr)}};
  }
  return j;
}

// ref: model.py ModelArgs / Transformer.__init__ (layer roles from compress_ratios and the source
// lists); spec v41-architecture.md §2.2 for the rules checked here.
void ModelConfig::validate() {
  check_limits();  // every count bounded, every float finite, before anything loops by them
  auto multiple_of_32 = [](const char* k, int64_t v) {
    if (v <= 0 || v % 32 != 0)
      fail(tk(k), std::to_string(v) + " is not a positive multiple of 32 (FP8/FP4 blocks are 32)");
  };
  auto must_eq_str = [](const std::string& key, const std::string& v, const char* want,
                        const char* why) {
    if (v != want) fail(key, "'" + v + "' is not supported (V4.1: " + want + "; " + why + ")");
  };

  // Quantization: the FP8 block is 32x32 in V4.1 (V4 used 128x128: reading one as the other gives
  // a wrong graph that still runs, so refuse it here).
  must_eq_str(std::string(kQ) + "quant_method", quant_method, "fp8", "FP8 weights");
  if (weight_block_size != std::vector<int>{32, 32})
    fail(
        std::string(kQ) + "weight_block_size",
        list_str(weight_block_size) + " is not supported: V4.1 uses 32x32 FP8 weight blocks" +
            (weight_block_size == std::vector<int>{128, 128} ? " (128x128 is the V4 layout)" : ""));
  must_eq_str(std::string(kQ) + "scale_fmt", scale_fmt, "ue8m0", "power-of-two scales");
  must_eq_str(std::string(kQ) + "expert_dtype", expert_dtype, "fp4", "MXFP4 routed experts");

  multiple_of_32("hidden_size", hidden_size);
  multiple_of_32("head_dim", head_dim);
  multiple_of_32("q_lora_rank", q_lora_rank);
  multiple_of_32("o_lora_rank", o_lora_rank);
  multiple_of_32("moe_intermediate_size", moe_intermediate_size);
  multiple_of_32("index_head_dim", index_head_dim);
  if (num_key_value_heads != 1)
    fail(tk("num_key_value_heads"),
         std::to_string(num_key_value_heads) + " is not supported (V4.1 shares one K=V latent)");
  if (qk_rope_head_dim <= 0 || qk_rope_head_dim % 2 != 0)
    fail(tk("qk_rope_head_dim"),
         "must be a positive even number, got " + std::to_string(qk_rope_head_dim));
  if (qk_rope_head_dim > head_dim)
    fail(tk("qk_rope_head_dim"),
         std::to_string(qk_rope_head_dim) + " exceeds head_dim " + std::to_string(head_dim));
  if (qk_rope_head_dim > index_head_dim)
    fail(tk("qk_rope_head_dim"), std::to_string(qk_rope_head_dim) + " exceeds index_head_dim " +
                                     std::to_string(index_head_dim));
  if (num_attention_heads % o_groups != 0)
    fail(tk("o_groups"), std::to_string(o_groups) + " does not divide num_attention_heads " +
                             std::to_string(num_attention_heads));
  if (int64_t(num_attention_heads) * head_dim / o_groups % 32 != 0)
    fail(tk("o_groups"),
         "the grouped output width (heads/o_groups*head_dim) must be a multiple "
         "of 32");

  // MoE.
  if (n_shared_experts != 1)
    fail(tk("n_shared_experts"),
         std::to_string(n_shared_experts) + " is not supported (V4.1 has exactly 1)");
  if (num_experts_per_tok < 1 || num_experts_per_tok > n_routed_experts)
    fail(tk("num_experts_per_tok"),
         std::to_string(num_experts_per_tok) +
             " must be in [1, n_routed_experts = " + std::to_string(n_routed_experts) + "]");
  must_eq_str(tk("scoring_func"), scoring_func, "sqrtsoftplus", "s = sqrt(softplus(logit))");
  must_eq_str(tk("topk_method"), topk_method, "noaux_tc", "bias-steered selection");
  if (!norm_topk_prob)
    fail(tk("norm_topk_prob"), "false is not supported (V4.1 renormalises the routed weights)");
  if (tie_word_embeddings)
    fail(tk("tie_word_embeddings"), "true is not supported (V4.1 has separate embed and head)");

  // Norms, mHC, RoPE.
  if (hc_mult != 4)
    fail(tk("hc_mult"), std::to_string(hc_mult) + " is not supported (V4.1 mHC has 4 copies)");
  if (original_max_position_embeddings > 0) {
    if (!(rope_factor >= 1)) fail(tk("rope_scaling.factor"), "must be >= 1");
    if (!(beta_fast > 0) || !(beta_slow > 0) || beta_fast < beta_slow)
      fail(tk("rope_scaling.beta_fast"), "beta_fast and beta_slow must be positive, fast >= slow");
  }

  // Token ids.
  for (auto [k, v] : {std::pair<const char*, int64_t>{"bos_token_id", bos_token_id},
                      {"eos_token_id", eos_token_id},
                      {"pad_token_id", pad_token_id}})
    if (v < 0 || v >= vocab_size)
      fail(k, std::to_string(v) + " is outside the vocabulary [0, " + std::to_string(vocab_size) +
                  ")");

  // Attention schedule (spec §2.2).
  const int L = num_hidden_layers;
  if (int(compress_ratios.size()) < L)
    fail(tk("compress_ratios"),
         "has " + std::to_string(compress_ratios.size()) +
             " entries, needs at least num_hidden_layers = " + std::to_string(L));
  for (size_t i = 0; i < compress_ratios.size(); ++i) {
    int r = compress_ratios[i];
    if (r != 0 && r != 1 && r != 2)
      fail(tk("compress_ratios"),
           "entry " + std::to_string(i) + " is " + std::to_string(r) +
               "; V4.1 implements ratios 0, 1 and 2 only (4/128 are V4 CSA/HCA)");
    if (int(i) >= L && r != 0)
      fail(tk("compress_ratios"),
           "entry " + std::to_string(i) + " (a DSpark stage) must be 0, got " + std::to_string(r));
  }
  auto check_ids = [&](const char* k, const std::vector<int>& ids) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= L)
        fail(tk(k),
             "layer " + std::to_string(ids[i]) + " is outside [0, " + std::to_string(L) + ")");
      if (i > 0 && ids[i] <= ids[i - 1]) fail(tk(k), "must be strictly increasing");
    }
  };
  check_ids("kv_source_layer_ids", kv_source_layer_ids);
  check_ids("index_source_layer_ids", index_source_layer_ids);
  std::set<int> kv(kv_source_layer_ids.begin(), kv_source_layer_ids.end());
  std::set<int> ix(index_source_layer_ids.begin(), index_source_layer_ids.end());
  for (int l : kv_source_layer_ids) {
    if (compress_ratios[size_t(l)] == 0)
      fail(tk("kv_source_layer_ids"),
           "layer " + std::to_string(l) + " has compress ratio 0 and cannot be a KV source");
    if (!ix.count(l))
      fail(tk("kv_source_layer_ids"), "layer " + std::to_string(l) +
                                          " is a KV source but not an index source (every KV "
                                          "source must also be in index_source_layer_ids)");
  }
  for (int l : index_source_layer_ids)
    if (compress_ratios[size_t(l)] == 0)
      fail(tk("index_source_layer_ids"),
           "layer " + std::to_string(l) + " has compress ratio 0 and cannot be an index source");

  const int cand = candidate_source_layer_id;
  if (cand != -1) {
    if (cand < 0 || cand >= L)
      fail(tk("candidate_source_layer_id"),
           std::to_string(cand) + " is outside [0, " + std::to_string(L) + ")");
    if (!ix.count(cand))
      fail(tk("candidate_source_layer_id"),
           "layer " + std::to_string(cand) + " is not an index source");
    if (compress_ratios[size_t(cand)] != 1)
      fail(tk("candidate_source_layer_id"), "layer " + std::to_string(cand) + " has ratio " +
                                                std::to_string(compress_ratios[size_t(cand)]) +
                                                "; the candidate source must have ratio 1");
  }

  layers.assign(size_t(L), LayerPlan{});
  int cur_kv = -1, cur_ix = -1;  // nearest source at or below (the reference overwrites a slot)
  for (int l = 0; l < L; ++l) {
    LayerPlan& p = layers[size_t(l)];
    p.layer = l;
    p.ratio = compress_ratios[size_t(l)];
    p.is_kv_source = kv.count(l) > 0;
    p.is_index_source = ix.count(l) > 0;
    if (p.is_kv_source) cur_kv = l;
    if (p.is_index_source) cur_ix = l;
    p.is_candidate_source = l == cand;
    p.is_decoder = cand >= 0 && l >= cand;
    if (p.ratio == 0) {
      p.role = LayerRole::SWA;
      continue;
    }
    const std::string at =
        "layer " + std::to_string(l) + " (ratio " + std::to_string(p.ratio) + ")";
    if (cur_kv < 0)
      fail(tk("kv_source_layer_ids"), at + " is compressed but no KV source is at or below it");
    if (compress_ratios[size_t(cur_kv)] != p.ratio)
      fail(tk("kv_source_layer_ids"),
           at + " would read KV source " + std::to_string(cur_kv) + " of ratio " +
               std::to_string(compress_ratios[size_t(cur_kv)]) +
               "; a reader must have the same ratio as its nearest source");
    if (cur_ix < 0)
      fail(tk("index_source_layer_ids"),
           at + " is compressed but no index source is at or below it");
    if (compress_ratios[size_t(cur_ix)] != p.ratio)
      fail(tk("index_source_layer_ids"),
           at + " would read the Top-K of index source " + std::to_string(cur_ix) + " of ratio " +
               std::to_string(compress_ratios[size_t(cur_ix)]) +
               "; a reader must have the same ratio as its nearest source");
    p.kv_source = cur_kv;
    p.index_source = cur_ix;
    p.role = p.is_kv_source ? LayerRole::Full
                            : (p.is_index_source ? LayerRole::Reindex : LayerRole::Reuse);
    p.uses_candidates = cand >= 0 && p.is_index_source && l > cand;
    // The candidate pool is a set of row ids of the candidate source's KV: a layer that applies
    // it must index the same rows.
    if (cand >= 0 && l > cand && p.kv_source != layers[size_t(cand)].kv_source)
      fail(tk("kv_source_layer_ids"),
           at + " is above the candidate source " + std::to_string(cand) + " but reads KV source " +
               std::to_string(p.kv_source) + ", not " +
               std::to_string(layers[size_t(cand)].kv_source) +
               " (decoder layers must share the candidate source's rows)");
  }

  // Engram.
  if (!engram_layer_ids.empty()) {
    check_ids("engram_layer_ids", engram_layer_ids);
    if (engram_num_embeddings.size() != engram_layer_ids.size())
      fail(tk("engram_num_embeddings"), "has " + std::to_string(engram_num_embeddings.size()) +
                                            " entries, expected one per "
                                            "engram layer (" +
                                            std::to_string(engram_layer_ids.size()) + ")");
    multiple_of_32("engram_head_dim", engram_head_dim);
    if (engram_pad_token_id < 0 || engram_pad_token_id >= vocab_size)
      fail(tk("engram_pad_token_id"),
           std::to_string(engram_pad_token_id) + " is outside the vocabulary");
    for (int64_t n : engram_num_embeddings)
      if (n < int64_t(engram_max_ngram_size - 1) * engram_n_heads)
        fail(tk("engram_num_embeddings"), "a table has fewer rows than hash heads");
    for (size_t i = 0; i < engram_layer_ids.size(); ++i) {
      layers[size_t(engram_layer_ids[i])].has_engram = true;
      layers[size_t(engram_layer_ids[i])].engram_index = int(i);
    }
  } else {
    engram_num_embeddings.clear();
  }

  // DSpark.
  if (num_nextn_predict_layers > 0) {
    if (dspark_num_experts_per_tok < 1 || dspark_num_experts_per_tok > dspark_n_routed_experts)
      fail(tk("dspark_num_experts_per_tok"), "must be in [1, dspark_n_routed_experts]");
    if (dspark_target_layer_ids.empty())
      fail(tk("dspark_target_layer_ids"), "must list the layers that feed the draft head");
    for (size_t i = 0; i < dspark_target_layer_ids.size(); ++i) {
      const int l = dspark_target_layer_ids[i];
      if (l < 0 || l >= L)
        fail(tk("dspark_target_layer_ids"),
             "layer " + std::to_string(l) + " is outside [0, " + std::to_string(L) + ")");
      // the taps are concatenated in layer order (ref: Transformer.forward), so a list in
      // another order or with repeats would describe a different main_proj input
      if (i > 0 && l <= dspark_target_layer_ids[i - 1])
        fail(tk("dspark_target_layer_ids"), "must be strictly ascending");
    }
    if (dspark_noise_token_id < 0 || dspark_noise_token_id >= vocab_size)
      fail(tk("dspark_noise_token_id"), "is outside the vocabulary");
  }
}

}  // namespace cedar
