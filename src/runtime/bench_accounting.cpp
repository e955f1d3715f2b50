#include "runtime/bench_accounting.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/param_count.h"

namespace cedar::bench {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// "layers.17.attn.wq_a.weight" -> 17 and "attn.wq_a.weight"; -1 for a non-layer tensor.
int layer_of(const std::string& name, std::string* rest) {
  if (!starts_with(name, "layers.")) return -1;
  const size_t dot = name.find('.', 7);
  if (dot == std::string::npos) return -1;
  *rest = name.substr(dot + 1);
  return std::stoi(name.substr(7, dot - 7));
}

int64_t tensor_bytes(const ExpectedTensor& t) {
  int64_t b = int64_t(dtype_size(t.dtype));
  for (int64_t d : t.shape) b *= d;
  return b;
}

ModelConfig validated(const ModelConfig& cfg) {
  ModelConfig c = cfg;
  c.validate();
  return c;
}

// Keys the indexer of `plan` scores for a query at position p (NUMERICS §C): every visible row,
// or at an index source above the candidate source only the candidate pool: the newest block
// (forced in) + the best candidate_topk_blocks-1 others, all full, when there are more blocks
// than that (every visible row's score is finite, so every kept block counts).
int64_t scored_keys(const ModelConfig& c, const LayerPlan& plan, int64_t p) {
  const int r = c.compress_ratios.at(size_t(plan.layer));
  const int64_t n_vis = (p + 1) / r;
  if (!plan.uses_candidates || n_vis == 0) return n_vis;
  const int64_t B = c.candidate_block_size, T = c.candidate_topk_blocks;
  const int64_t nblk = (n_vis + B - 1) / B;
  if (nblk <= T) return n_vis;
  return (T - 1) * B + (n_vis - (nblk - 1) * B);
}

int64_t topk_rows(const ModelConfig& c, int ratio, int64_t p) {
  if (ratio <= 0) return 0;
  return std::min<int64_t>(c.index_topk, (p + 1) / ratio);
}

// Per layer multiply-adds of one row through each part (logical weight elements).
struct LayerMacs {
  int64_t per_row = 0;    // everything that runs once per row the layer processes
  int64_t ced_proj = 0;   // the part of per_row that is the global-KV projection (compressor)
  int64_t per_group = 0;  // indexer wk: once per completed compressed row
};

// The 2-D weights each row multiplies by: projections, hc_fn, router, the selected experts
// (num_experts_per_tok of n_routed, all experts of a layer have the same shape), the shared
// expert, Engram wkv. Vectors and elementwise weights are not GEMMs.
std::vector<LayerMacs> layer_macs(const ModelConfig& c, const std::vector<ExpectedTensor>& inv) {
  std::vector<LayerMacs> m(size_t(c.num_hidden_layers));
  std::vector<int64_t> routed(m.size(), 0);
  for (const auto& t : inv) {
    std::string rest;
    const int l = layer_of(t.name, &rest);
    if (l < 0 || t.shape.size() != 2) continue;
    if (t.dtype == DType::F8_E8M0) continue;  // block scales
    // the Engram table is a lookup; its q/k weights [hc, D] scale elementwise
    if (starts_with(rest, "engram.embed.") || rest == "engram.q_weight" ||
        rest == "engram.k_weight")
      continue;
    const int64_t macs = tensor_params(t);
    auto& lm = m[size_t(l)];
    if (starts_with(rest, "ffn.experts.")) {
      routed[size_t(l)] += macs;
      continue;
    }
    if (starts_with(rest, "attn.indexer.wk.")) {
      lm.per_group += macs;
      continue;
    }
    lm.per_row += macs;
    if (starts_with(rest, "attn.compressor.")) lm.ced_proj += macs;
  }
  // all routed experts of a layer have the same shapes: k of n is an exact fraction of the sum
  for (size_t l = 0; l < m.size(); ++l)
    m[l].per_row += routed[l] * c.num_experts_per_tok / c.n_routed_experts;
  return m;
}

}  // namespace

bool has_ced_split(const ModelConfig& cfg) {
  const int cand = cfg.candidate_source_layer_id;
  if (cand < 0) return false;
  for (int l = cand; l < cfg.num_hidden_layers; ++l) {
    const bool kv_source = std::find(cfg.kv_source_layer_ids.begin(), cfg.kv_source_layer_ids.end(),
                                     l) != cfg.kv_source_layer_ids.end();
    const bool engram = std::find(cfg.engram_layer_ids.begin(), cfg.engram_layer_ids.end(), l) !=
                        cfg.engram_layer_ids.end();
    if ((kv_source && l != cand) || engram) return false;
  }
  return true;
}

