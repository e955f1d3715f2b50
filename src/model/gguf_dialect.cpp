#include "model/gguf_dialect.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>
#include <stdexcept>

#include "model/engram_layout.h"
#include "model/gguf_writer.h"

namespace cedar::gguf {

namespace {

constexpr const char* kArch = "deepseek41";
std::string k(const char* suffix) { return std::string(kArch) + "." + suffix; }

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw std::runtime_error(label + ": " + what);
}

bool has_tensor_like(const Header& h, const std::string& fragment) {
  for (const TensorInfo& t : h.tensors)
    if (t.name.find(fragment) != std::string_view::npos) return true;
  return false;
}

int to_int(uint64_t v, const std::string& key, const std::string& label) {
  if (v > uint64_t(INT32_MAX)) fail(label, "key " + key + ": " + std::to_string(v) + " is too big");
  return int(v);
}
int get_i(const Header& h, const std::string& key, const std::string& label) {
  return to_int(get_uint(h, key, label), key, label);
}
std::vector<int> get_iv(const Header& h, const std::string& key, const std::string& label) {
  std::vector<int> out;
  for (uint64_t v : get_uint_array(h, key, label)) out.push_back(to_int(v, key, label));
  return out;
}

// A release tensor's dialect-A name: the per-layer part after "layers.N." (or the top-level name)
struct NamePair {
  const char* release;
  const char* gguf;
};
constexpr NamePair kTop[] = {
    {"embed.weight", "token_embd.weight"},
    {"norm.weight", "output_norm.weight"},
    {"head.weight", "output.weight"},
};
constexpr NamePair kLayer[] = {
    {"attn_norm.weight", "attn_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"attn.attn_sink", "attn_sinks.weight"},
    {"attn.wq_a", "attn_q_a.weight"},
    {"attn.q_norm.weight", "attn_q_a_norm.weight"},
    {"attn.wq_b", "attn_q_b.weight"},
    {"attn.wkv", "attn_kv.weight"},
    {"attn.kv_norm.weight", "attn_kv_a_norm.weight"},
    {"attn.wo_a", "attn_output_a.weight"},
    {"attn.wo_b", "attn_output_b.weight"},
    {"hc_attn_fn", "hc_attn_fn.weight"},
    {"hc_ffn_fn", "hc_ffn_fn.weight"},
    {"hc_attn_base", "hc_attn_base.weight"},
    {"hc_ffn_base", "hc_ffn_base.weight"},
    {"hc_attn_scale", "hc_attn_scale.weight"},
    {"hc_ffn_scale", "hc_ffn_scale.weight"},
    {"attn.compressor.wkv", "attn_compressor_kv.weight"},
    {"attn.compressor.wgate", "attn_compressor_gate.weight"},
    {"attn.compressor.norm.weight", "attn_compressor_norm.weight"},
    {"attn.indexer.wk", "indexer.attn_k.weight"},
    {"attn.indexer.k_norm.weight", "indexer.k_norm.weight"},
    {"attn.indexer.wq_b", "indexer.attn_q_b.weight"},
    {"attn.indexer.weights_proj", "indexer.proj.weight"},
    {"ffn.gate.weight", "ffn_gate_inp.weight"},
    {"ffn.gate.bias", "exp_probs_b.bias"},
    {"ffn.gate.bias_vl", "exp_probs_b_vl.bias"},
    {"ffn.shared_experts.w1", "ffn_gate_shexp.weight"},
    {"ffn.shared_experts.w3", "ffn_up_shexp.weight"},
    {"ffn.shared_experts.w2", "ffn_down_shexp.weight"},
    {"engram.embed", "engram_embd.weight"},
    {"engram.wkv", "engram_wkv.weight"},
    {"engram.q_weight", "engram_q.weight"},
    {"engram.k_weight", "engram_k.weight"},
};

// ds4's names for the Engram projections (spec §4.2), before kLayer
constexpr NamePair kLayerDs4[] = {
    {"engram.wkv", "engram_kv.weight"},
    {"engram.q_weight", "engram_q_norm.weight"},
    {"engram.k_weight", "engram_k_norm.weight"},
};

// "attn.wq_a.weight" / "attn.wq_a.scale" -> "attn.wq_a" (a weight and its block scales are one
// GGUF tensor); names without such a suffix stay as they are
std::string strip_weight_or_scale(const std::string& s) {
  for (const std::string_view suf : {".weight", ".scale"})
    if (s.size() > suf.size() && s.ends_with(suf)) return s.substr(0, s.size() - suf.size());
  return s;
}

// The dialect-A key of each config key config_from_gguf reads (the part after "text_config."),
// for messages: a GGUF file's user looks for the file's key.
constexpr NamePair kConfigKeys[] = {
    {"num_hidden_layers", "deepseek41.block_count"},
    {"max_position_embeddings", "deepseek41.context_length"},
    {"hidden_size", "deepseek41.embedding_length"},
    {"num_attention_heads", "deepseek41.attention.head_count"},
    {"num_key_value_heads", "deepseek41.attention.head_count_kv"},
    {"head_dim", "deepseek41.attention.key_length"},
    {"rms_norm_eps", "deepseek41.attention.layer_norm_rms_epsilon"},
    {"q_lora_rank", "deepseek41.attention.q_lora_rank"},
    {"sliding_window", "deepseek41.attention.sliding_window"},
    {"o_groups", "deepseek41.attention.output_group_count"},
    {"o_lora_rank", "deepseek41.attention.output_lora_rank"},
    {"compress_ratios", "deepseek41.attention.compress_ratios"},
    {"compress_rope_theta", "deepseek41.attention.compress_rope_freq_base"},
    {"index_n_heads", "deepseek41.attention.indexer.head_count"},
    {"index_head_dim", "deepseek41.attention.indexer.key_length"},
    {"index_topk", "deepseek41.attention.indexer.top_k"},
    {"candidate_source_layer_id", "deepseek41.attention.candidate_source_layer_id"},
    {"candidate_block_size", "deepseek41.attention.candidate_block_size"},
    {"candidate_topk_blocks", "deepseek41.attention.candidate_topk_blocks"},
    {"qk_rope_head_dim", "deepseek41.rope.dimension_count"},
    {"rope_theta", "deepseek41.rope.freq_base"},
    {"rope_scaling.factor", "deepseek41.rope.scaling.factor"},
    {"rope_scaling.original_max_position_embeddings",
     "deepseek41.rope.scaling.original_context_length"},
    {"rope_scaling.beta_fast", "deepseek41.rope.scaling.yarn_beta_fast"},
    {"rope_scaling.beta_slow", "deepseek41.rope.scaling.yarn_beta_slow"},
    {"n_routed_experts", "deepseek41.expert_count"},
    {"num_experts_per_tok", "deepseek41.expert_used_count"},
    {"n_shared_experts", "deepseek41.expert_shared_count"},
    {"moe_intermediate_size", "deepseek41.expert_feed_forward_length"},
    {"routed_scaling_factor", "deepseek41.expert_weights_scale"},
    {"swiglu_limit", "deepseek41.swiglu_clamp_exp"},
    {"hc_mult", "deepseek41.hyper_connection.count"},
    {"hc_sinkhorn_iters", "deepseek41.hyper_connection.sinkhorn_iterations"},
    {"hc_eps", "deepseek41.hyper_connection.epsilon"},
    {"engram_layer_ids", "deepseek41.engram.layer_ids"},
    {"engram_n_heads", "deepseek41.engram.head_count"},
    {"engram_head_dim", "deepseek41.engram.key_length"},
    {"engram_max_ngram_size", "deepseek41.engram.max_ngram_size"},
    {"vocab_size", "tokenizer.ggml.tokens"},
};

// Runs a ModelConfig check (check_limits, validate) on a config read from a file's keys: its
// "config.json: text_config.<key>: ..." errors are rethrown naming the file and the file's key.
template <class Check>
void checked_as_gguf(const std::string& label, Check&& check) {
  try {
    check();
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    if (m.starts_with("config.json: ")) m = m.substr(13);
    const std::string_view tail = std::string_view(m).substr(std::min<size_t>(m.size(), 12));
    const NamePair* best = nullptr;
    for (const NamePair& p : kConfigKeys) {
      const std::string_view hf = p.release;
      if (m.starts_with("text_config.") && tail.starts_with(hf) && tail.size() > hf.size() &&
          (tail[hf.size()] == ':' || tail[hf.size()] == ' ') &&
          (!best || hf.size() > std::string_view(best->release).size()))
        best = &p;
    }
    if (best)
      m = std::string(best->gguf) + " (" + m.substr(0, 12 + std::strlen(best->release)) + ")" +
          m.substr(12 + std::strlen(best->release));
    fail(label, m);
  }
}

}  // namespace

DialectInfo detect_dialect(const Header& h) {
  DialectInfo d;
  const Value* arch = h.find("general.architecture");
  const std::string a = arch && arch->type == ValueType::kString ? std::string(arch->str) : "";
  const bool has_engram = has_tensor_like(h, ".engram_");
  if (a == "deepseek4") {
    const Value* bc = h.find("deepseek4.block_count");
    uint64_t blocks = 0;
    if (bc) try {
        blocks = get_uint(h, "deepseek4.block_count", "");
      } catch (const std::exception&) {
      }
    if (h.tensor("output_hc_fn.weight") || blocks == 43) {
      d = {Dialect::kV4, "DeepSeek-V4", "general.architecture is deepseek4 (a V4 model, not V4.1)"};
    } else if (blocks == 40 && has_engram) {
      d = {Dialect::kMislabelledV4_1, "mislabelled V4.1 (dialect E)",
           "general.architecture is deepseek4 but the file has Engram tensors: a V4.1 file "
           "converted before 2026-09-10; convert it again or rewrite its keys"};
    } else {
      d = {Dialect::kV4, "DeepSeek-V4", "general.architecture is deepseek4"};
    }
    return d;
  }
  if (a != kArch) {
    d.detail = "general.architecture is '" + a + "' (cedar reads deepseek41)";
    return d;
  }
  if (h.find(k("engram.encoding")) || h.find(k("config"))) {
    return {Dialect::kB, "B (ds4)", "deepseek41.engram.encoding / deepseek41.config present"};
  }
  if (has_tensor_like(h, ".engram_embed.") || h.find(k("engram.num_embeddings"))) {
    return {Dialect::kD, "D (mxxm-t)", "engram_embed tensors / engram.num_embeddings"};
  }
  if (h.find(k("engram.head_bucket_sizes")) || has_tensor_like(h, ".engram_embd_scale.")) {
    return {Dialect::kC, "C (tarruda)", "engram.head_bucket_sizes / engram_embd_scale tensors"};
  }
  const bool engram_table = has_tensor_like(h, ".engram_embd.weight");
  const bool no_engram = !has_engram && !h.find(k("engram.layer_ids"));
  if (engram_table || no_engram) {
    std::vector<std::string> missing;
    for (const char* key : {"engram.multipliers", "engram.primes", "engram.offsets",
                            "engram.token_map", "engram.pad_id"})
      if (engram_table && !h.find(k(key))) missing.push_back(k(key));
    if (missing.empty()) return {Dialect::kA, "A (llama.cpp converter)", "engram_embd tensors"};
    std::string m;
    for (const auto& s : missing) m += (m.empty() ? "" : ", ") + s;
    return {Dialect::kAIncomplete, "A (llama.cpp converter), incomplete",
            "Engram constants missing (" + m +
                "): a file published before 2026-09-11; repair its keys (KV-only) or convert it "
                "again"};
  }
  d.detail = "deepseek41 file of no known layout (Engram keys:";
  for (const auto& [key, v] : h.kv)
    if (key.find("engram") != std::string_view::npos) d.detail += " " + std::string(key);
  d.detail += ")";
  return d;
}

EngramKeys engram_keys(const ModelConfig& c) {
  EngramKeys e;
  const EngramLayout L = EngramLayout::build(c);
  for (size_t i = 0; i < L.layer_ids.size(); ++i) {
    for (const auto& order : L.primes[i])
      for (int64_t p : order) e.primes.push_back(uint64_t(p));
    for (int64_t o : L.offsets[i]) e.offsets.push_back(uint64_t(o));
    for (int64_t m : L.multipliers[i]) e.multipliers.push_back(uint64_t(m));
    e.rows.push_back(uint64_t(L.num_embeddings[i]));
  }
  return e;
}

std::string gguf_tensor_name(const std::string& release, int* expert, Dialect dialect) {
  if (expert) *expert = -1;
  for (const NamePair& p : kTop)
    if (release == p.release) return p.gguf;
  static const std::regex layer_re(R"(layers\.(\d+)\.(.+))");
  static const std::regex expert_re(R"(ffn\.experts\.(\d+)\.(w[123])\.(weight|scale))");
  std::smatch m;
  if (!std::regex_match(release, m, layer_re)) return "";
  const std::string blk = "blk." + m[1].str() + ".", rest = m[2].str();
  std::smatch e;
  if (std::regex_match(rest, e, expert_re)) {
    if (expert) *expert = std::stoi(e[1].str());
    const std::string w = e[2].str();
    return blk + (w == "w1"   ? "ffn_gate_exps.weight"
                  : w == "w3" ? "ffn_up_exps.weight"
                              : "ffn_down_exps.weight");
  }
  const std::string base = strip_weight_or_scale(rest);
  if (dialect == Dialect::kB)
    for (const NamePair& p : kLayerDs4)
      if (rest == p.release || base == p.release) return blk + p.gguf;
  for (const NamePair& p : kLayer)
    if (rest == p.release || base == p.release) return blk + p.gguf;
  return "";
}

void write_config_keys(const ModelConfig& c, Writer& w) {
  w.add_string("general.architecture", kArch);
  w.add_string("general.name",
               "cedar " + std::to_string(c.num_hidden_layers) + "-layer DeepSeek-V4.1");
  w.add_u32(k("block_count"), uint32_t(c.num_hidden_layers));
  w.add_u32(k("context_length"), uint32_t(c.max_position_embeddings));
  w.add_u32(k("embedding_length"), uint32_t(c.hidden_size));
  w.add_u32(k("attention.head_count"), uint32_t(c.num_attention_heads));
  w.add_u32(k("attention.head_count_kv"), uint32_t(c.num_key_value_heads));
  w.add_u32(k("attention.key_length"), uint32_t(c.head_dim));
  w.add_u32(k("attention.value_length"), uint32_t(c.head_dim));
  w.add_f32(k("attention.layer_norm_rms_epsilon"), float(c.rms_norm_eps));
  w.add_u32(k("attention.q_lora_rank"), uint32_t(c.q_lora_rank));
  w.add_u32(k("attention.sliding_window"), uint32_t(c.sliding_window));
  w.add_u32(k("attention.output_group_count"), uint32_t(c.o_groups));
  w.add_u32(k("attention.output_lora_rank"), uint32_t(c.o_lora_rank));
  w.add_i32_array(k("attention.compress_ratios"),
                  std::vector<int32_t>(c.compress_ratios.begin(), c.compress_ratios.end()));
  w.add_f32(k("attention.compress_rope_freq_base"), float(c.compress_rope_theta));
  w.add_u32(k("attention.indexer.head_count"), uint32_t(c.index_n_heads));
  w.add_u32(k("attention.indexer.key_length"), uint32_t(c.index_head_dim));
  w.add_u32(k("attention.indexer.top_k"), uint32_t(c.index_topk));
  if (c.candidate_source_layer_id >= 0) {
    w.add_u32(k("attention.candidate_source_layer_id"), uint32_t(c.candidate_source_layer_id));
    w.add_u32(k("attention.candidate_block_size"), uint32_t(c.candidate_block_size));
    w.add_u32(k("attention.candidate_topk_blocks"), uint32_t(c.candidate_topk_blocks));
  }
  w.add_u32(k("rope.dimension_count"), uint32_t(c.qk_rope_head_dim));
  w.add_f32(k("rope.freq_base"), float(c.rope_theta));
  if (c.original_max_position_embeddings > 0) {
    w.add_string(k("rope.scaling.type"), "yarn");
    w.add_f32(k("rope.scaling.factor"), float(c.rope_factor));
    w.add_u32(k("rope.scaling.original_context_length"),
              uint32_t(c.original_max_position_embeddings));
    w.add_f32(k("rope.scaling.yarn_beta_fast"), float(c.beta_fast));
    w.add_f32(k("rope.scaling.yarn_beta_slow"), float(c.beta_slow));
  }
  w.add_u32(k("expert_count"), uint32_t(c.n_routed_experts));
  w.add_u32(k("expert_used_count"), uint32_t(c.num_experts_per_tok));
  w.add_u32(k("expert_shared_count"), uint32_t(c.n_shared_experts));
  w.add_u32(k("expert_feed_forward_length"), uint32_t(c.moe_intermediate_size));
  w.add_f32(k("expert_weights_scale"), float(c.routed_scaling_factor));
  w.add_bool(k("expert_weights_norm"), c.norm_topk_prob);
  w.add_u32(k("expert_gating_func"), 4);  // SQRTSOFTPLUS
  const std::vector<float> clamp(size_t(c.num_hidden_layers), float(c.swiglu_limit));
  w.add_f32_array(k("swiglu_clamp_exp"), clamp);
  w.add_f32_array(k("swiglu_clamp_shexp"), clamp);
  w.add_u32(k("hyper_connection.count"), uint32_t(c.hc_mult));
  w.add_u32(k("hyper_connection.sinkhorn_iterations"), uint32_t(c.hc_sinkhorn_iters));
  w.add_f32(k("hyper_connection.epsilon"), float(c.hc_eps));
  w.add_u32(k("hash_layer_count"), 0);
  if (!c.engram_layer_ids.empty()) {
    const EngramKeys e = engram_keys(c);
    w.add_i32_array(k("engram.layer_ids"),
                    std::vector<int32_t>(c.engram_layer_ids.begin(), c.engram_layer_ids.end()));
    w.add_u32(k("engram.head_count"), uint32_t(c.engram_n_heads));
    w.add_u32(k("engram.key_length"), uint32_t(c.engram_head_dim));
    w.add_u32(k("engram.max_ngram_size"), uint32_t(c.engram_max_ngram_size));
    w.add_u64_array(k("engram.multipliers"), e.multipliers);
    w.add_u64_array(k("engram.primes"), e.primes);
    w.add_u64_array(k("engram.offsets"), e.offsets);
    // token_map and pad_id come from the tokenizer: the converter writes them
  }
}

ModelConfig config_from_gguf(const Header& h, const std::string& label) {
  const DialectInfo d = detect_dialect(h);
  if (d.dialect == Dialect::kB) return config_from_ds4(h, label);
  if (d.dialect != Dialect::kA)
    fail(label, "GGUF layout " + (d.name.empty() ? std::string("unknown") : d.name) +
                    " is not one cedar reads yet: " + d.detail);
  ModelConfig c;
  // the roles of the release's tensors: whatever a GGUF stores them as, the FP8 and FP4 roles keep
  // their semantics (spec §3.6; issue 15 item 4)
  c.quant_method = "fp8";
  c.weight_block_size = {32, 32};
  c.scale_fmt = "ue8m0";
  c.expert_dtype = "fp4";
  c.num_hidden_layers = get_i(h, k("block_count"), label);
  c.max_position_embeddings = int64_t(get_uint(h, k("context_length"), label));
  c.hidden_size = get_i(h, k("embedding_length"), label);
  c.num_attention_heads = get_i(h, k("attention.head_count"), label);
  c.num_key_value_heads = get_i(h, k("attention.head_count_kv"), label);
  c.head_dim = get_i(h, k("attention.key_length"), label);
  if (get_i(h, k("attention.value_length"), label) != c.head_dim)
    fail(label, k("attention.value_length") + " differs from " + k("attention.key_length"));
  c.rms_norm_eps = get_float(h, k("attention.layer_norm_rms_epsilon"), label);
  c.q_lora_rank = get_i(h, k("attention.q_lora_rank"), label);
  c.sliding_window = get_i(h, k("attention.sliding_window"), label);
  c.o_groups = get_i(h, k("attention.output_group_count"), label);
  c.o_lora_rank = get_i(h, k("attention.output_lora_rank"), label);
  c.compress_ratios = get_iv(h, k("attention.compress_ratios"), label);
  c.compress_rope_theta = get_float(h, k("attention.compress_rope_freq_base"), label);
  c.index_n_heads = get_i(h, k("attention.indexer.head_count"), label);
  c.index_head_dim = get_i(h, k("attention.indexer.key_length"), label);
  c.index_topk = get_i(h, k("attention.indexer.top_k"), label);
  c.qk_rope_head_dim = get_i(h, k("rope.dimension_count"), label);
  c.rope_theta = get_float(h, k("rope.freq_base"), label);
  if (has_key(h, k("rope.scaling.type"))) {
    if (get_string(h, k("rope.scaling.type"), label) != "yarn")
      fail(label, k("rope.scaling.type") + " must be yarn");
    c.rope_factor = get_float(h, k("rope.scaling.factor"), label);
    c.original_max_position_embeddings =
        int64_t(get_uint(h, k("rope.scaling.original_context_length"), label));
    c.beta_fast = get_float(h, k("rope.scaling.yarn_beta_fast"), label);
    c.beta_slow = get_float(h, k("rope.scaling.yarn_beta_slow"), label);
  }
  c.n_routed_experts = get_i(h, k("expert_count"), label);
  c.num_experts_per_tok = get_i(h, k("expert_used_count"), label);
  c.n_shared_experts = get_i(h, k("expert_shared_count"), label);
  c.moe_intermediate_size = get_i(h, k("expert_feed_forward_length"), label);
  c.routed_scaling_factor = get_float(h, k("expert_weights_scale"), label);
  c.norm_topk_prob = get_bool(h, k("expert_weights_norm"), label);
  if (get_uint(h, k("expert_gating_func"), label) != 4)
    fail(label, k("expert_gating_func") + " must be 4 (sqrtsoftplus)");
  const std::vector<double> clamp = get_float_array(h, k("swiglu_clamp_exp"), label);
  if (clamp.empty() || get_float_array(h, k("swiglu_clamp_shexp"), label) != clamp ||
      std::any_of(clamp.begin(), clamp.end(), [&](double v) { return v != clamp[0]; }))
    fail(label, "swiglu_clamp_exp / swiglu_clamp_shexp must hold one limit for every layer");
  c.swiglu_limit = clamp[0];
  c.hc_mult = get_i(h, k("hyper_connection.count"), label);
  c.hc_sinkhorn_iters = get_i(h, k("hyper_connection.sinkhorn_iterations"), label);
  c.hc_eps = get_float(h, k("hyper_connection.epsilon"), label);
  if (has_key(h, k("hash_layer_count")) && get_uint(h, k("hash_layer_count"), label) != 0)
    fail(label, k("hash_layer_count") + " must be 0 (V4.1 has no hash layers)");
  c.vocab_size = int64_t(get_string_array(h, "tokenizer.ggml.tokens", label).size());
  if (has_key(h, "tokenizer.ggml.bos_token_id"))
    c.bos_token_id = int64_t(get_uint(h, "tokenizer.ggml.bos_token_id", label));
  if (has_key(h, "tokenizer.ggml.eos_token_id"))
    c.eos_token_id = int64_t(get_uint(h, "tokenizer.ggml.eos_token_id", label));
  if (has_key(h, "tokenizer.ggml.padding_token_id"))
    c.pad_token_id = int64_t(get_uint(h, "tokenizer.ggml.padding_token_id", label));

  // every count bounded before the loops over layers and the Engram derivation below
  checked_as_gguf(label, [&c] { c.check_limits(); });

  // layer roles from tensor presence (spec §3.3.3)
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    if (h.tensor(blk + "attn_compressor_kv.weight")) c.kv_source_layer_ids.push_back(l);
    if (h.tensor(blk + "indexer.attn_q_b.weight")) c.index_source_layer_ids.push_back(l);
  }
  const bool cand = has_key(h, k("attention.candidate_source_layer_id"));
  if (cand) {
    c.candidate_source_layer_id = get_i(h, k("attention.candidate_source_layer_id"), label);
    c.candidate_block_size = get_i(h, k("attention.candidate_block_size"), label);
    c.candidate_topk_blocks = get_i(h, k("attention.candidate_topk_blocks"), label);
  } else if (!c.index_source_layer_ids.empty()) {
    fail(label, "the candidate-mask keys (" + k("attention.candidate_source_layer_id") +
                    ", ...) are missing: cedar uses the release's 20/8/2048 only for the release "
                    "shape, which it does not assume");
  }

