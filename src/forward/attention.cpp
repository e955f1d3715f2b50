#include "forward/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/scratch.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"
#include "numerics/fp8.h"

namespace cedar {

void rope_rows(const RopeTable& rope, const int64_t* pos, int n, float* cs, float* sn) {
  const size_t half = size_t(rope.rope_dim() / 2);
  for (int i = 0; i < n; ++i) rope.angles(pos[i], cs + size_t(i) * half, sn + size_t(i) * half);
}

void window_kv_rows(const Ctx& ctx, const ModelConfig& cfg, const LayerWeights& w, const float* kvr,
                    int n, const float* cs, const float* sn, uint8_t* codes, uint8_t* scales,
                    float* values) {
  const int hd = cfg.head_dim, rd = cfg.qk_rope_head_dim;
  const float eps = float(cfg.rms_norm_eps);
  ctx.pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          float* kv = values + i * hd;
          ctx.k.rms_norm(kvr + i * hd, hd, w.kv_norm, eps, kv);
          ctx.k.rope(kv + hd - rd, rd, cs + i * (rd / 2), sn + i * (rd / 2), false);
          ctx.k.act_quant(kv, hd, codes + i * hd, scales + i * (hd / 32));
          for (int d = 0; d < hd; ++d)
            kv[d] = fmath::e4m3(codes[size_t(i * hd + d)]) *
                    fmath::ue8m0(scales[size_t(i * (hd / 32) + d / 32)]);
        }
      },
      grain_for(8 * int64_t(hd)));
}

void attn_rows(const Ctx& ctx, const ModelConfig& cfg, const LayerWeights& w, const RopeTable& rope,
               const float* x, int n, const int64_t* pos, AttnRows& r) {
  const int D = cfg.hidden_size, H = cfg.num_attention_heads, hd = cfg.head_dim;
  const int rd = cfg.qk_rope_head_dim, ql = cfg.q_lora_rank;
  const float eps = float(cfg.rms_norm_eps);
  r.cs.resize(size_t(n) * size_t(rd / 2));
  r.sn.resize(r.cs.size());
  rope_rows(rope, pos, n, r.cs.data(), r.sn.data());
  // qa = wq_a(x) and the window kv = wkv(x): one prepared copy of x, one parallel region
  Scratch<float> qa(size_t(n) * size_t(ql)), kvr(size_t(n) * size_t(hd));
  PreparedRows xp, xk;
  prepare_rows(ctx, w.wq_a.format(), x, n, D, xp);
  if (w.wkv.format() != xp.format) prepare_rows(ctx, w.wkv.format(), x, n, D, xk);
  const GemmTask proj[2] = {{&w.wq_a, &xp, qa.data()}, {&w.wkv, xk.family ? &xk : &xp, kvr.data()}};
  linear_group(ctx, proj);
  // qr = q_norm(qa); q = wq_b(qr), RoPE on every head's last rd channels
  r.qr.resize(qa.size());
  for (int i = 0; i < n; ++i)
    ctx.k.rms_norm(qa.data() + size_t(i) * ql, ql, w.q_norm, eps, r.qr.data() + size_t(i) * ql);
  r.q.resize(size_t(n) * size_t(H) * size_t(hd));
  linear(ctx, w.wq_b, r.qr.data(), n, r.q.data());
  ctx.pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          for (int h = 0; h < H; ++h)
            ctx.k.rope(r.q.data() + (i * H + h) * hd + hd - rd, rd, r.cs.data() + i * (rd / 2),
                       r.sn.data() + i * (rd / 2), false);
      },
      grain_for(int64_t(H) * rd));
  r.kv.resize(kvr.size());
  r.codes.resize(kvr.size());
  r.scales.resize(size_t(n) * size_t(hd / 32));
  window_kv_rows(ctx, cfg, w, kvr.data(), n, r.cs.data(), r.sn.data(), r.codes.data(),
                 r.scales.data(), r.kv.data());
}

