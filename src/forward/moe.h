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

  // x [n, D] normalised FFN input -> out [n, D] bf16 values. ref: model.py MoE.forward
  void forward(const Ctx& ctx, const float* x, int n, float* out) const;

  // ref: model.py Gate.forward. For each row: the selected experts (ascending) and their weights.
  void gate(const Ctx& ctx, const float* x, int n, int* idx, float* weight) const;

 private:
  const ModelConfig& cfg_;
  const LayerWeights& w_;
  int layer_;
  int E_, K_;  // routed experts, experts per token (a DSpark stage has its own)
};

}  // namespace cedar
