// Attention: one layer's CSA2 attention over a chunk of rows of one sequence, or over the chunks of
// several sequences of a batch (NUMERICS §A).
// Every layer has its own low-rank query, FP8 window KV ring and sink; compressed layers add the
// rows their Top-K source selected from their KV source's cache. The chunk's own window rows live
// in a temporary buffer next to the ring, so a chunk longer than the window never overwrites ring
// slots its earlier queries still need; the ring is updated after all queries ran.
// Immutable after construction.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "forward/compressor.h"
#include "forward/forward_pass.h"
#include "forward/indexer.h"
#include "forward/linear.h"
#include "forward/rope.h"

namespace cedar {

class Attention {
 public:
  Attention(const ModelConfig& cfg, int layer, const LayerWeights& w);

  // x [n, D] normalised attention input of the rows of `segs` (tiling [0, n), one segment per
  // sequence) -> out [n, D] (bf16 values). The projections run over all rows at once; ring,
  // compressor, indexer and sparse attention per segment. ref: model.py Attention.forward
  void forward(const Ctx& ctx, const float* x, std::span<const Segment> segs, float* out) const;

  // The global-KV half only (CED encoder rows at the candidate source): the compressor on x
  // [n, D], appending to the layer's compressed cache; nothing when the layer is no KV source.
  void compress(const Ctx& ctx, const float* x, ForwardPass& fp) const;

 private:
  const ModelConfig& cfg_;
  const LayerPlan& plan_;
  const LayerWeights& w_;
  RopeTable rope_;
  std::unique_ptr<Compressor> compressor_;
  std::unique_ptr<Indexer> indexer_;
  float softmax_scale_;
  std::vector<Linear> wo_a_;  // per output group: rows [g*R, (g+1)*R) of the bf16 wo_a
};

}  // namespace cedar