std::map<std::string, int64_t> stored_bytes(const Checkpoint& ck) {
  std::map<std::string, int64_t> m;
  for (const auto& [name, b] : ck.block_weights()) {
    m[name] = int64_t(b.nbytes);
    m[name.substr(0, name.size() - 7) + ".scale"] = 0;  // ".weight"
  }
  return m;
}

DecodeTraffic decode_traffic(const ModelConfig& cfg_in, int64_t context,
                             const std::map<std::string, int64_t>& stored) {
  if (context < 0) throw std::runtime_error("decode_traffic: context must be >= 0");
  const ModelConfig c = validated(cfg_in);
  const auto inv = expected_tensors(c);
  DecodeTraffic d;
  d.context = context;
  int64_t routed = 0, routed_params = 0;
  std::set<int> expert_layers;
  for (const auto& t : inv) {
    const std::string& name = t.name;
    if (starts_with(name, "mtp.") || starts_with(name, "vision.") ||
        starts_with(name, "aligner.") || starts_with(name, "image_"))
      continue;  // DSpark, vision: not on the text decode path
    const auto as_stored = stored.find(name);
    const int64_t bytes = as_stored != stored.end() ? as_stored->second : tensor_bytes(t);
    const int64_t params = tensor_params(t);
    std::string rest;
    const int l = layer_of(name, &rest);
    if (l < 0) {
      if (name == "embed.weight") {
        d.embedding_row = int64_t(c.hidden_size) * int64_t(dtype_size(t.dtype));
        continue;
      }
      if (name == "head.weight")
        d.head += bytes;
      else
        d.norms += bytes;  // final norm
      d.weight_params += params;
      continue;
    }
    if (starts_with(rest, "engram.")) {
      if (!starts_with(rest, "engram.embed.")) d.engram += bytes;
      continue;  // gathered rows added below
    }
    if (rest == "ffn.gate.bias_vl") continue;  // the vision-language router bias: images only
    d.weight_params += starts_with(rest, "ffn.experts.") ? 0 : params;
    if (rest == "attn_norm.weight" || rest == "ffn_norm.weight") {
      d.norms += bytes;
    } else if (starts_with(rest, "attn.compressor.") || starts_with(rest, "attn.indexer.wk.") ||
               starts_with(rest, "attn.indexer.k_norm.")) {
      d.compressor += bytes;
    } else if (starts_with(rest, "attn.indexer.")) {
      d.indexer += bytes;
    } else if (starts_with(rest, "attn.")) {
      d.attention += bytes;
      // the engine reads wo_a in FP8 unless an output group splits a 32-row scale group
      if (c.o_lora_rank % 32 != 0) {
        if (rest == "attn.wo_a.weight") d.wo_a_engine_extra += 2 * params - bytes;
        if (rest == "attn.wo_a.scale") d.wo_a_engine_extra -= bytes;  // folded into the copy
      }
    } else if (starts_with(rest, "hc_")) {
      d.mhc += bytes;
    } else if (starts_with(rest, "ffn.gate.")) {
      d.router += bytes;
    } else if (starts_with(rest, "ffn.experts.")) {
      routed += bytes;
      expert_layers.insert(l);
      routed_params += params;
    } else if (starts_with(rest, "ffn.shared_experts.")) {
      d.shared_experts += bytes;
    } else {
      throw std::runtime_error("decode_traffic: unclassified tensor " + name);
    }
  }
  // every routed expert of a layer has the same shapes: k of n is an exact fraction
  d.routed_experts = routed * c.num_experts_per_tok / c.n_routed_experts;
  const int64_t moe_layers = int64_t(expert_layers.size());
  if (moe_layers > 0) d.routed_expert_bytes = routed / (moe_layers * c.n_routed_experts);
  d.weight_params += routed_params * c.num_experts_per_tok / c.n_routed_experts;
  // Engram: (max_ngram-1) x heads gathered rows of E4M3 + UE8M0 per 32, per Engram layer
  const int64_t ehd = c.engram_head_dim;
  const int64_t gathered =
      int64_t(c.engram_max_ngram_size - 1) * c.engram_n_heads * (ehd + ehd / 32);
  d.engram += int64_t(c.engram_layer_ids.size()) * gathered;

  // KV read by the step at position p = context
  const KvLayout kv = kv_layout(c);
  const int64_t p = context;
  for (const auto& plan : c.layers) {
    d.kv_window += std::min<int64_t>(p + 1, c.sliding_window) * kv.window_row_bytes;
    d.kv_compressed += topk_rows(c, plan.ratio, p) * kv.main_row_bytes;
    if (plan.is_index_source) d.kv_index_keys += scored_keys(c, plan, p) * kv.index_row_bytes;
  }
  return d;
}

