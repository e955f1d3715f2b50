// Model accounting for `cedar inspect`: parameter counts taken from the tensor inventory
// (expected_tensors, so they are what a checkpoint holds) and the global KV bytes per token
// computed from the cache layout (spec v41-architecture.md §2.4, §10).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/config.h"

namespace cedar {

// Logical parameters of one stored tensor: packed FP4 (I8) holds two per byte, UE8M0 block scales
// (F8_E8M0) are metadata and count zero, everything else one per element.
int64_t tensor_params(const ExpectedTensor& t);

struct ParamCounts {
  // Totals by part (disjoint). Backbone = embed, head, final norm and the 40 layers without their
  // Engram modules; DSpark = mtp.*; vision = vision.*, aligner.*, image_*.
  int64_t backbone = 0;
  int64_t embedding = 0;           // embed.weight (inside backbone)
  int64_t head = 0;                // head.weight (inside backbone)
  int64_t engram_tables = 0;       // layers.*.engram.embed.weight
  int64_t engram_projections = 0;  // layers.*.engram.{wkv,q_weight,k_weight}
  int64_t dspark = 0;
  int64_t vision = 0;
  int64_t total() const { return backbone + engram_tables + engram_projections + dspark + vision; }

  // Activated per token (backbone only; embedding lookup excluded, routed experts counted
  // num_experts_per_tok of n_routed_experts).
  // Generated token: every layer (attention incl. compressor/indexer, router, the selected and
  // the shared experts, mHC, norms) + final norm + head.
  int64_t active_generated = 0;
  // Prompt token under CED (spec §9.2): layers below the candidate source fully, plus the
  // candidate source's global-KV projection (attn_norm, compressor, indexer wk/k_norm); the
  // decoder replay of the last window and the head run once per prompt, not per token.
  int64_t active_prompt = 0;
  // Engram per token: wkv + q/k weights + the gathered rows ((max_ngram-1) * heads * head_dim).
  int64_t engram_active_generated = 0;  // all Engram layers
  int64_t engram_active_prompt = 0;     // Engram layers below the candidate source

  int64_t checkpoint_tensors = 0;
  int64_t checkpoint_bytes = 0;
};

ParamCounts count_params(const ModelConfig& cfg, const std::vector<ExpectedTensor>& inventory);

// The global (always-resident) KV cache per token and the fixed per-sequence state.
struct KvLayout {
  struct Source {
    int layer;
    int ratio;
  };
  std::vector<Source> sources;       // KV-source layers: each owns compressed main KV + index keys
  int64_t main_row_bytes = 0;        // head_dim/2 (E2M1 packed) + head_dim/16 (E4M3 scale per 16)
  int64_t index_row_bytes = 0;       // index_head_dim/2 (E2M1) + index_head_dim/32 (UE8M0 per 32)
  double main_bytes_per_token = 0;   // sum over sources of main_row_bytes / ratio
  double index_bytes_per_token = 0;  // sum over sources of index_row_bytes / ratio
  double bytes_per_token() const { return main_bytes_per_token + index_bytes_per_token; }
  int64_t window_row_bytes = 0;           // head_dim (E4M3) + head_dim/32 (UE8M0)
  int64_t window_state_bytes = 0;         // n_layers * window * window_row_bytes (backbone rings)
  int64_t dspark_window_state_bytes = 0;  // the DSpark stages' rings (not in window_state_bytes)
  // Bytes of a cache holding n tokens: each source's floor(n / ratio) complete rows (a trailing
  // incomplete ratio-2 group has no row yet) + the backbone window rings (fixed allocation).
  int64_t bytes_for_tokens(int64_t n) const;
};

KvLayout kv_layout(const ModelConfig& cfg);

}  // namespace cedar
