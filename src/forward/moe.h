// MoE: the sqrtsoftplus Gate (bias steers selection only), routed FP4 SwiGLU experts with the
// routing weight applied before the down projection, and the shared FP8 expert (NUMERICS §M).
// Immutable after construction.
#pragma once

#include <cstdint>

#include "forward/linear.h"
#include "model/config.h"

namespace cedar {

// Routed expert products run so far by every MoE in the process: one per (layer, expert) that
// received rows in a forward, however many rows. Instrumentation for `cedar bench`, whose
// batched passes read each such expert's weights once.
int64_t routed_expert_runs();

class MoE {
 public:
  // layer: a backbone layer, or num_hidden_layers + s for DSpark stage s
  MoE(const ModelConfig& cfg, int layer, const LayerWeights& w);

  // x [n, D] normalised FFN input -> out [n, D] bf16 values; image[i] != 0 (image may be null):
  // row i is in an image span. ref: model.py MoE.forward
  void forward(const Ctx& ctx, const float* x, int n, float* out,
               const uint8_t* image = nullptr) const;

  // ref: model.py Gate.forward. For each row: the selected experts (ascending) and their weights.
  // Image-span rows select with ffn.gate.bias_vl instead of ffn.gate.bias.
  void gate(const Ctx& ctx, const float* x, int n, int* idx, float* weight,
            const uint8_t* image = nullptr) const;

  // The MoE of the next layer. With streamed experts, a small pass also guesses that layer's
  // experts by running its router on this layer's input (the stream changes little from one
  // layer to the next) and asks the source to prefetch them, so their reads overlap the rest of
  // this layer and the next attention. A guess only moves bytes into the cache: the results do
  // not depend on it.
  void set_next(const MoE* next) { next_ = next; }

 private:
  void prefetch_next(const Ctx& ctx, const float* x, int n) const;

  const ModelConfig& cfg_;
  const LayerWeights& w_;
  int layer_;
  const MoE* next_ = nullptr;
  int E_, K_;  // routed experts, experts per token (a DSpark stage has its own)
};

}  // namespace cedar
