#include "forward/vision_tower.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "base/scratch.h"
#include "forward/rope.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"

namespace cedar {

namespace {

constexpr int kQueryBlock = 64;  // queries per attention task

struct Grid {
  int n = 0, n_h = 0, n_w = 0;  // patches, patch rows, patch columns
};

// y [M, L.out] = bf16(fp32(x . W) + bias): the bias added to the fp32 sum as a BLAS epilogue does
// (docs/VISION.md "Arithmetic"); without a bias bf16(x . W). ref: nn.Linear in bf16
void linear_bias(const Ctx& ctx, const Linear& L, const uint16_t* bias, const float* x, int M,
                 float* y) {
  linear(ctx, L, x, M, y, bias ? LinearOut::kF32 : LinearOut::kBf16);
  if (!bias) return;
  ctx.pool.parallel_for(M, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      float* r = y + size_t(m) * size_t(L.out);
      for (int n = 0; n < L.out; ++n) r[n] = round_bf16(r[n] + bf16_to_f32(bias[n]));
    }
  });
}

// ref: vision.py RMSNorm (the text model's arithmetic)
void rms_norm_rows(const Ctx& ctx, const float* x, int M, int V, const uint16_t* w, float eps,
                   float* out) {
  ctx.pool.parallel_for(M, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      ctx.k.rms_norm(x + size_t(m) * V, V, w, eps, out + size_t(m) * V);
  });
}

// x[m] = bf16(x[m] + y[m]): the residual add of two bf16 tensors (fp32 sum, one rounding)
void add_residual(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = round_bf16(x[i] + y[i]);
}

// ref: vision.py get_vision_cos_sin -- cos/sin [n, hd/2] per patch: the first hd/4 angles from
// its row, the next hd/4 from its column, each fp32(fp32(position) * inv_freq).
void rope_2d_tables(const Grid& g, int hd, double theta, std::vector<float>& cos,
                    std::vector<float>& sin) {
  const int rd = hd / 2;  // rope_dim; every head dimension is rotated
  const RopeTable t(rd, theta, false, 1.0, 0, 0, 0);
  cos.resize(size_t(g.n) * rd);
  sin.resize(size_t(g.n) * rd);
  for (int i = 0; i < g.n; ++i) {
    float* c = cos.data() + size_t(i) * rd;
    float* s = sin.data() + size_t(i) * rd;
    t.angles(i / g.n_w, c, s);
    t.angles(i % g.n_w, c + rd / 2, s + rd / 2);
  }
}

// ref: vision.py apply_rotary (rotate-half) on one head vector x [hd], in place: [x1 cos - x2 sin,
// x2 cos + x1 sin] with x1, x2 its halves, each product and sum fp32, the result bf16.
void rotate_half(float* x, int hd, const float* cos, const float* sin) {
  const int h = hd / 2;
  for (int j = 0; j < h; ++j) {
    const float x1 = x[j], x2 = x[h + j];
    x[j] = round_bf16(x1 * cos[j] - x2 * sin[j]);
    x[h + j] = round_bf16(x2 * cos[j] + x1 * sin[j]);
  }
}

// ref: vision.py Attention.forward: y [n, V] = wo(SDPA(rope(q), rope(k), v)) for h = norm1(x).
void attention(const Ctx& ctx, const VisionConfig& vc, const VisionBlockWeights& B, const Grid& g,
               const std::vector<float>& cos, const std::vector<float>& sin, const float* h,
               float* y) {
  const int V = vc.hidden_size, H = vc.num_attention_heads, hd = vc.head_dim();
  Scratch<float> qkv(size_t(g.n) * 3 * V), o(size_t(g.n) * V);
  linear_bias(ctx, B.wqkv, B.wqkv_bias, h, g.n, qkv.data());
  ctx.pool.parallel_for(g.n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* r = qkv.data() + size_t(i) * 3 * V;
      const float* c = cos.data() + size_t(i) * (hd / 2);
      const float* s = sin.data() + size_t(i) * (hd / 2);
      for (int hh = 0; hh < 2 * H; ++hh) rotate_half(r + size_t(hh) * hd, hd, c, s);  // q, k
    }
  });
  const float scale = float(1.0 / std::sqrt(double(hd)));
  const int blocks = (g.n + kQueryBlock - 1) / kQueryBlock;
  const size_t scratch = ctx.k.dense_attn_scratch(g.n, hd);
  ctx.pool.parallel_for(int64_t(H) * blocks, [&](int64_t t0, int64_t t1) {
    std::vector<float> sc(scratch);
    for (int64_t t = t0; t < t1; ++t) {
      const int hh = int(t / blocks), q0 = int(t % blocks) * kQueryBlock;
      const int nq = std::min(kQueryBlock, g.n - q0);
      const float* base = qkv.data() + size_t(hh) * hd;
      ctx.k.dense_attn(base + size_t(q0) * 3 * V, nq, base + V, base + 2 * V, g.n, hd, 3 * V, scale,
                       o.data() + size_t(q0) * V + size_t(hh) * hd, V, sc.data());
    }
  });
  linear_bias(ctx, B.wo, B.wo_bias, o.data(), g.n, y);
}

