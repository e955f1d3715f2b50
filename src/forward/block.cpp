#include "forward/block.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/scratch.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"

namespace cedar {

void hc_mixes(const Ctx& ctx, const ModelConfig& cfg, const float* h, int n, const HcSite& site,
              float* pre, float* post, float* comb) {
  const int hc = cfg.hc_mult, K = hc * cfg.hidden_size, mix = (2 + hc) * hc;
  Scratch<float> m(size_t(n) * size_t(mix));
  linear(ctx, site.fn, h, n, m.data(), LinearOut::kF32);  // fp32 weight: exact products, exact sum
  // (a row's Sinkhorn iterations cost about as much as 9,000 vector element operations)
  ctx.pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          // one statistic over the whole flattened stream (squares of bf16 values are exact in
          // fp32)
          const float* hi = h + size_t(i) * K;
          double ss = 0;
          for (int k = 0; k < K; ++k) ss += double(hi[k] * hi[k]);
          const float r = fmath::rsqrt(float(ss / double(K)) + float(cfg.rms_norm_eps));
          float* mi = m.data() + size_t(i) * mix;
          for (int j = 0; j < mix; ++j) mi[j] = mi[j] * r;
          ctx.k.hc_split_sinkhorn(mi, site.scale, site.base, hc, cfg.hc_sinkhorn_iters,
                                  float(cfg.hc_eps), pre + i * hc, post + i * hc,
                                  comb + i * hc * hc);
        }
      },
      grain_for(K + 9000));
}

void embed_rows(const ModelConfig& cfg, const uint16_t* embed, const int32_t* ids, int n, float* h,
                float* pre) {
  const int hc = cfg.hc_mult, D = cfg.hidden_size;
  const size_t HD = size_t(hc) * D;
  for (int i = 0; i < n; ++i) {
    const uint16_t* e = embed + size_t(ids[i]) * D;
    for (int c = 0; c < hc; ++c)
      for (int d = 0; d < D; ++d) h[size_t(i) * HD + size_t(c) * D + d] = bf16_to_f32(e[d]);
    std::fill_n(pre + size_t(i) * hc, hc, 0.0f);
    pre[size_t(i) * hc] = 1.0f;
  }
}

HcSite hc_site(const ModelConfig& cfg, const LayerWeights& w, bool attn,
               const std::string& prefix) {
  HcSite s;
  s.fn.kind = Linear::Kind::F32;
  s.fn.out = (2 + cfg.hc_mult) * cfg.hc_mult;
  s.fn.in = cfg.hc_mult * cfg.hidden_size;
  s.fn.w = reinterpret_cast<const uint8_t*>(attn ? w.hc_attn_fn : w.hc_ffn_fn);
  s.fn.name = prefix + (attn ? "hc_attn_fn" : "hc_ffn_fn");
  s.scale = attn ? w.hc_attn_scale : w.hc_ffn_scale;
  s.base = attn ? w.hc_attn_base : w.hc_ffn_base;
  return s;
}

void mhc_block(const Ctx& ctx, const ModelConfig& cfg, const LayerWeights& w, const HcSite& attn,
               const HcSite& ffn_site, const MoE& ffn, float* h, float* pre_mix, int n,
               const std::function<void(const float* xn, float* y)>& attention, float* y,
               const uint8_t* image) {
  const int hc = cfg.hc_mult, D = cfg.hidden_size;
  const float eps = float(cfg.rms_norm_eps);
  const size_t HD = size_t(hc) * D;
  Scratch<float> pa(size_t(n) * hc), qa(size_t(n) * hc), Ca(size_t(n) * hc * hc);
  Scratch<float> x(size_t(n) * D), xn(size_t(n) * D);
  Scratch<float> h1(size_t(n) * HD);
  const int64_t pre_grain = grain_for(int64_t(HD)), post_grain = grain_for(int64_t(HD) * hc);
  // attention site: coefficients from the block input, input collapsed with the previous pre-mix
  hc_mixes(ctx, cfg, h, n, attn, pa.data(), qa.data(), Ca.data());
  ctx.pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          ctx.k.hc_pre(h + i * HD, pre_mix + i * hc, hc, D, x.data() + i * D);
          ctx.k.rms_norm(x.data() + i * D, D, w.attn_norm, eps, xn.data() + i * D);
        }
      },
      pre_grain);
  attention(xn.data(), y);
  Scratch<float> pf(size_t(n) * hc), qf(size_t(n) * hc), Cf(size_t(n) * hc * hc);
  ctx.pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          ctx.k.hc_post(y + i * D, h + i * HD, qa.data() + i * hc, Ca.data() + i * hc * hc, hc, D,
                        h1.data() + i * HD);
      },
      post_grain);
  // FFN site: coefficients from h1, input collapsed with the attention site's pre-mix
  hc_mixes(ctx, cfg, h1.data(), n, ffn_site, pf.data(), qf.data(), Cf.data());
  ctx.pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          ctx.k.hc_pre(h1.data() + i * HD, pa.data() + i * hc, hc, D, x.data() + i * D);
          ctx.k.rms_norm(x.data() + i * D, D, w.ffn_norm, eps, xn.data() + i * D);
        }
      },
      pre_grain);
  // the MoE is row-wise: the batch's rows share every expert's weights in one pass
  ffn.forward(ctx, xn.data(), n, y, image);
  ctx.pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          ctx.k.hc_post(y + i * D, h1.data() + i * HD, qf.data() + i * hc, Cf.data() + i * hc * hc,
                        hc, D, h + i * HD);
      },
      post_grain);
  std::copy(pf.begin(), pf.end(), pre_mix);
}