  // Engram: the shape keys, then the constants the file carries against cedar's own derivation
  if (has_key(h, k("engram.layer_ids"))) {
    c.engram_layer_ids = get_iv(h, k("engram.layer_ids"), label);
    c.engram_n_heads = get_i(h, k("engram.head_count"), label);
    c.engram_head_dim = get_i(h, k("engram.key_length"), label);
    c.engram_max_ngram_size = get_i(h, k("engram.max_ngram_size"), label);
    const std::vector<uint64_t> primes = get_uint_array(h, k("engram.primes"), label);
    const std::vector<int64_t> token_map = get_int_array(h, k("engram.token_map"), label);
    if (primes.empty() || token_map.empty())
      fail(label, k("engram.primes") + " and " + k("engram.token_map") + " must not be empty");
    c.engram_compressed_vocab_size = *std::max_element(token_map.begin(), token_map.end()) + 1;
    // the primes follow engram_vocab_size - 1: the first is the smallest prime above it
    int64_t v = int64_t(primes[0]);
    while (v > 2 && !is_prime_u64(uint64_t(v - 1))) --v;
    c.engram_vocab_size = v;
    const uint64_t pad = get_uint(h, k("engram.pad_id"), label);
    c.engram_pad_token_id = -1;
    for (size_t i = 0; i < token_map.size() && c.engram_pad_token_id < 0; ++i)
      if (token_map[i] == int64_t(pad)) c.engram_pad_token_id = int(i);
    if (c.engram_pad_token_id < 0)
      fail(label, k("engram.pad_id") + " " + std::to_string(pad) + " is no token's mapped id");
    checked_as_gguf(label, [&c] { c.check_limits(); });  // the primes are searched for below
    const EngramKeys want = engram_keys(c);
    c.engram_num_embeddings.assign(want.rows.begin(), want.rows.end());
    if (primes != want.primes)
      fail(label, k("engram.primes") + " differ from the primes of the V4.1 layout");
    if (get_uint_array(h, k("engram.offsets"), label) != want.offsets)
      fail(label, k("engram.offsets") + " are not the running sums of the primes");
    if (get_uint_array(h, k("engram.multipliers"), label) != want.multipliers)
      fail(label, k("engram.multipliers") + " differ from the V4.1 hash multipliers");
  }
  checked_as_gguf(label, [&c] { c.validate(); });
  return c;
}

}  // namespace cedar::gguf