// ref: vision.py MLP.forward: w2(silu(gate) * up), silu and the product each rounded to bf16 as
// torch computes them on bf16 tensors.
void mlp(const Ctx& ctx, const VisionConfig& vc, const VisionBlockWeights& B, int n, const float* h,
         float* y) {
  const int I = vc.intermediate_size;
  Scratch<float> gu(size_t(n) * 2 * I), a(size_t(n) * I);
  linear(ctx, B.w1, h, n, gu.data());
  ctx.pool.parallel_for(n, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* gate = gu.data() + size_t(m) * 2 * I;
      float* out = a.data() + size_t(m) * I;
      for (int i = 0; i < I; ++i)
        out[i] = round_bf16(round_bf16(fmath::silu(gate[i])) * gate[I + i]);
    }
  });
  linear(ctx, B.w2, a.data(), n, y);
}

// GELU with the exact erf (F.gelu's default), evaluated in double and rounded to fp32.
float gelu_erf(float x) {
  const double d = x;
  return float(0.5 * d * (1.0 + std::erf(d * (1.0 / std::sqrt(2.0)))));
}

// ref: vision.py Aligner.forward: the [n_h, n_w, V] patch grid zero-padded right and bottom to
// multiples of r, each r x r cell flattened channel-major (c * r^2 + ky * r + kx, F.unfold's
// order), cells in reading order; then w2(gelu(w1(u))).
std::vector<float> aligner(const Ctx& ctx, const ModelConfig& c, const VisionWeights& W,
                           const Grid& g, const float* x) {
  const int V = c.vision.hidden_size, r = c.vision.downsample_ratio, D = c.hidden_size;
  const int th = (g.n_h + r - 1) / r, tw = (g.n_w + r - 1) / r, T = th * tw;
  const int U = V * r * r;
  Scratch<float> u(size_t(T) * U), hid(size_t(T) * D);
  ctx.pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = u.data() + size_t(t) * U;
      const int cy = int(t / tw), cx = int(t % tw);
      for (int ky = 0; ky < r; ++ky)
        for (int kx = 0; kx < r; ++kx) {
          const int py = cy * r + ky, px = cx * r + kx;
          const bool inside = py < g.n_h && px < g.n_w;
          const float* p = x + (size_t(py) * g.n_w + size_t(px)) * V;
          for (int ch = 0; ch < V; ++ch)
            row[size_t(ch) * r * r + size_t(ky) * r + kx] = inside ? p[ch] : 0.0f;
        }
    }
  });
  linear_bias(ctx, W.aligner_w1, W.aligner_b1, u.data(), T, hid.data());
  for (size_t i = 0; i < size_t(T) * D; ++i) hid[i] = round_bf16(gelu_erf(hid[i]));
  std::vector<float> out(size_t(T) * D);
  linear_bias(ctx, W.aligner_w2, W.aligner_b2, hid.data(), T, out.data());
  return out;
}

}  // namespace

std::vector<float> encode_image(const Ctx& ctx, const ModelConfig& c, const VisionWeights& W,
                                const vision::ImagePatches& p) {
  const VisionConfig& vc = c.vision;
  if (!c.has_vision || W.blocks.empty())
    throw std::invalid_argument("the model has no vision tower");
  const Grid g{p.plan.n_vit_h * p.plan.n_vit_w, p.plan.n_vit_h, p.plan.n_vit_w};
  if (p.patch_dim != vc.patch_dim() || g.n <= 0 ||
      p.bf16.size() != size_t(g.n) * size_t(p.patch_dim))
    throw std::invalid_argument("image patches of width " + std::to_string(p.patch_dim) +
                                " do not match the vision tower's " +
                                std::to_string(vc.patch_dim()));
  const int V = vc.hidden_size;
  const float eps = float(vc.rms_norm_eps);
  std::vector<float> px(p.bf16.size());
  for (size_t i = 0; i < px.size(); ++i) px[i] = bf16_to_f32(p.bf16[i]);
  Scratch<float> x(size_t(g.n) * V), h(size_t(g.n) * V), y(size_t(g.n) * V);
  linear_bias(ctx, W.patch_embed, W.patch_embed_bias, px.data(), g.n, x.data());
  std::vector<float> cos, sin;
  rope_2d_tables(g, vc.head_dim(), vc.rope_theta, cos, sin);
  const size_t nV = size_t(g.n) * V;
  for (const VisionBlockWeights& B : W.blocks) {  // ref: vision.py Block.forward
    rms_norm_rows(ctx, x.data(), g.n, V, B.norm1, eps, h.data());
    attention(ctx, vc, B, g, cos, sin, h.data(), y.data());
    add_residual(x.data(), y.data(), nV);
    rms_norm_rows(ctx, x.data(), g.n, V, B.norm2, eps, h.data());
    mlp(ctx, vc, B, g.n, h.data(), y.data());
    add_residual(x.data(), y.data(), nV);
  }
  rms_norm_rows(ctx, x.data(), g.n, V, W.norm, eps, h.data());
  return aligner(ctx, c, W, g, h.data());
}

}  // namespace cedar
