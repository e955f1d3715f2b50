// Accounting for `cedar bench` (DESIGN.md "Performance method"): the bytes of weights + KV one
// decoded token must read (decode is bandwidth-bound) and the FLOPs one prompt row costs under
// exact and CED prefill (prefill is compute-bound). Everything is counted from the config and
// the tensor inventory (expected_tensors), never measured, so the numbers are the model's own
// lower bound on traffic/work; `cedar bench` divides them by measured times.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/checkpoint.h"
#include "model/config.h"

namespace cedar::bench {

// Bytes read by one decode step for the token at position `context` (the state already holds
// `context` tokens). Weights in their checkpoint storage dtypes, block scales included.
struct DecodeTraffic {
  int64_t context = 0;
  // --- weights (bytes) ---
  int64_t attention = 0;            // wq_a, wq_b, wkv, wo_a, wo_b (FP8 + scales), q/kv norms, sink
  int64_t compressor = 0;           // KV sources: compressor wkv/wgate/norm + indexer wk/k_norm
  int64_t indexer = 0;              // index sources: indexer wq_b (FP8) + weights_proj
  int64_t router = 0;               // ffn.gate weight + bias
  int64_t routed_experts = 0;       // num_experts_per_tok of the layer's routed experts (FP4)
  int64_t routed_expert_bytes = 0;  // one routed expert of one layer (w1, w2, w3 + scales)
  int64_t shared_experts = 0;       // the shared expert (FP8)
  int64_t mhc = 0;                  // hc_{attn,ffn}_{fn,base,scale} (fp32)
  int64_t norms = 0;                // attn_norm, ffn_norm of every layer + the final norm
  int64_t engram = 0;               // Engram wkv + q/k weights + the gathered table rows (+ scales)
  int64_t embedding_row = 0;        // one bf16 row of embed.weight
  int64_t head = 0;                 // head.weight (bf16, every vocab row)
  // When an output group of wo_a splits a 32-row scale group the engine keeps a bf16 copy (as
  // the reference's convert.py does) and streams this many bytes more than stored; otherwise 0
  // (the bf16-weight product reads the FP8 bytes).
  int64_t wo_a_engine_extra = 0;
  // Logical parameters read (packed FP4 = 2 per byte, UE8M0 scales 0), excluding the embedding
  // row and Engram: equals `cedar inspect`'s "activated per generated token" for a text model.
  int64_t weight_params = 0;
  // --- KV (bytes) ---
  int64_t kv_window = 0;      // every layer: min(context+1, window) rows of E4M3 + UE8M0
  int64_t kv_compressed = 0;  // every compressed layer: its Top-K rows (FP4 + E4M3 per 16)
  int64_t kv_index_keys = 0;  // every index source: the keys it scores (FP4 + UE8M0 per 32)

  int64_t weights() const {
    return attention + compressor + indexer + router + routed_experts + shared_experts + mhc +
           norms + engram + embedding_row + head;
  }
  int64_t kv() const { return kv_window + kv_compressed + kv_index_keys; }
  // The weights of a batched pass that ran `expert_runs` routed (layer, expert) products: each
  // expert that received rows is read once, every other weight once.
  int64_t weights_of_pass(double expert_runs) const {
    return weights() - routed_experts + int64_t(expert_runs * double(routed_expert_bytes));
  }
  int64_t total() const { return weights() + kv(); }
  // What the engine streams: weights with wo_a in bf16, plus KV.
  int64_t engine_total() const { return total() + wo_a_engine_extra; }
};

// Throws std::runtime_error (naming the key) when the config is not a V4.1 graph. cfg need not be
// validate()d: a validated copy is made. `stored`: bytes of the tensors a source stores otherwise
// than the release does (stored_bytes() of a GGUF model; the rest count in their release dtype).
DecodeTraffic decode_traffic(const ModelConfig& cfg, int64_t context,
                             const std::map<std::string, int64_t>& stored = {});
// The tensors of `ck` stored otherwise than the release does: each GGUF block weight's bytes, 0
// for the scale it has not got.
std::map<std::string, int64_t> stored_bytes(const Checkpoint& ck);

// Which prefill plan (spec §9.2).
enum class PrefillPlan {
  kExact,  // every layer on every prompt row
  kCed,    // encoder (layers below the candidate source) + the candidate source's global-KV
           // projection on every row; the rest of the candidate source and the layers above it
           // on the last min(window, N) rows with window attention truncated at the replay start
           // (the TokenSpeed variant: truncation from the candidate source itself)
};

// Floating-point operations of a whole prompt of n tokens (no prefix cache), counted as 2 per
// multiply-add.
struct PrefillFlops {
  int64_t prompt = 0;
  PrefillPlan plan = PrefillPlan::kExact;
  // Rows each part runs on (layer-rows summed over layers, for the report).
  int64_t layer_rows = 0;
  // 2 x MACs of every weight GEMM: projections, compressor/indexer, router, the selected routed
  // experts + the shared expert, mHC hc_fn, Engram wkv; head once (last row's logits).
  double weight_gemm = 0;
  // sparse attention: 4 x heads x head_dim per (query row, key) (q.k and p.v) over the window
  // rows and the Top-K compressed rows of every layer.
  double attention = 0;
  // indexer scoring: 2 x index_n_heads x index_head_dim per (query row, scored key).
  double indexer = 0;

  double total() const { return weight_gemm + attention + indexer; }
  double per_row() const { return prompt > 0 ? total() / double(prompt) : 0.0; }
  double gemm_per_row() const { return prompt > 0 ? weight_gemm / double(prompt) : 0.0; }
};

// The CED split exists (as in Transformer::has_ced): a candidate source, no KV source above it
// and no Engram layer at or above it.
bool has_ced_split(const ModelConfig& cfg);

// n >= 1. CED on a config without a CED split is the exact plan.
PrefillFlops prefill_flops(const ModelConfig& cfg, int64_t n, PrefillPlan plan);

// FLOPs of one decode step at position `context` (every layer on one row, head included),
// split like PrefillFlops (prompt = 1, plan exact). Equals the exact prefill's increment from
// `context` to `context + 1` rows plus the head.
PrefillFlops decode_flops(const ModelConfig& cfg, int64_t context);

}  // namespace cedar::bench