std::vector<uint8_t> image_rows(std::span<const Segment> segs) {
  bool any = false;
  for (const Segment& sg : segs) any = any || !sg.fp->image.empty();
  if (!any) return {};
  std::vector<uint8_t> f(size_t(segs.back().row0 + segs.back().fp->n), 0);
  for (const Segment& sg : segs)
    std::copy(sg.fp->image.begin(), sg.fp->image.end(), f.begin() + sg.row0);
  return f;
}

Block::Block(const ModelConfig& cfg, int layer, const LayerWeights& w)
    : cfg_(cfg),
      layer_(layer),
      w_(w),
      hc_attn_(hc_site(cfg, w, true, "layers." + std::to_string(layer) + ".")),
      hc_ffn_(hc_site(cfg, w, false, "layers." + std::to_string(layer) + ".")),
      attn_(cfg, layer, w),
      ffn_(cfg, layer, w) {}

void Block::forward(const Ctx& ctx, float* h, float* pre_mix, std::span<const Segment> segs) const {
  if (segs.empty()) return;
  const int n = segs.back().row0 + segs.back().fp->n, hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const size_t HD = size_t(hc) * D;
  Scratch<float> y(size_t(n) * D);
  const std::vector<uint8_t> image = image_rows(segs);
  mhc_block(
      ctx, cfg_, w_, hc_attn_, hc_ffn_, ffn_, h, pre_mix, n,
      [&](const float* xn, float* out) { attn_.forward(ctx, xn, segs, out); }, y.data(),
      image.empty() ? nullptr : image.data());
  for (const Segment& sg : segs) {
    const ForwardPass& fp = *sg.fp;
    if (!fp.dump || !fp.dump->active()) continue;
    const size_t r = size_t(sg.row0);
    const std::string ln = "layer" + std::to_string(layer_);
    fp.dump->f32(ln + ".ffn_out", fp.p0, y.data() + r * D, {fp.n, D});
    fp.dump->f32(ln + ".h", fp.p0, h + r * HD, {fp.n, hc, D});
    fp.dump->f32(ln + ".pre_mix", fp.p0, pre_mix + r * hc, {fp.n, hc});
  }
}

void Block::project_global(const Ctx& ctx, const float* h, const float* pre_mix,
                           std::span<const Segment> segs) const {
  if (!cfg_.plan(layer_).is_kv_source) return;
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const size_t HD = size_t(hc) * D;
  for (const Segment& sg : segs) {
    const int n = sg.fp->n;
    const float* hs = h + size_t(sg.row0) * HD;
    const float* ps = pre_mix + size_t(sg.row0) * hc;
    Scratch<float> x(size_t(n) * D), xn(size_t(n) * D);
    ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        ctx.k.hc_pre(hs + i * HD, ps + i * hc, hc, D, x.data() + i * D);
        ctx.k.rms_norm(x.data() + i * D, D, w_.attn_norm, float(cfg_.rms_norm_eps),
                       xn.data() + i * D);
      }
    });
    attn_.compress(ctx, xn.data(), *sg.fp);
  }
}

}  // namespace cedar