PrefillFlops prefill_flops(const ModelConfig& cfg_in, int64_t n, PrefillPlan plan) {
  if (n < 1) throw std::runtime_error("prefill_flops: the prompt must have at least one token");
  const ModelConfig c = validated(cfg_in);
  const auto inv = expected_tensors(c);
  const auto macs = layer_macs(c, inv);
  const int cand = c.candidate_source_layer_id;
  const bool ced = plan == PrefillPlan::kCed && has_ced_split(c);
  const int64_t W = c.sliding_window;
  const int64_t R = std::min<int64_t>(W, n);  // decoder replay rows
  const int64_t s = n - R;                    // replay start
  const double attn_per_key = 4.0 * c.num_attention_heads * c.head_dim;
  const double idx_per_key = 2.0 * c.index_n_heads * c.index_head_dim;

  PrefillFlops f;
  f.prompt = n;
  f.plan = ced ? PrefillPlan::kCed : PrefillPlan::kExact;
  double gemm_macs = 0;
  for (const auto& pl : c.layers) {
    const auto& lm = macs[size_t(pl.layer)];
    const bool dec = ced && pl.layer >= cand;
    // rows running the layer's query side, MoE and mHC
    const int64_t first = dec ? s : 0;
    const int64_t rows = n - first;
    f.layer_rows += rows;
    if (dec && pl.layer == cand) {
      // projection on every row, the rest on the replay rows
      gemm_macs +=
          double(lm.ced_proj) * double(n) + double(lm.per_row - lm.ced_proj) * double(rows);
    } else {
      gemm_macs += double(lm.per_row) * double(rows);
    }
    // indexer wk: once per completed compressed row, on every row the compressor sees
    if (pl.is_kv_source) {
      const int64_t comp_rows = (dec && pl.layer > cand) ? rows : n;
      gemm_macs += double(lm.per_group) * double(comp_rows / pl.ratio);
    }
    for (int64_t p = first; p < n; ++p) {
      const int64_t wstart = std::max<int64_t>(dec ? s : 0, p - W + 1);
      const int64_t keys = (p - wstart + 1) + topk_rows(c, pl.ratio, p);
      f.attention += attn_per_key * double(keys);
      if (pl.is_index_source) f.indexer += idx_per_key * double(scored_keys(c, pl, p));
    }
  }
  // head on the last row only (LogitsWanted::kLast)
  gemm_macs += double(c.vocab_size) * double(c.hidden_size);
  f.weight_gemm = 2.0 * gemm_macs;
  return f;
}

PrefillFlops decode_flops(const ModelConfig& cfg_in, int64_t context) {
  if (context < 0) throw std::runtime_error("decode_flops: context must be >= 0");
  const ModelConfig c = validated(cfg_in);
  const auto macs = layer_macs(c, expected_tensors(c));
  const int64_t p = context, W = c.sliding_window;
  PrefillFlops f;
  f.prompt = 1;
  double gemm_macs = double(c.vocab_size) * double(c.hidden_size);  // head
  for (const auto& pl : c.layers) {
    const auto& lm = macs[size_t(pl.layer)];
    f.layer_rows += 1;
    gemm_macs += double(lm.per_row);
    if (pl.is_kv_source && (p + 1) % pl.ratio == 0) gemm_macs += double(lm.per_group);
    const int64_t keys = std::min<int64_t>(p + 1, W) + topk_rows(c, pl.ratio, p);
    f.attention += 4.0 * c.num_attention_heads * c.head_dim * double(keys);
    if (pl.is_index_source)
      f.indexer += 2.0 * c.index_n_heads * c.index_head_dim * double(scored_keys(c, pl, p));
  }
  f.weight_gemm = 2.0 * gemm_macs;
  return f;
}

}  // namespace cedar::bench
