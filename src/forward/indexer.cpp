#include "forward/indexer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "base/scratch.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"
#include "numerics/fp4.h"

namespace cedar {

namespace {

// An FP4 (UE8M0 / 32) vector as small integers: value = c2 * 2^(e - 128) with c2 = 2 * E2M1
// value (an integer in [-12, 12]) and e the scale code (the encoding index_scores reads).
void unpack_fp4_ue8m0(const uint8_t* packed, int n, int8_t* c2) {
  static const int8_t kTwice[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int i = 0; i < n; i += 2) {
    c2[i] = kTwice[fp4_lo(packed[i / 2])];
    c2[i + 1] = kTwice[fp4_hi(packed[i / 2])];
  }
}

}  // namespace

Indexer::Indexer(const ModelConfig& cfg, int layer, const LayerWeights& w, const RopeTable& rope)
    : cfg_(cfg), plan_(cfg.plan(layer)), w_(w), rope_(rope) {}

void Indexer::forward(const Ctx& ctx, const float* x, const float* qr, ForwardPass& fp) const {
  Scratch<int64_t> pos(static_cast<size_t>(fp.n));
  for (int i = 0; i < fp.n; ++i) pos[size_t(i)] = fp.p0 + i;
  IndexQueries q;
  project(ctx, x, qr, fp.n, pos.data(), q);
  select(ctx, q, 0, fp);
}

void Indexer::project(const Ctx& ctx, const float* x, const float* qr, int n, const int64_t* pos,
                      IndexQueries& out) const {
  const int IH = cfg_.index_n_heads, ihd = cfg_.index_head_dim;
  const int rd = cfg_.qk_rope_head_dim, nb32 = ihd / 32;
  // queries: wq_b(qr) per head, RoPE at the query position, FP4 (UE8M0 / 32)
  Scratch<float> q(size_t(n) * size_t(IH) * size_t(ihd));
  linear(ctx, w_.idx_wq_b, qr, n, q.data());
  out.qc.assign(q.size(), 0);
  out.qe.assign(size_t(n) * size_t(IH) * size_t(nb32), 0);
  int8_t* qc = out.qc.data();
  uint8_t* qe = out.qe.data();
  ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    Scratch<float> cs(static_cast<size_t>(rd / 2)), sn(static_cast<size_t>(rd / 2));
    Scratch<uint8_t> packed(static_cast<size_t>(ihd / 2)), sc(static_cast<size_t>(nb32));
    for (int64_t i = i0; i < i1; ++i) {
      rope_.angles(pos[i], cs.data(), sn.data());
      for (int h = 0; h < IH; ++h) {
        float* qh = q.data() + (i * IH + h) * ihd;
        ctx.k.rope(qh + ihd - rd, rd, cs.data(), sn.data(), false);
        ctx.k.fp4_act_quant_ue8m0(qh, ihd, packed.data(), sc.data());
        unpack_fp4_ue8m0(packed.data(), ihd, qc + (i * IH + h) * ihd);
        std::copy_n(sc.data(), nb32, qe + (i * IH + h) * nb32);
      }
    }
  });
  // per-head weights: bf16(f32(weights_proj(x) * f32(ihd^-0.5 * IH^-0.5)))
  out.wts.assign(size_t(n) * size_t(IH), 0.0f);
  linear(ctx, w_.idx_weights_proj, x, n, out.wts.data(), LinearOut::kBf16);
  const float cscale = float(std::pow(double(ihd), -0.5) * std::pow(double(IH), -0.5));
  for (auto& v : out.wts) v = round_bf16(v * cscale);
}

