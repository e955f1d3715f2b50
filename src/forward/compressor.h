// Compressor: the KV-source half of CSA2 (NUMERICS §C). Pools each group of `ratio` consecutive
// tokens into one latent (ratio 1: a plain bf16 projection; ratio 2: a channel-wise softmax gate
// in fp32), normalises it, derives its FP4 index key and its FP4 main row (both rotated at the
// group's first position j*ratio), and appends them to the source's CompressedKv. A trailing
// incomplete group is parked in the state until a later chunk completes it, so any chunking
// appends the same rows. Immutable after construction.
#pragma once

#include <vector>

#include "base/scratch.h"
#include "forward/linear.h"
#include "forward/rope.h"
#include "model/config.h"
#include "state/sequence_state.h"

namespace cedar {

// The compressor's input projections of a run of rows (row-wise: a batch's rows are projected
// together): k = wkv(x) [n, head_dim] (bf16 values for ratio 1, fp32 for ratio 2) and, for
// ratio 2, the fp32 gate logits z = wgate(x).
struct CompressorInput {
  Scratch<float> k, z;
};

class Compressor {
 public:
  Compressor(const ModelConfig& cfg, int layer, const LayerWeights& w, const RopeTable& rope);

  // x [n, D]: the attention input of rows at positions p0 .. p0+n-1. Appends every row completed
  // within the chunk to `cache` (before any query of the chunk runs its indexer or attention).
  // ref: model.py Compressor.forward, Indexer.forward (index-key half), Attention._compress_kv
  void forward(const Ctx& ctx, const float* x, int n, int64_t p0, CompressedKv& cache) const;

  // The two halves of forward(), for batches: project() any rows, then append() one sequence's
  // n rows of the projections (k, z: row 0 of that sequence's rows; z unused for ratio 1).
  void project(const Ctx& ctx, const float* x, int n, CompressorInput& in) const;
  void append(const Ctx& ctx, const float* k, const float* z, int n, int64_t p0,
              CompressedKv& cache) const;

  // Bounded replay of a state whose open group was lost (KvStore::truncate): parks the fp32 k and
  // gate logits of the last (p0+n) % ratio rows of x [n, D] as the tail, from the replayed input.
  // The rows of the state must already cover every complete group.
  void rebuild_tail(const Ctx& ctx, const float* x, int n, int64_t p0, CompressedKv& cache) const;

 private:
  const ModelConfig& cfg_;
  int layer_, ratio_;
  const LayerWeights& w_;
  const RopeTable& rope_;
};

}  // namespace cedar
