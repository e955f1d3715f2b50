#include "model/param_count.h"

#include <stdexcept>

namespace cedar {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// "layers.17.attn.wq_a" -> 17 and the rest "attn.wq_a"; -1 when not a backbone layer tensor.
int layer_of(const std::string& name, std::string* rest) {
  if (!starts_with(name, "layers.")) return -1;
  size_t dot = name.find('.', 7);
  if (dot == std::string::npos) return -1;
  *rest = name.substr(dot + 1);
  return std::stoi(name.substr(7, dot - 7));
}

// The part of the candidate-source layer that runs for every prompt row under CED: the input
// norm and the global-KV projection (compressor + index key). Its query side, MoE and the mHC
// mixes run only on the replayed rows. (The layer's input collapse uses the previous layer's
// lagged coefficients, already counted there.)
bool is_ced_projection(const std::string& rest) {
  return rest == "attn_norm.weight" || starts_with(rest.c_str(), "attn.compressor.") ||
         starts_with(rest.c_str(), "attn.indexer.wk.") || rest == "attn.indexer.wk" ||
         starts_with(rest.c_str(), "attn.indexer.k_norm.");
}

}  // namespace

int64_t tensor_params(const ExpectedTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  if (t.dtype == DType::F8_E8M0) return 0;
  if (t.dtype == DType::I8) return 2 * n;
  return n;
}

ParamCounts count_params(const ModelConfig& c, const std::vector<ExpectedTensor>& inv) {
  ParamCounts p;
  const int cand = c.candidate_source_layer_id;
  for (const auto& t : inv) {
    int64_t bytes = int64_t(dtype_size(t.dtype));
    for (int64_t d : t.shape) bytes *= d;
    p.checkpoint_tensors += 1;
    p.checkpoint_bytes += bytes;
    const int64_t n = tensor_params(t);
    const std::string& name = t.name;
    if (starts_with(name, "mtp.")) {
      p.dspark += n;
      continue;
    }
    // the tower, the aligner, the delimiters, and the routers' image-row bias (images only)
    if (starts_with(name, "vision.") || starts_with(name, "aligner.") ||
        starts_with(name, "image_") || name.find(".ffn.gate.bias_vl") != std::string::npos) {
      p.vision += n;
      continue;
    }
    std::string rest;
    const int l = layer_of(name, &rest);
    if (l >= 0 && starts_with(rest.c_str(), "engram.")) {
      if (starts_with(rest.c_str(), "engram.embed.")) {
        p.engram_tables += n;
      } else {
        p.engram_projections += n;
        p.engram_active_generated += n;
        if (cand < 0 || l < cand) p.engram_active_prompt += n;
      }
      continue;
    }
    p.backbone += n;
    if (name == "embed.weight") {
      p.embedding += n;
      continue;  // a lookup, not a matmul: excluded from the activated counts
    }
    if (name == "head.weight") p.head += n;
    if (l < 0) {  // head, final norm: once per generated token; per prompt only for the last row
      p.active_generated += n;
      continue;
    }
    // Routed experts: num_experts_per_tok of n_routed_experts run per token (all experts of a
    // layer have the same shapes, so the fraction is exact).
    int64_t active = n;
    if (starts_with(rest.c_str(), "ffn.experts."))
      active = n * c.num_experts_per_tok / c.n_routed_experts;
    p.active_generated += active;
    if (cand < 0 || l < cand)
      p.active_prompt += active;
    else if (l == cand && is_ced_projection(rest))
      p.active_prompt += active;
  }
  // Gathered Engram rows per token (the tables themselves are a lookup).
  const int64_t rows = int64_t(c.engram_max_ngram_size - 1) * c.engram_n_heads * c.engram_head_dim;
  for (int l : c.engram_layer_ids) {
    p.engram_active_generated += rows;
    if (cand < 0 || l < cand) p.engram_active_prompt += rows;
  }
  return p;
}

KvLayout kv_layout(const ModelConfig& c) {
  KvLayout k;
  k.main_row_bytes = c.head_dim / 2 + c.head_dim / 16;
  k.index_row_bytes = c.index_head_dim / 2 + c.index_head_dim / 32;
  for (int l : c.kv_source_layer_ids) {
    const int r = c.compress_ratios.at(size_t(l));
    if (r <= 0)
      throw std::runtime_error("kv_layout: KV source layer " + std::to_string(l) + " has ratio 0");
    k.sources.push_back({l, r});
    k.main_bytes_per_token += double(k.main_row_bytes) / r;
    k.index_bytes_per_token += double(k.index_row_bytes) / r;
  }
  k.window_row_bytes = c.head_dim + c.head_dim / 32;
  k.window_state_bytes = int64_t(c.num_hidden_layers) * c.sliding_window * k.window_row_bytes;
  k.dspark_window_state_bytes =
      int64_t(c.num_nextn_predict_layers) * c.sliding_window * k.window_row_bytes;
  return k;
}

int64_t KvLayout::bytes_for_tokens(int64_t n) const {
  int64_t b = window_state_bytes;
  for (const auto& s : sources) b += (n / s.ratio) * (main_row_bytes + index_row_bytes);
  return b;
}

}  // namespace cedar