void Indexer::select(const Ctx& ctx, const IndexQueries& iq, int row0, ForwardPass& fp) const {
  const int n = fp.n, IH = cfg_.index_n_heads, ihd = cfg_.index_head_dim;
  const int r = plan_.ratio, nb32 = ihd / 32;
  const CompressedKv& cache = fp.st.compressed.at(size_t(plan_.kv_source));
  const int64_t n_rows = cache.n_rows;
  const int8_t* qc = iq.qc.data() + size_t(row0) * IH * ihd;
  const uint8_t* qe = iq.qe.data() + size_t(row0) * IH * nb32;
  const float* wts = iq.wts.data() + size_t(row0) * IH;

  // the lists keep their capacity from step to step (no allocation in a decode step)
  auto& out = fp.topk[size_t(plan_.layer)];
  out.resize(size_t(n));
  for (auto& o : out) o.clear();
  if (fp.keep_scores) {
    fp.scores.resize(size_t(cfg_.num_hidden_layers));
    fp.scores[size_t(plan_.layer)].assign(size_t(n), {});
  }
  if (plan_.is_candidate_source) {
    fp.candidates.resize(size_t(n));
    for (auto& c : fp.candidates) c.clear();
  }
  const int B = cfg_.candidate_block_size;
  const bool split_rows = n < ctx.pool.size();
  auto queries = [&](int64_t i0, int64_t i1) {
    Scratch<float> score;
    Scratch<float> bs;
    Scratch<int> sel;
    Scratch<int32_t> pool;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t p = fp.p0 + i;
      const int64_t n_vis = (p + 1) / r;
      if (n_vis > n_rows) throw std::runtime_error("indexer: compressed rows not yet appended");
      const int8_t* qi = qc + i * IH * ihd;
      const uint8_t* qei = qe + i * IH * nb32;
      const float* wi = wts + i * IH;
      if (plan_.uses_candidates && !plan_.is_candidate_source) {
        // only the rows of the query's candidate pool are scored; the rest stay -inf
        const auto& mask = fp.candidates.at(size_t(i));
        pool.clear();
        for (size_t b = 0; b < mask.size(); ++b)
          if (mask[b])
            for (int64_t t = int64_t(b) * B; t < std::min<int64_t>(n_vis, int64_t(b + 1) * B); ++t)
              pool.push_back(int32_t(t));
        score.assign(size_t(n_vis), -INFINITY);
        Scratch<float> ps(pool.size());
        ctx.k.index_scores(qi, qei, wi, IH, ihd, cache.ik_fp4.data(), cache.ik_scale.data(),
                           pool.data(), int64_t(pool.size()), ps.data());
        for (size_t j = 0; j < pool.size(); ++j) score[size_t(pool[j])] = ps[j];
      } else {
        score.assign(size_t(n_vis), 0.0f);
        // a decode step (fewer queries than threads) splits the rows of its query instead
        auto rows = [&](int64_t t0, int64_t t1) {
          ctx.k.index_scores(qi, qei, wi, IH, ihd, cache.ik_row(t0), cache.ik_scales_row(t0),
                             nullptr, t1 - t0, score.data() + t0);
        };
        if (split_rows)
          ctx.pool.parallel_for(n_vis, rows, 1024);
        else
          rows(0, n_vis);
      }
      if (plan_.is_candidate_source && n_vis > 0) {
        // level one: blocks of B rows scored by their best row; the query's newest block forced
        const int64_t nblk = (n_vis + B - 1) / B;
        bs.assign(size_t(nblk), -INFINITY);
        for (int64_t t = 0; t < n_vis; ++t)
          bs[size_t(t / B)] = std::max(bs[size_t(t / B)], score[size_t(t)]);
        bs[size_t((n_vis - 1) / B)] = INFINITY;
        const int kb = int(std::min<int64_t>(cfg_.candidate_topk_blocks, nblk));
        sel.resize(size_t(kb));
        ctx.k.topk(bs.data(), int(nblk), kb, sel.data());
        auto& mask = fp.candidates[size_t(i)];
        mask.assign(size_t(nblk), 0);
        for (int b : sel)
          if (bs[size_t(b)] > -INFINITY) mask[size_t(b)] = 1;
      }
      if (fp.keep_scores)
        fp.scores[size_t(plan_.layer)][size_t(i)].assign(score.begin(), score.end());
      const int k = int(std::min<int64_t>(cfg_.index_topk, n_vis));
      sel.resize(size_t(k));
      ctx.k.topk(score.data(), int(n_vis), k, sel.data());
      out[size_t(i)].assign(sel.begin(), sel.end());
    }
  };
  if (split_rows)
    queries(0, n);
  else
    ctx.pool.parallel_for(n, queries);
  if (fp.dump && fp.dump->active()) {
    Scratch<int32_t> flat(size_t(n) * size_t(cfg_.index_topk), -1);
    for (int i = 0; i < n; ++i)
      std::copy(out[size_t(i)].begin(), out[size_t(i)].end(),
                flat.begin() + size_t(i) * size_t(cfg_.index_topk));
    fp.dump->i32("layer" + std::to_string(plan_.layer) + ".topk", fp.p0, flat.data(),
                 {n, cfg_.index_topk});
  }
}

}  // namespace cedar
