// Block: one transformer layer with its single-pass mHC residual (NUMERICS §B, spec §5): four
// bf16 copies of the stream, pre/post/comb coefficients from a projection of the flattened
// stream with Sinkhorn normalisation, the attention and the MoE between collapse and expand.
// The coefficients a sublayer computes collapse the *next* sublayer's input. Immutable after
// construction.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "forward/attention.h"
#include "forward/moe.h"

namespace cedar {

// One mHC site's parameters: fn [(2+hc)*hc, hc*D] fp32 (a linear() weight), scale [3], base.
struct HcSite {
  Linear fn;
  const float* scale = nullptr;
  const float* base = nullptr;
};

// ref: model.py Block.hc_mixes for n tokens h [n, hc*D] -> pre [n, hc], post [n, hc],
// comb [n, hc*hc]: one rms statistic per token over the flattened copies, fn . v (one GEMM over
// all rows), then hc_split_sinkhorn per token.
void hc_mixes(const Ctx& ctx, const ModelConfig& cfg, const float* h, int n, const HcSite& site,
              float* pre, float* post, float* comb);

// The stream entering the first block for ids[0..n): each row's embedding (bf16 [vocab, D]) in
// every copy of h [n, hc, D], the one-hot pre-mix [n, hc] that reads copy 0.
// ref: model.py Transformer.forward (h.repeat over hc_mult), make_identity_pre_mix
void embed_rows(const ModelConfig& cfg, const uint16_t* embed, const int32_t* ids, int n, float* h,
                float* pre);

// One mHC site of block w: its attention (attn) or FFN site, named prefix + "hc_attn_fn" etc.
HcSite hc_site(const ModelConfig& cfg, const LayerWeights& w, bool attn, const std::string& prefix);

// The single-pass mHC block around an attention (ref: model.py Block.forward), shared by Block
// and the DSpark stages: h [n, hc, D] updated in place, pre_mix [n, hc] in: the previous FFN
// site's pre-mix, out: this block's FFN pre-mix. `attention(xn, y)` maps the normalised
// attention input xn [n, D] to its output y [n, D]; the MoE is row-wise over all n rows. y
// holds the MoE output afterwards (for dumps).
void mhc_block(const Ctx& ctx, const ModelConfig& cfg, const LayerWeights& w, const HcSite& attn,
               const HcSite& ffn_site, const MoE& ffn, float* h, float* pre_mix, int n,
               const std::function<void(const float* xn, float* y)>& attention, float* y,
               const uint8_t* image = nullptr);

// The image flags of a batch's rows (ForwardPass::image, laid out like the segments); empty when
// no segment holds an image row.
std::vector<uint8_t> image_rows(std::span<const Segment> segs);

class Block {
 public:
  Block(const ModelConfig& cfg, int layer, const LayerWeights& w);

  // h [n, hc, D] (bf16 values) updated in place; pre_mix [n, hc] in: the previous FFN site's
  // pre-mix, out: this block's FFN pre-mix. `segs` tile the rows [0, n) in order (one per
  // sequence of a batch); every row's result is the same as in a forward of its sequence alone.
  // ref: model.py Block.forward
  void forward(const Ctx& ctx, float* h, float* pre_mix, std::span<const Segment> segs) const;
  void forward(const Ctx& ctx, float* h, float* pre_mix, ForwardPass& fp) const {
    const Segment one{&fp, 0};
    forward(ctx, h, pre_mix, std::span<const Segment>(&one, 1));
  }

  // CED encoder rows at the candidate source: only the attention input x = attn_norm(hc_pre(h,
  // pre_mix)) and the compressor on it (the decoder's global KV for every row); h and pre_mix
  // are not changed. The same x as forward() computes for these rows, bit for bit. `segs` may
  // name any subset of the buffers' rows (the CED members of a mixed batch).
  void project_global(const Ctx& ctx, const float* h, const float* pre_mix,
                      std::span<const Segment> segs) const;

  MoE& moe() { return ffn_; }

 private:
  const ModelConfig& cfg_;
  int layer_;
  const LayerWeights& w_;
  HcSite hc_attn_, hc_ffn_;
  Attention attn_;
  MoE ffn_;
};

}  // namespace cedar
