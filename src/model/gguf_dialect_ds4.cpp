// Dialect B: the `deepseek41` files antirez/ds4 writes (../shared/spec/v41-gguf.md §4). Their
// `deepseek41.config` key holds the whole HF config.json, which is authoritative; the scalar keys
// beside it repeat parts of it and must agree. The Engram constants are keys of their own (primes
// per [layer][order][head], no offsets key: they are the primes' running sums) and the tables are
// native rows (`e4m3_e8m0_32_row264`: a row's E4M3 codes, then its UE8M0 scale per 32 columns).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "base/json_limits.h"
#include "model/gguf_dialect.h"
#include "model/gguf_writer.h"

namespace cedar::gguf {

namespace {

std::string k(const char* suffix) { return std::string("deepseek41.") + suffix; }

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw std::runtime_error(label + ": " + what);
}

// ds4's scalar keys: the HF text_config names, integers (the two rope thetas too) or floats.
struct ScalarKey {
  const char* name;
  bool is_float;
  double (*get)(const ModelConfig&);
};
#define CEDAR_DS4_KEY(name, is_float)                                    \
  {                                                                      \
#name, is_float, [](const ModelConfig& c) { return double(c.name); } \
  }
constexpr ScalarKey kScalars[] = {
    CEDAR_DS4_KEY(vocab_size, false),
    CEDAR_DS4_KEY(hidden_size, false),
    CEDAR_DS4_KEY(moe_intermediate_size, false),
    CEDAR_DS4_KEY(num_hidden_layers, false),
    CEDAR_DS4_KEY(num_attention_heads, false),
    CEDAR_DS4_KEY(num_key_value_heads, false),
    CEDAR_DS4_KEY(head_dim, false),
    CEDAR_DS4_KEY(qk_rope_head_dim, false),
    CEDAR_DS4_KEY(q_lora_rank, false),
    CEDAR_DS4_KEY(o_lora_rank, false),
    CEDAR_DS4_KEY(o_groups, false),
    CEDAR_DS4_KEY(n_routed_experts, false),
    CEDAR_DS4_KEY(n_shared_experts, false),
    CEDAR_DS4_KEY(num_experts_per_tok, false),
    CEDAR_DS4_KEY(max_position_embeddings, false),
    CEDAR_DS4_KEY(sliding_window, false),
    CEDAR_DS4_KEY(index_n_heads, false),
    CEDAR_DS4_KEY(index_head_dim, false),
    CEDAR_DS4_KEY(index_topk, false),
    CEDAR_DS4_KEY(candidate_source_layer_id, false),
    CEDAR_DS4_KEY(candidate_topk_blocks, false),
    CEDAR_DS4_KEY(candidate_block_size, false),
    CEDAR_DS4_KEY(hc_mult, false),
    CEDAR_DS4_KEY(hc_sinkhorn_iters, false),
    CEDAR_DS4_KEY(rope_theta, false),
    CEDAR_DS4_KEY(compress_rope_theta, false),
    CEDAR_DS4_KEY(rms_norm_eps, true),
    CEDAR_DS4_KEY(hc_eps, true),
    CEDAR_DS4_KEY(swiglu_limit, true),
    CEDAR_DS4_KEY(routed_scaling_factor, true),
};
#undef CEDAR_DS4_KEY

// YaRN's four, all f32 in ds4's files
struct RopeKey {
  const char* name;
  double (*get)(const ModelConfig&);
};
constexpr RopeKey kRope[] = {
    {"rope_scaling.factor", [](const ModelConfig& c) { return c.rope_factor; }},
    {"rope_scaling.beta_fast", [](const ModelConfig& c) { return c.beta_fast; }},
    {"rope_scaling.beta_slow", [](const ModelConfig& c) { return c.beta_slow; }},
    {"rope_scaling.original_max_position_embeddings",
     [](const ModelConfig& c) { return double(c.original_max_position_embeddings); }},
};

std::vector<uint64_t> as_u64(const std::vector<int>& v) { return {v.begin(), v.end()}; }
template <class T>
std::vector<uint32_t> as_u32(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

// The file's Engram keys against the config's layout (spec §8.4: never trust a file's constants
// that cedar does not derive itself).
void check_engram_keys(const Header& h, const ModelConfig& c, const std::string& label) {
  const std::string enc(get_string(h, k("engram.encoding"), label));
  if (enc == "q4_k_row144")
    fail(label, k("engram.encoding") + " q4_k_row144 (Q4_K Engram rows) is not read yet");
  if (enc != kDs4EngramEncoding)
    fail(label, k("engram.encoding") + " '" + enc + "' is not " + kDs4EngramEncoding);
  if (has_key(h, k("engram.storage")) && get_string(h, k("engram.storage"), label) != "embedded")
    fail(label, k("engram.storage") + ": external Engram sidecar files are not read yet");
  if (get_uint_array(h, k("engram.layer_ids"), label) != as_u64(c.engram_layer_ids))
    fail(label, k("engram.layer_ids") + " differ from the config's engram_layer_ids");
  const EngramKeys want = engram_keys(c);
  if (get_uint_array(h, k("engram.rows"), label) != want.rows)
    fail(label, k("engram.rows") + " differ from the table sizes the config's primes give");
  if (get_uint_array(h, k("engram.primes"), label) != want.primes)
    fail(label, k("engram.primes") + " differ from the primes of the V4.1 layout");
  if (get_uint_array(h, k("engram.multipliers"), label) != want.multipliers)
    fail(label, k("engram.multipliers") + " differ from the V4.1 hash multipliers");
  if (get_uint(h, k("engram.compressed_vocab_size"), label) !=
      uint64_t(c.engram_compressed_vocab_size))
    fail(label, k("engram.compressed_vocab_size") +
                    " differs from the config's engram_compressed_vocab_size");
  const std::vector<int64_t> map = get_int_array(h, k("engram.token_map"), label);
  if (int64_t(map.size()) != c.vocab_size)
    fail(label, k("engram.token_map") + " has " + std::to_string(map.size()) +
                    " entries for a vocabulary of " + std::to_string(c.vocab_size));
  int64_t top = -1;
  for (int64_t v : map) {
    if (v < 0 || v >= c.engram_compressed_vocab_size)
      fail(label, k("engram.token_map") + " holds " + std::to_string(v) +
                      ", outside the compressed vocabulary");
    top = std::max(top, v);
  }
  if (top + 1 != c.engram_compressed_vocab_size)  // spec §8.4 rule 15: the map spans it
    fail(label, k("engram.token_map") + " spans " + std::to_string(top + 1) +
                    " compressed ids, not the config's " +
                    std::to_string(c.engram_compressed_vocab_size));
  if (get_uint(h, k("engram.pad_id"), label) != uint64_t(map[size_t(c.engram_pad_token_id)]))
    fail(label, k("engram.pad_id") + " is not the mapped id of the config's engram_pad_token_id");
}

// Every scalar key the file has must say what the config says.
void check_scalar_keys(const Header& h, const ModelConfig& c, const std::string& label) {
  for (const ScalarKey& s : kScalars) {
    const std::string key = k(s.name);
    if (!has_key(h, key)) continue;
    const double want = s.get(c);
    const bool same = s.is_float ? float(get_float(h, key, label)) == float(want)
                                 : want >= 0 && double(get_uint(h, key, label)) == want;
    if (!same) fail(label, "key " + key + " disagrees with " + k("config"));
  }
  for (const RopeKey& r : kRope)
    if (has_key(h, k(r.name)) && (c.original_max_position_embeddings <= 0 ||
                                  float(get_float(h, k(r.name), label)) != float(r.get(c))))
      fail(label, "key " + k(r.name) + " disagrees with " + k("config"));
  const auto ids = [&](const char* key, const std::vector<int>& want) {
    if (has_key(h, k(key)) && get_uint_array(h, k(key), label) != as_u64(want))
      fail(label, "key " + k(key) + " disagrees with " + k("config"));
  };
  ids("kv_source_layer_ids", c.kv_source_layer_ids);
  ids("index_source_layer_ids", c.index_source_layer_ids);
  if (has_key(h, k("compress_ratios"))) {
    const std::vector<uint64_t> r = get_uint_array(h, k("compress_ratios"), label);
    const std::vector<uint64_t> want = as_u64(c.compress_ratios);
    if (r.size() < want.size() || !std::equal(want.begin(), want.end(), r.begin()))
      fail(label, "key " + k("compress_ratios") + " disagrees with " + k("config"));
  }
}

}  // namespace

ModelConfig config_from_ds4(const Header& h, const std::string& label) {
  const std::string text(get_string(h, k("config"), label));
  std::string error;
  parse_untrusted_json(text, &error);  // the depth check before nlohmann's recursive parse
  if (!error.empty()) fail(label, k("config") + ": " + error);
  ModelConfig c;
  try {
    c = ModelConfig::from_json(nlohmann::json::parse(text));
  } catch (const std::exception& e) {
    fail(label, k("config") + ": " + e.what());
  }
  // the text model only: DSpark and the vision tower are separate files in ds4's world
  c.num_nextn_predict_layers = 0;
  c.has_vision = false;
  c.validate();
  if (c.vocab_size != int64_t(get_string_array(h, "tokenizer.ggml.tokens", label).size()))
    fail(label, "tokenizer.ggml.tokens does not hold the config's vocab_size ids");
  check_scalar_keys(h, c, label);
  if (!c.engram_layer_ids.empty()) check_engram_keys(h, c, label);
  return c;
}

void write_ds4_keys(const ModelConfig& cfg, const std::vector<int32_t>& engram_map, Writer& w) {
  ModelConfig text = cfg;
  text.num_nextn_predict_layers = 0;
  text.has_vision = false;
  w.add_string("general.architecture", "deepseek41");
  w.add_string("general.name",
               "cedar " + std::to_string(cfg.num_hidden_layers) + "-layer DeepSeek-V4.1");
  w.add_string(k("config"), text.to_json().dump());  // nlohmann's objects dump sorted, compact
  if (!cfg.engram_layer_ids.empty()) {
    const EngramKeys e = engram_keys(cfg);
    w.add_string(k("engram.encoding"), kDs4EngramEncoding);
    w.add_u32_array(k("engram.layer_ids"), as_u32(cfg.engram_layer_ids));
    w.add_u32_array(k("engram.rows"), as_u32(e.rows));
    w.add_u32(k("engram.compressed_vocab_size"), uint32_t(cfg.engram_compressed_vocab_size));
    w.add_u32(k("engram.pad_id"), uint32_t(engram_map.at(size_t(cfg.engram_pad_token_id))));
    w.add_u32_array(k("engram.token_map"), as_u32(engram_map));
    w.add_u32_array(k("engram.primes"), as_u32(e.primes));
    w.add_u64_array(k("engram.multipliers"), e.multipliers);
  }
  for (const ScalarKey& s : kScalars) {
    if (s.is_float)
      w.add_f32(k(s.name), float(s.get(cfg)));
    else if (s.get(cfg) >= 0)  // candidate_source_layer_id is -1 without a candidate source
      w.add_u32(k(s.name), uint32_t(s.get(cfg)));
  }
  w.add_string(k("scoring_func"), cfg.scoring_func);
  w.add_string(k("hidden_act"), "silu");
  w.add_string(k("topk_method"), cfg.topk_method);
  w.add_bool(k("norm_topk_prob"), cfg.norm_topk_prob);
  w.add_u32_array(k("compress_ratios"), as_u32(cfg.compress_ratios));
  w.add_u32_array(k("kv_source_layer_ids"), as_u32(cfg.kv_source_layer_ids));
  w.add_u32_array(k("index_source_layer_ids"), as_u32(cfg.index_source_layer_ids));
  if (cfg.original_max_position_embeddings > 0)
    for (const RopeKey& r : kRope) w.add_f32(k(r.name), float(r.get(cfg)));
}

}  // namespace cedar::gguf
