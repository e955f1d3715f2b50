// MemoryPlan: what a run keeps in RAM, computed at start-up from the checkpoint and the serving
// shape before any weight is read (issue "Beyond RAM"; docs/MEMORY.md). Without a budget
// everything is mapped and the page cache decides. With --mem-budget the plan must fit in it:
// the dense weights (everything but the routed experts and the Engram tables, plus whatever a
// GGUF load re-encoded into memory: it cannot be read back from the file) stay resident, the
// KV state of every slot is reserved for the full context (as llama.cpp reserves n_ctx) unless
// a smaller pool shared by the slots is asked for (--kv-ram: the server then admits a request
// only while its KV fits, runtime/kv_pool.h), the prefix cache's RAM and the workspaces are
// counted. When the whole checkpoint does not fit in
// what is left, the Engram tables are read row by row from storage first (a token reads a few
// rows of them: forward/engram_store.h), then the routed experts get the rest -- all mapped
// when they fit, else an expert cache (forward/expert_cache.h). A plan that cannot fit is
// refused with the numbers and the flag to change.
#pragma once

#include <cstdint>
#include <string>

#include "model/checkpoint.h"
#include "model/param_count.h"

namespace cedar::runtime {

struct MemoryRequest {
  int64_t budget = 0;        // bytes for the whole process; 0: no budget
  int parallel = 1;          // sequences held at once (slots)
  int64_t ctx = 0;           // tokens per sequence; <= 0: the model's max_position_embeddings
  int64_t prefix_cache = 0;  // bytes the in-memory prefix cache may hold
  int batch_rows = 512;      // token rows per forward pass (prefill chunk or batched rows)
  int64_t kv_pool = 0;       // bytes of KV shared by the slots; 0: each slot a full context
  bool q8_head = false;      // --head-type q8: a Q8B copy of a bf16 head besides the mapped one
};

struct MemoryPlan {
  int64_t budget = 0;
  int parallel = 1;
  int64_t ctx = 0;
  int64_t checkpoint = 0;      // bytes of every tensor
  int64_t routed_experts = 0;  // ... of the routed experts (backbone and DSpark stages) in files
  int64_t engram_tables = 0;   // ... of the Engram tables (codes and scales) in files
  int64_t dense = 0;           // the rest: always mapped (or in memory)
  int64_t expert_slot = 0;     // the largest routed expert (one cache slot, rounded)
  int min_expert_slots = 0;    // experts one token selects in one layer (the least a pass needs)
  int64_t kv_per_sequence =
      0;                   // compressed KV + index keys for ctx tokens, window and DSpark rings
  int64_t kv = 0;          // parallel * kv_per_sequence, or the shared pool when smaller
  bool kv_shared = false;  // kv < parallel * kv_per_sequence: requests are admitted by KV need
  int64_t prefix_cache = 0;
  int64_t workspace = 0;         // logits, activations and scratch of one pass (an estimate)
  int64_t head_copy = 0;         // the head requantized at load (--head-type q8)
  int64_t expert_cache = 0;      // RAM for routed experts: routed_experts when they all fit
  bool streamed = false;         // routed experts read from storage into the expert cache
  int64_t engram_cache = 0;      // RAM for Engram rows: engram_tables when mapped
  bool engram_streamed = false;  // Engram rows read from storage (whenever the rest is short)
  std::string refusal;           // empty: the plan fits

  int64_t resident() const {
    return dense + head_copy + kv + prefix_cache + workspace + expert_cache + engram_cache;
  }
  // The plan as `cedar inspect --plan` prints it (one item a line, sizes in MiB/GiB).
  std::string describe() const;
};

MemoryPlan plan_memory(const Checkpoint& ck, const MemoryRequest& r);
// The same for a checkpoint in the release layout that is not here: the tensors its config
// implies (expected_tensors), every one in its file. What `inspect --config F --plan` prints
// before a download.
MemoryPlan plan_memory(const ModelConfig& cfg, const MemoryRequest& r);
// The plan over a list of tensors: bytes and whether they are read from a file (and so may
// stream) or held in memory; q8_head_bytes: the copy --head-type q8 makes (0: none possible).
struct PlannedTensor {
  std::string name;
  int64_t bytes = 0;
  bool in_file = true;
};
MemoryPlan plan_memory(const ModelConfig& cfg, const std::vector<PlannedTensor>& tensors,
                       int64_t q8_head_bytes, const MemoryRequest& r);

// What the plan can move to storage, by tensor name: "layers.3.ffn.experts.17.w1.scale" ->
// "layers.3.ffn.experts.17" (empty: not a routed expert), and the Engram tables' codes/scales.
std::string routed_expert_of(const std::string& name);
bool is_engram_table(const std::string& name);

// The KV state one sequence of `tokens` tokens holds: the compressed rows and index keys of
// every KV source, the window and DSpark rings, and 1 MiB for the rest (mHC streams, Engram
// history, the undo log). The plan and the server's admission count with this one formula.
int64_t sequence_kv_bytes(const KvLayout& kv, int64_t tokens);

// "64G", "1.5GiB", "512M", "4096" (bytes) -> bytes (K/M/G/T are powers of 1024); throws
// std::runtime_error naming `what` on anything else.
int64_t parse_size(const std::string& s, const std::string& what);
// 1536 MiB -> "1.50 GiB", 12 MiB -> "12.0 MiB"
std::string format_bytes(int64_t b);

}  // namespace cedar::runtime