AttnOutput::AttnOutput(const ModelConfig& cfg, const LayerWeights& w, const std::string& name)
    : cfg_(cfg), w_(w) {
  // wo_a (bf16 values: FP8W, or a bf16 copy) viewed as one [R, H*hd/G] weight per output group
  const int G = cfg.o_groups, R = cfg.o_lora_rank, gw = cfg.num_attention_heads * cfg.head_dim / G;
  const bool fp8 = w.wo_a.kind == Linear::Kind::FP8W;  // (then R is a multiple of 32)
  for (int g = 0; g < G; ++g) {
    Linear L;
    L.kind = w.wo_a.kind;
    L.out = R;
    L.in = gw;
    L.w = w.wo_a.w + size_t(g) * R * gw * (fp8 ? 1 : 2);
    if (fp8) L.scale = w.wo_a.scale + size_t(g) * (R / 32) * (gw / 32);
    L.name = name + ".wo_a[group " + std::to_string(g) + "]";
    wo_a_.push_back(L);
  }
}

void AttnOutput::forward(const Ctx& ctx, const float* o, int n, float* out) const {
  const int H = cfg_.num_attention_heads, hd = cfg_.head_dim;
  const int G = cfg_.o_groups, R = cfg_.o_lora_rank, gw = H * hd / G;
  Scratch<float> u(size_t(n) * size_t(G) * size_t(R));
  // o as [n * G, gw] rows (query i, group g at row i * G + g), prepared once; group g's rows
  // against that group's weight, every group in one parallel region
  // (gathered group-major: group g's rows are [g * n, (g + 1) * n))
  PreparedRows op, og;
  prepare_rows(ctx, w_.wo_a.format(), o, n * G, gw, op);
  Scratch<int> rows(size_t(n) * size_t(G));
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < n; ++i) rows[size_t(g) * n + i] = i * G + g;
  gather_rows(op, rows.data(), n * G, og);
  Scratch<float> ug(size_t(G) * size_t(n) * size_t(R));
  Scratch<GemmTask> tasks;
  for (int g = 0; g < G; ++g)
    tasks.push_back(
        {&wo_a_[size_t(g)], &og, ug.data() + size_t(g) * n * R, LinearOut::kBf16, g * n, n});
  linear_group(ctx, tasks);
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < n; ++i)
      std::copy_n(ug.data() + (size_t(g) * n + i) * R, R, u.data() + (size_t(i) * G + g) * R);
  linear(ctx, w_.wo_b, u.data(), n, out);
}

Attention::Attention(const ModelConfig& cfg, int layer, const LayerWeights& w)
    : cfg_(cfg),
      plan_(cfg.plan(layer)),
      w_(w),
      rope_(RopeTable::for_layer(cfg, plan_.ratio)),
      out_(cfg, w, "layers." + std::to_string(layer) + ".attn") {
  if (plan_.is_kv_source) compressor_ = std::make_unique<Compressor>(cfg, layer, w, rope_);
  if (plan_.is_index_source) indexer_ = std::make_unique<Indexer>(cfg, layer, w, rope_);
  // the Python scalar head_dim**-0.5, held as an fp32 tensor by sparse_attn
  softmax_scale_ = float(std::pow(double(cfg.head_dim), -0.5));
}

