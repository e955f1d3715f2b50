// ForwardPass: the per-forward scratch every layer reads and writes while one chunk of rows of
// one sequence goes through the stack (the reference's SharedAttentionRuntime, made a stack
// object): the positions, the sequence state, the Top-K each index source publishes for every
// query, and the candidate pool of the candidate source. Lives for one Transformer::forward call.
// A batched forward (several sequences in one pass) has one ForwardPass per sequence and lays
// their rows end to end in the activation buffers (Segment).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "state/sequence_state.h"

namespace cedar {

// Optional per-layer activation dumps (CEDAR_DUMP_DIR) as .npy files named
// `<name>.p<first_pos>.npy`, for layer-by-layer comparison with the numpy reference.
class Dumper {
 public:
  Dumper();  // reads CEDAR_DUMP_DIR; inactive when unset or empty
  bool active() const { return !dir_.empty(); }
  void f32(const std::string& name, int64_t first_pos, const float* data,
           const std::vector<int64_t>& shape) const;
  void i32(const std::string& name, int64_t first_pos, const int32_t* data,
           const std::vector<int64_t>& shape) const;

 private:
  std::string dir_;
};

struct ForwardPass {
  const ModelConfig& cfg;
  SequenceState& st;
  int n = 0;       // rows in this chunk
  int64_t p0 = 0;  // absolute position of row 0
  // topk[l][i]: compressed rows (ascending) selected for query row i by index-source layer l.
  std::vector<std::vector<std::vector<int32_t>>> topk;
  // candidates[i][b]: block b is in query i's candidate pool (written by the candidate source).
  std::vector<std::vector<uint8_t>> candidates;
  const Dumper* dump = nullptr;
  // SWA Bounded Replay (spec §9.4): a query at p sees window rows [max(win_start, p-W+1), p].
  int64_t win_start = 0;
  // The rows' global KV already exists (CED decoder rows at the candidate source, bounded
  // replay): compressors append nothing; indexers score the stored rows.
  bool skip_compressor = false;
  // Bounded replay of a state whose ratio-2 tails are missing: recompute them from these rows.
  bool rebuild_tails = false;
  // Fidelity tests: each index source keeps every query's scores of the visible rows in
  // scores[l][i] (the tie analysis of Top-K lists).
  // image[i]: row i is inside an image span (the router's bias_vl, Engram's zero gate); empty
  // when the rows hold no image.
  std::vector<uint8_t> image;
  bool keep_scores = false;
  std::vector<std::vector<std::vector<float>>> scores;

  ForwardPass(const ModelConfig& c, SequenceState& s, int n_rows, int64_t first_pos)
      : cfg(c), st(s), n(n_rows), p0(first_pos), topk(size_t(c.num_hidden_layers)) {}
};

// One sequence's rows inside a batch: rows [row0, row0 + fp->n) of the activation buffers.
// Row-wise work (projections, GEMMs, MoE, mHC) runs over all rows of a batch at once; the
// per-sequence work (window ring, compressor, indexer, sparse attention) runs per segment.
struct Segment {
  ForwardPass* fp = nullptr;
  int row0 = 0;
};

}  // namespace cedar
