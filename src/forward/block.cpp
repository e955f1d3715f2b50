#include "forward/block.h"

#include <string>
#include <vector>

#include "forward/fmath.h"
#include "numerics/bf16.h"

namespace cedar {

void hc_mixes(const Ctx& ctx, const ModelConfig& cfg, const float* h, const float* fn,
              const float* scale, const float* base, float* pre, float* post, float* comb) {
  const int hc = cfg.hc_mult, n = hc * cfg.hidden_size, mix = (2 + hc) * hc;
  // one statistic over the whole flattened stream (squares of bf16 values are exact in fp32)
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(h[i] * h[i]);
  const float mean = float(ss / double(n));
  const float r = fmath::rsqrt(mean + float(cfg.rms_norm_eps));
  float m[64];
  ctx.k.gemm_f32w(h, 1, n, fn, 0, mix, m, mix);  // fp32 weight: exact products, exact sum
  for (int j = 0; j < mix; ++j) m[j] = m[j] * r;
  ctx.k.hc_split_sinkhorn(m, scale, base, hc, cfg.hc_sinkhorn_iters, float(cfg.hc_eps), pre, post,
                          comb);
}

void hc_pre(const float* h, const float* mix, int hc, int D, float* x) {
  for (int d = 0; d < D; ++d) {
    double s = 0;
    for (int c = 0; c < hc; ++c) s += double(mix[c] * h[c * D + d]);
    x[d] = round_bf16(fmath::round_sum(s));
  }
}

void hc_post(const float* y, const float* h, const float* post, const float* comb, int hc, int D,
             float* out) {
  for (int j = 0; j < hc; ++j)
    for (int d = 0; d < D; ++d) {
      double s = 0;
      for (int i = 0; i < hc; ++i) s += double(comb[i * hc + j] * h[i * D + d]);
      out[j * D + d] = round_bf16(post[j] * y[d] + fmath::round_sum(s));
    }
}

Block::Block(const ModelConfig& cfg, int layer, const LayerWeights& w)
    : cfg_(cfg), layer_(layer), w_(w), attn_(cfg, layer, w), ffn_(cfg, layer, w) {}

void Block::forward(const Ctx& ctx, float* h, float* pre_mix, std::span<const Segment> segs) const {
  if (segs.empty()) return;
  const int n = segs.back().row0 + segs.back().fp->n, hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const float eps = float(cfg_.rms_norm_eps);
  const size_t HD = size_t(hc) * D;
  std::vector<float> pa(size_t(n) * hc), qa(size_t(n) * hc), Ca(size_t(n) * hc * hc);
  std::vector<float> x(size_t(n) * D), xn(size_t(n) * D), y(size_t(n) * D);
  std::vector<float> h1(size_t(n) * HD);
  // attention site: coefficients from the block input, input collapsed with the previous pre-mix
  ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      hc_mixes(ctx, cfg_, h + i * HD, w_.hc_attn_fn, w_.hc_attn_scale, w_.hc_attn_base,
               pa.data() + i * hc, qa.data() + i * hc, Ca.data() + i * hc * hc);
      hc_pre(h + i * HD, pre_mix + i * hc, hc, D, x.data() + i * D);
      ctx.k.rms_norm(x.data() + i * D, D, w_.attn_norm, eps, xn.data() + i * D);
    }
  });
  attn_.forward(ctx, xn.data(), segs, y.data());
  std::vector<float> pf(size_t(n) * hc), qf(size_t(n) * hc), Cf(size_t(n) * hc * hc);
  ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      hc_post(y.data() + i * D, h + i * HD, qa.data() + i * hc, Ca.data() + i * hc * hc, hc, D,
              h1.data() + i * HD);
      // FFN site: coefficients from h1, input collapsed with the attention site's pre-mix
      hc_mixes(ctx, cfg_, h1.data() + i * HD, w_.hc_ffn_fn, w_.hc_ffn_scale, w_.hc_ffn_base,
               pf.data() + i * hc, qf.data() + i * hc, Cf.data() + i * hc * hc);
      hc_pre(h1.data() + i * HD, pa.data() + i * hc, hc, D, x.data() + i * D);
      ctx.k.rms_norm(x.data() + i * D, D, w_.ffn_norm, eps, xn.data() + i * D);
    }
  });
  // the MoE is row-wise: the batch's rows share every expert's weights in one pass
  ffn_.forward(ctx, xn.data(), n, y.data());
  ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      hc_post(y.data() + i * D, h1.data() + i * HD, qf.data() + i * hc, Cf.data() + i * hc * hc, hc,
              D, h + i * HD);
  });
  std::copy(pf.begin(), pf.end(), pre_mix);
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
    std::vector<float> x(size_t(n) * D), xn(size_t(n) * D);
    ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        hc_pre(hs + i * HD, ps + i * hc, hc, D, x.data() + i * D);
        ctx.k.rms_norm(x.data() + i * D, D, w_.attn_norm, float(cfg_.rms_norm_eps),
                       xn.data() + i * D);
      }
    });
    attn_.compress(ctx, xn.data(), *sg.fp);
  }
}

}  // namespace cedar
