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
#include <string>
#include <vector>

#include "forward/compressor.h"
#include "forward/forward_pass.h"
#include "forward/indexer.h"
#include "forward/linear.h"
#include "forward/rope.h"

namespace cedar {

// The first half of an attention layer over rows x [n, D] at positions pos[n] (ref: model.py
// Attention.forward, also DSparkAttention's draft rows): qr = q_norm(wq_a(x)), q = wq_b(qr) with
// RoPE on every head's last rd channels [n, H, hd], and the window kv
// act_quant(RoPE(kv_norm(wkv(x)))) as FP8 codes [n, hd] + UE8M0 scales [n, hd/32] and their
// values; cs/sn the rotary angles of the positions [n, rd/2].
struct AttnRows {
  Scratch<float> qr, q, kv, cs, sn;
  Scratch<uint8_t> codes, scales;
};
void attn_rows(const Ctx& ctx, const ModelConfig& cfg, const LayerWeights& w, const RopeTable& rope,
               const float* x, int n, const int64_t* pos, AttnRows& r);

// The window-kv half alone, for rows kvr [n, hd] = wkv(x) already projected (DSpark's main_kv):
// kv_norm, RoPE at cs/sn [n, rd/2], act_quant -> codes, scales, values.
void window_kv_rows(const Ctx& ctx, const ModelConfig& cfg, const LayerWeights& w, const float* kvr,
                    int n, const float* cs, const float* sn, uint8_t* codes, uint8_t* scales,
                    float* values);

// The rotary angles of n positions: cs, sn [n, rd/2].
void rope_rows(const RopeTable& rope, const int64_t* pos, int n, float* cs, float* sn);

// The output projection of attention heads o [n, H, hd] (inverse RoPE already applied): the
// grouped low-rank wo_a (block-diagonal over o_groups, bf16 weights; u = bf16(o[g] . wo_a[g]))
// then wo_b. ref: model.py Attention.forward (einsum "bsgd,grd->bsgr", wo_b)
class AttnOutput {
 public:
  AttnOutput(const ModelConfig& cfg, const LayerWeights& w, const std::string& name);
  void forward(const Ctx& ctx, const float* o, int n, float* out) const;

 private:
  const ModelConfig& cfg_;
  const LayerWeights& w_;
  std::vector<Linear> wo_a_;  // per output group: rows [g*R, (g+1)*R) of the bf16 wo_a
};

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
  AttnOutput out_;
};

}  // namespace cedar
