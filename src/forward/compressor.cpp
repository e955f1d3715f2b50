#include "forward/compressor.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/scratch.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"

namespace cedar {

Compressor::Compressor(const ModelConfig& cfg, int layer, const LayerWeights& w,
                       const RopeTable& rope)
    : cfg_(cfg), layer_(layer), ratio_(cfg.plan(layer).ratio), w_(w), rope_(rope) {}

void Compressor::forward(const Ctx& ctx, const float* x, int n, int64_t p0,
                         CompressedKv& cache) const {
  CompressorInput in;
  project(ctx, x, n, in);
  append(ctx, in.k.data(), in.z.data(), n, p0, cache);
}

void Compressor::project(const Ctx& ctx, const float* x, int n, CompressorInput& in) const {
  const int hd = cfg_.head_dim;
  in.k.assign(size_t(n) * size_t(hd), 0.0f);
  if (ratio_ == 1) {
    linear(ctx, w_.comp_wkv, x, n, in.k.data(), LinearOut::kBf16);
    return;
  }
  // fp32 k and gate logits of every row (bf16 weights promoted: exact products), from one
  // prepared copy of x in one parallel region
  in.z.assign(in.k.size(), 0.0f);
  PreparedRows xp;
  prepare_rows(ctx, WeightFormat::kBF16, x, n, cfg_.hidden_size, xp);
  const GemmTask t[2] = {{&w_.comp_wkv, &xp, in.k.data(), LinearOut::kF32},
                         {&w_.comp_wgate, &xp, in.z.data(), LinearOut::kF32}};
  linear_group(ctx, t);
}

void Compressor::append(const Ctx& ctx, const float* kin, const float* zin, int n, int64_t p0,
                        CompressedKv& cache) const {
  const int r = ratio_, hd = cfg_.head_dim, ihd = cfg_.index_head_dim;
  const int rd = cfg_.qk_rope_head_dim;
  if (cache.n_rows != p0 / r || cache.n_tail != int(p0 % r))
    throw std::runtime_error("layer " + std::to_string(layer_) +
                             ": compressor state does not match position " + std::to_string(p0));
  if (cache.undo.on && r > 1) {  // SequenceState::rewind rebuilds an open group from these
    cache.undo.k.assign(kin, kin + size_t(n) * size_t(hd));
    cache.undo.z.assign(zin, zin + size_t(n) * size_t(hd));
  }
  // Latents (bf16, normalised, pre-RoPE) of the groups that complete in this chunk.
  Scratch<float> lat;
  int n_new = 0;
  const int64_t j0 = cache.n_rows;
  if (r == 1) {
    n_new = n;
    lat.resize(size_t(n) * size_t(hd));
    ctx.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        ctx.k.rms_norm(kin + i * hd, hd, w_.comp_norm, float(cfg_.rms_norm_eps),
                       lat.data() + i * hd);
    });
  } else {
    // the parked tokens of the open group come first
    const int nt = cache.n_tail, total = nt + n;
    auto krow = [&](int t) {
      return t < nt ? cache.tail_k.data() + size_t(t) * size_t(hd) : kin + size_t(t - nt) * hd;
    };
    auto zrow = [&](int t) {
      return t < nt ? cache.tail_z.data() + size_t(t) * size_t(hd) : zin + size_t(t - nt) * hd;
    };
    n_new = total / r;
    lat.resize(size_t(n_new) * size_t(hd));
    ctx.pool.parallel_for(n_new, [&](int64_t g0, int64_t g1) {
      Scratch<float> pooled(static_cast<size_t>(hd));
      Scratch<float> e(static_cast<size_t>(r));
      for (int64_t g = g0; g < g1; ++g) {
        for (int c = 0; c < hd; ++c) {
          // channel-wise softmax over the group's tokens (torch: exp(z - max) / sum)
          float m = -INFINITY;
          for (int t = 0; t < r; ++t) m = std::max(m, zrow(int(g) * r + t)[c]);
          double es = 0;
          for (int t = 0; t < r; ++t) {
            e[size_t(t)] = fmath::exp(zrow(int(g) * r + t)[c] - m);
            es += double(e[size_t(t)]);
          }
          const float S = fmath::round_sum(es);
          double acc = 0;
          for (int t = 0; t < r; ++t) {
            const float wt = e[size_t(t)] / S;
            acc += double(krow(int(g) * r + t)[c] * wt);  // product rounded to fp32
          }
          pooled[size_t(c)] = round_bf16(fmath::round_sum(acc));
        }
        ctx.k.rms_norm(pooled.data(), hd, w_.comp_norm, float(cfg_.rms_norm_eps),
                       lat.data() + g * hd);
      }
    });
    // park the tokens of the group still open after this chunk
    const int rem = total % r;
    Scratch<float> tk(size_t(rem) * size_t(hd)), tz(size_t(rem) * size_t(hd));
    for (int t = 0; t < rem; ++t) {
      std::copy_n(krow(n_new * r + t), hd, tk.data() + size_t(t) * hd);
      std::copy_n(zrow(n_new * r + t), hd, tz.data() + size_t(t) * hd);
    }
    // unused slots are zeroed so that the state is a pure function of the tokens seen
    std::fill(cache.tail_k.begin(), cache.tail_k.end(), 0.0f);
    std::fill(cache.tail_z.begin(), cache.tail_z.end(), 0.0f);
    std::copy(tk.begin(), tk.end(), cache.tail_k.begin());
    std::copy(tz.begin(), tz.end(), cache.tail_z.begin());
    cache.n_tail = rem;
  }
  if (n_new == 0) return;
  // index keys from the pre-RoPE latent: k_norm(wk(lat)), RoPE at j*r, FP4 (UE8M0 / 32)
  Scratch<float> ik(size_t(n_new) * size_t(ihd)), ikn(ik.size());
  linear(ctx, w_.idx_wk, lat.data(), n_new, ik.data(), LinearOut::kBf16);
  Scratch<uint8_t> ik_packed(size_t(n_new) * size_t(ihd / 2));
  Scratch<uint8_t> ik_sc(size_t(n_new) * size_t(ihd / 32));
  Scratch<uint8_t> kv_packed(size_t(n_new) * size_t(hd / 2));
  Scratch<uint8_t> kv_sc(size_t(n_new) * size_t(hd / 16));
  ctx.pool.parallel_for(n_new, [&](int64_t g0, int64_t g1) {
    Scratch<float> cs(static_cast<size_t>(rd / 2)), sn(static_cast<size_t>(rd / 2));
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t pos = (j0 + g) * r;  // a latent stands for the first token of its group
      rope_.angles(pos, cs.data(), sn.data());
      float* kr = ikn.data() + g * ihd;
      ctx.k.rms_norm(ik.data() + g * ihd, ihd, w_.idx_k_norm, float(cfg_.rms_norm_eps), kr);
      ctx.k.rope(kr + ihd - rd, rd, cs.data(), sn.data(), false);
      ctx.k.fp4_act_quant_ue8m0(kr, ihd, ik_packed.data() + g * (ihd / 2),
                                ik_sc.data() + g * (ihd / 32));
      float* lr = lat.data() + g * hd;
      ctx.k.rope(lr + hd - rd, rd, cs.data(), sn.data(), false);
      ctx.k.fp4_act_quant_e4m3(lr, hd, kv_packed.data() + g * (hd / 2),
                               kv_sc.data() + g * (hd / 16));
    }
  });
  for (int g = 0; g < n_new; ++g)
    cache.append(kv_packed.data() + size_t(g) * (hd / 2), kv_sc.data() + size_t(g) * (hd / 16),
                 ik_packed.data() + size_t(g) * (ihd / 2), ik_sc.data() + size_t(g) * (ihd / 32));
}

void Compressor::rebuild_tail(const Ctx& ctx, const float* x, int n, int64_t p0,
                              CompressedKv& cache) const {
  const int r = ratio_, D = cfg_.hidden_size;
  const int64_t h = p0 + n;
  const int rem = int(h % r);
  if (r <= 1) return;
  if (cache.n_rows != h / r)
    throw std::runtime_error("layer " + std::to_string(layer_) + ": " +
                             std::to_string(cache.n_rows) + " compressed rows, position " +
                             std::to_string(h) + " needs " + std::to_string(h / r));
  if (rem > n)
    throw std::runtime_error("layer " + std::to_string(layer_) +
                             ": the replay does not cover the open compressor group");
  std::fill(cache.tail_k.begin(), cache.tail_k.end(), 0.0f);
  std::fill(cache.tail_z.begin(), cache.tail_z.end(), 0.0f);
  if (rem > 0) {
    const float* xr = x + size_t(n - rem) * size_t(D);
    linear(ctx, w_.comp_wkv, xr, rem, cache.tail_k.data(), LinearOut::kF32);
    linear(ctx, w_.comp_wgate, xr, rem, cache.tail_z.data(), LinearOut::kF32);
  }
  cache.n_tail = rem;
}

}  // namespace cedar
