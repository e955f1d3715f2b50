#include "forward/indexer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "forward/fmath.h"
#include "forward/simd.h"
#include "numerics/bf16.h"
#include "numerics/fp4.h"

namespace cedar {

namespace {

// An FP4 (UE8M0 / 32) vector as small integers: value = c2 * 2^(e - 128) with c2 = 2 * E2M1
// value (an integer in [-12, 12]) and e the scale code. Dot products of two such vectors are then
// exact integer sums per 32-block, scaled by a power of two.
void unpack_fp4_ue8m0(const uint8_t* packed, int n, int8_t* c2) {
  static const int8_t kTwice[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int i = 0; i < n; i += 2) {
    c2[i] = kTwice[fp4_lo(packed[i / 2])];
    c2[i + 1] = kTwice[fp4_hi(packed[i / 2])];
  }
}

inline int32_t idot32(const int8_t* a, const int8_t* b) {
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += int32_t(a[i]) * int32_t(b[i]);
  return s;
}

// score[t] for rows t < n_vis of one query (NUMERICS §C): per head sc = bf16(q.k) (exact integer
// block sums times powers of two, rounded once to fp32 then bf16), pr = bf16(relu(sc) * w),
// score = bf16(xsum_h pr).
CEDAR_MULTIVERSION
void score_rows(const int8_t* qc, const int* qe, const float* w, int IH, int ihd, const int8_t* kc,
                const CompressedKv& cache, int64_t n_vis, float* score) {
  const int nb32 = ihd / 32;
  for (int64_t t = 0; t < n_vis; ++t) {
    double acc = 0;
    const int8_t* kt = kc + t * ihd;
    const uint8_t* ke = cache.ik_scales_row(t);
    for (int h = 0; h < IH; ++h) {
      const int8_t* qh = qc + size_t(h) * ihd;
      const int* qeh = qe + size_t(h) * nb32;
      double d = 0;
      for (int b = 0; b < nb32; ++b)
        d += double(idot32(qh + b * 32, kt + b * 32)) * fmath::pow2d(qeh[b] + ke[b] - 256);
      const float sc = round_bf16(fmath::round_sum(d));  // bf16 einsum output
      const float rl = sc > 0.0f ? sc : 0.0f;
      acc += double(round_bf16(rl * w[h]));  // product rounded to bf16
    }
    score[t] = round_bf16(fmath::round_sum(acc));
  }
}

}  // namespace

Indexer::Indexer(const ModelConfig& cfg, int layer, const LayerWeights& w, const RopeTable& rope)
    : cfg_(cfg), plan_(cfg.plan(layer)), w_(w), rope_(rope) {}

void Indexer::forward(const Ctx& ctx, const float* x, const float* qr, ForwardPass& fp) const {
  std::vector<int64_t> pos(static_cast<size_t>(fp.n));
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
  std::vector<float> q(size_t(n) * size_t(IH) * size_t(ihd));
  linear(ctx, w_.idx_wq_b, qr, n, q.data());
  out.qc.assign(q.size(), 0);
  out.qe.assign(size_t(n) * size_t(IH) * size_t(nb32), 0);
  int8_t* qc = out.qc.data();
  int* qe = out.qe.data();
  ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    std::vector<float> cs(static_cast<size_t>(rd / 2)), sn(static_cast<size_t>(rd / 2));
    std::vector<uint8_t> packed(static_cast<size_t>(ihd / 2)), sc(static_cast<size_t>(nb32));
    for (int64_t i = i0; i < i1; ++i) {
      rope_.angles(pos[i], cs.data(), sn.data());
      for (int h = 0; h < IH; ++h) {
        float* qh = q.data() + (i * IH + h) * ihd;
        ctx.k.rope(qh + ihd - rd, rd, cs.data(), sn.data(), false);
        ctx.k.fp4_act_quant_ue8m0(qh, ihd, packed.data(), sc.data());
        unpack_fp4_ue8m0(packed.data(), ihd, qc + (i * IH + h) * ihd);
        for (int b = 0; b < nb32; ++b) qe[size_t((i * IH + h) * nb32 + b)] = sc[size_t(b)];
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
  const int* qe = iq.qe.data() + size_t(row0) * IH * nb32;
  const float* wts = iq.wts.data() + size_t(row0) * IH;

  // the index keys of the KV source, unpacked once per forward
  std::vector<int8_t> kc(size_t(n_rows) * size_t(ihd));
  ctx.pool.parallel_for(n_rows, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) unpack_fp4_ue8m0(cache.ik_row(t), ihd, kc.data() + t * ihd);
  });

  auto& out = fp.topk[size_t(plan_.layer)];
  out.assign(size_t(n), {});
  if (plan_.is_candidate_source) fp.candidates.assign(size_t(n), {});
  const int B = cfg_.candidate_block_size;
  ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    std::vector<float> score;
    std::vector<float> bs;
    std::vector<int> sel;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t p = fp.p0 + i;
      const int64_t n_vis = (p + 1) / r;
      if (n_vis > n_rows) throw std::runtime_error("indexer: compressed rows not yet appended");
      score.assign(size_t(n_vis), 0.0f);
      score_rows(qc + i * IH * ihd, qe + i * IH * nb32, wts + i * IH, IH, ihd, kc.data(), cache,
                 n_vis, score.data());
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
      } else if (plan_.uses_candidates) {
        const auto& mask = fp.candidates.at(size_t(i));
        for (int64_t t = 0; t < n_vis; ++t) {
          const size_t b = size_t(t / B);
          if (b >= mask.size() || !mask[b]) score[size_t(t)] = -INFINITY;
        }
      }
      const int k = int(std::min<int64_t>(cfg_.index_topk, n_vis));
      sel.resize(size_t(k));
      ctx.k.topk(score.data(), int(n_vis), k, sel.data());
      out[size_t(i)].assign(sel.begin(), sel.end());
    }
  });
  if (fp.dump && fp.dump->active()) {
    std::vector<int32_t> flat(size_t(n) * size_t(cfg_.index_topk), -1);
    for (int i = 0; i < n; ++i)
      std::copy(out[size_t(i)].begin(), out[size_t(i)].end(),
                flat.begin() + size_t(i) * size_t(cfg_.index_topk));
    fp.dump->i32("layer" + std::to_string(plan_.layer) + ".topk", fp.p0, flat.data(),
                 {n, cfg_.index_topk});
  }
}

}  // namespace cedar
