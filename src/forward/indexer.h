// Indexer: the query half of CSA2's index (NUMERICS §C). For every query row of a chunk it scores
// the visible index keys of the layer's KV source with bf16 arithmetic at every step, builds the
// candidate pool (candidate source) or restricts to it (index sources above it), and keeps the
// per-query Top-K (k = min(index_topk, visible rows), CUDA tie rule). Per query only, so one-shot
// prefill, chunked prefill and decode select identical rows. Immutable after construction.
#pragma once

#include <vector>

#include "base/scratch.h"
#include "forward/forward_pass.h"
#include "forward/linear.h"
#include "forward/rope.h"

namespace cedar {

// The index queries of a run of rows: FP4 codes (as small integers) and scale codes per head,
// and the per-head weights. Row-wise, so a batch's rows are projected together.
struct IndexQueries {
  Scratch<int8_t> qc;   // [n, IH, ihd]
  Scratch<uint8_t> qe;  // [n, IH, ihd/32] UE8M0 codes
  Scratch<float> wts;   // [n, IH]
};

class Indexer {
 public:
  Indexer(const ModelConfig& cfg, int layer, const LayerWeights& w, const RopeTable& rope);

  // x [n, D] attention input, qr [n, q_lora_rank] normalised low-rank query. Writes
  // fp.topk[layer] (and fp.candidates at the candidate source).
  // ref: model.py Indexer.forward (query half), select_candidate_blocks
  void forward(const Ctx& ctx, const float* x, const float* qr, ForwardPass& fp) const;

  // The two halves of forward(), for batches: project() the queries of all n rows (row i at
  // position pos[i]), then select() per sequence with its rows [row0, row0 + fp.n) of q.
  void project(const Ctx& ctx, const float* x, const float* qr, int n, const int64_t* pos,
               IndexQueries& q) const;
  void select(const Ctx& ctx, const IndexQueries& q, int row0, ForwardPass& fp) const;

 private:
  const ModelConfig& cfg_;
  const LayerPlan& plan_;
  const LayerWeights& w_;
  const RopeTable& rope_;
};

}  // namespace cedar