void Attention::forward(const Ctx& ctx, const float* x, std::span<const Segment> segs,
                        float* out) const {
  if (segs.empty()) return;
  const int n = segs.back().row0 + segs.back().fp->n;
  const int D = cfg_.hidden_size, H = cfg_.num_attention_heads, hd = cfg_.head_dim;
  const int rd = cfg_.qk_rope_head_dim, W = cfg_.sliding_window;
  const int l = plan_.layer;

  // every row's segment and absolute position; rotary angles of those positions
  Scratch<int> seg_of(static_cast<size_t>(n));
  Scratch<int64_t> pos_of(static_cast<size_t>(n));
  for (size_t g = 0; g < segs.size(); ++g)
    for (int i = 0; i < segs[g].fp->n; ++i) {
      seg_of[size_t(segs[g].row0 + i)] = int(g);
      pos_of[size_t(segs[g].row0 + i)] = segs[g].fp->p0 + i;
    }
  // q, qr and the window kv (codes for the ring, values for dumps) of every row
  AttnRows ar;
  attn_rows(ctx, cfg_, w_, rope_, x, n, pos_of.data(), ar);
  const Scratch<float>&q = ar.q, &qr = ar.qr, &cs = ar.cs, &sn = ar.sn, &win = ar.kv;
  const Scratch<uint8_t>&wcodes = ar.codes, &wscales = ar.scales;

  // per sequence: the compressed branch (the KV source appends first, then the index source
  // selects per query)
  struct PerSeq {
    const std::vector<std::vector<int32_t>>* sel = nullptr;
    const CompressedKv* ccache = nullptr;
  };
  Scratch<PerSeq> ps(segs.size());
  // the row-wise halves of the compressor and the indexer over all rows that need them at once
  // (the compressor's: the rows of the sequences that append here, gathered when not all do)
  CompressorInput cin;
  Scratch<int> cin_row(segs.size(), -1);
  if (compressor_) {
    int m = 0;
    for (size_t g = 0; g < segs.size(); ++g)
      if (!segs[g].fp->skip_compressor) {
        cin_row[g] = m;
        m += segs[g].fp->n;
      }
    if (m == n) {
      compressor_->project(ctx, x, n, cin);
    } else if (m > 0) {
      Scratch<float> xs(size_t(m) * size_t(D));
      for (size_t g = 0; g < segs.size(); ++g)
        if (cin_row[g] >= 0)
          std::copy_n(x + size_t(segs[g].row0) * D, size_t(segs[g].fp->n) * D,
                      xs.data() + size_t(cin_row[g]) * D);
      compressor_->project(ctx, xs.data(), m, cin);
    }
  }
  IndexQueries iq;
  if (indexer_) indexer_->project(ctx, x, qr.data(), n, pos_of.data(), iq);
  for (size_t g = 0; g < segs.size(); ++g) {
    ForwardPass& fp = *segs[g].fp;
    const size_t r0 = size_t(segs[g].row0);
    if (plan_.ratio <= 0) continue;
    if (cin_row[g] >= 0) {
      const size_t c0 = size_t(cin_row[g]) * size_t(hd);
      compressor_->append(ctx, cin.k.data() + c0, cin.z.empty() ? nullptr : cin.z.data() + c0, fp.n,
                          fp.p0, fp.st.compressed.at(size_t(l)));
    } else if (compressor_ && fp.rebuild_tails && plan_.ratio > 1) {
      CompressedKv& cache = fp.st.compressed.at(size_t(l));
      if (cache.n_tail != int((fp.p0 + fp.n) % plan_.ratio))
        compressor_->rebuild_tail(ctx, x + r0 * D, fp.n, fp.p0, cache);
    }
    if (indexer_) indexer_->select(ctx, iq, int(r0), fp);
    ps[g].sel = &fp.topk.at(size_t(plan_.index_source));
    ps[g].ccache = &fp.st.compressed.at(size_t(plan_.kv_source));
    if (ps[g].sel->size() != size_t(fp.n))
      throw std::runtime_error("layer " + std::to_string(l) + ": no Top-K from index source " +
                               std::to_string(plan_.index_source));
  }

  // sparse attention per query over the compact list, read packed: window rows oldest first
  // (ring rows before the chunk, the chunk's own rows from this call), then the selected
  // compressed rows in ascending row order
  Scratch<float> o(size_t(n) * size_t(H) * size_t(hd));
  // work items: (query, group of heads); a decode step (fewer queries than threads) splits its
  // heads across the threads (heads are independent, so the results do not change)
  const int hsplit = std::min(H, n < ctx.pool.size() ? ctx.pool.size() : 1);
  const int hper = (H + hsplit - 1) / hsplit;
  const size_t scratch_floats = ctx.k.sparse_attn_scratch(hper, hd);
  ctx.pool.parallel_for(int64_t(n) * hsplit, [&](int64_t a0, int64_t a1) {
    Scratch<KeyRow> win_keys, comp_keys;
    Scratch<float> scratch(scratch_floats);
    for (int64_t a = a0; a < a1; ++a) {
      const int64_t i = a / hsplit;
      const int h0 = int(a % hsplit) * hper, h1 = std::min(H, h0 + hper);
      if (h0 >= h1) continue;
      const int g = seg_of[size_t(i)];
      const ForwardPass& fp = *segs[size_t(g)].fp;
      const PerSeq& sq = ps[size_t(g)];
      const WindowRing& ring = fp.st.window.at(size_t(l));
      const int64_t r0 = segs[size_t(g)].row0;
      const int64_t p = pos_of[size_t(i)];
      win_keys.clear();
      comp_keys.clear();
      // bounded replay truncates the window at win_start (0 otherwise)
      for (int64_t pos = std::max<int64_t>(fp.win_start, p - W + 1); pos <= p; ++pos) {
        if (pos < fp.p0) {
          win_keys.push_back({ring.row_codes(pos), ring.row_scales(pos)});
        } else {
          const size_t r = size_t(r0 + pos - fp.p0);
          win_keys.push_back({wcodes.data() + r * hd, wscales.data() + r * (hd / 32)});
        }
      }
      if (sq.sel)
        for (int32_t row : (*sq.sel)[size_t(i - r0)])
          comp_keys.push_back({sq.ccache->kv_row(row), sq.ccache->kv_scales_row(row)});
      AttnKeys keys;
      keys.win = win_keys.data();
      keys.n_win = int(win_keys.size());
      keys.comp = comp_keys.data();
      keys.n_comp = int(comp_keys.size());
      float* oi = o.data() + (i * H + h0) * hd;
      ctx.k.sparse_attn(q.data() + (i * H + h0) * hd, h1 - h0, hd, keys, w_.attn_sink + h0,
                        softmax_scale_, oi, scratch.data());
      for (int h = 0; h < h1 - h0; ++h)
        ctx.k.rope(oi + h * hd + hd - rd, rd, cs.data() + i * (rd / 2), sn.data() + i * (rd / 2),
                   true);
    }
  });

  out_.forward(ctx, o.data(), n, out);

  // each chunk's newest W window rows go to its ring (after every query of the chunk ran)
  for (const Segment& sg : segs) {
    ForwardPass& fp = *sg.fp;
    WindowRing& ring = fp.st.window.at(size_t(l));
    for (int i = std::max(0, fp.n - W); i < fp.n; ++i) {
      const int64_t pos = fp.p0 + i;
      const size_t r = size_t(sg.row0 + i);
      std::copy_n(wcodes.data() + r * hd, hd, ring.row_codes(pos));
      std::copy_n(wscales.data() + r * (hd / 32), hd / 32, ring.row_scales(pos));
    }
    if (fp.dump && fp.dump->active()) {
      const size_t r = size_t(sg.row0);
      const std::string ln = "layer" + std::to_string(l);
      fp.dump->f32(ln + ".attn_q", fp.p0, q.data() + r * H * hd, {fp.n, H, hd});
      fp.dump->f32(ln + ".attn_kv", fp.p0, win.data() + r * hd, {fp.n, hd});
      fp.dump->f32(ln + ".attn_o", fp.p0, o.data() + r * H * hd, {fp.n, H, hd});
      fp.dump->f32(ln + ".attn_out", fp.p0, out + r * D, {fp.n, D});
    }
  }
}

void Attention::compress(const Ctx& ctx, const float* x, ForwardPass& fp) const {
  if (compressor_)
    compressor_->forward(ctx, x, fp.n, fp.p0, fp.st.compressed.at(size_t(plan_.layer)));
}

}  // namespace cedar
