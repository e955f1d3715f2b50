#include "forward/engram.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "base/scratch.h"
#include "forward/engram_store.h"
#include "model/gguf_decode.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"
#include "numerics/fp8.h"

namespace cedar {

Engram::Engram(const ModelConfig& cfg, int layer, const LayerWeights& w, const EngramLayout& layout)
    : cfg_(cfg), w_(w), layout_(layout), index_(cfg.plan(layer).engram_index), layer_(layer) {
  if (index_ < 0 || size_t(index_) >= layout.layer_ids.size())
    throw std::runtime_error("layer " + std::to_string(layer) + " is not an Engram layer");
  if (layout.num_embeddings.at(size_t(index_)) != w.engram_rows)
    throw std::runtime_error("layers." + std::to_string(layer) +
                             ".engram.embed.weight: rows do not match the bucket primes");
}

void Engram::hash_rows(const int32_t* mapped, int hist, int n, int64_t p0, int32_t pad_id,
                       int64_t* rows) const {
  const int S = layout_.max_ngram_size, nc = layout_.n_cols();
  Scratch<int64_t> ids(static_cast<size_t>(S));
  for (int i = 0; i < n; ++i) {
    const int64_t p = p0 + i;
    bool blocked = false;
    for (int s = 0; s < S; ++s) {
      // history before the sequence start and at an image position (DEAD, -1) is blocked,
      // cumulatively: an n-gram never reaches across either
      blocked = blocked || p < s || mapped[hist + i - s] < 0;
      ids[size_t(s)] = blocked ? pad_id : mapped[hist + i - s];
    }
    const auto r = engram_hash_rows(layout_, index_, ids.data());
    std::copy(r.begin(), r.end(), rows + size_t(i) * nc);
  }
}

void Engram::forward(const Ctx& ctx, float* h, int n, const int64_t* rows,
                     const uint8_t* image) const {
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size, ehd = layout_.head_dim;
  const int nc = layout_.n_cols(), width = nc * ehd;
  const float eps = float(cfg_.rms_norm_eps);
  // gather and dequantize the rows (a release table's: exact in bf16; a GGUF table's blocks:
  // their format's values), concatenated in (order, head) order; from the mapped table, or read
  // from storage into a copy (forward/engram_store.h)
  const size_t nr = size_t(n) * size_t(nc);
  const size_t rb = ctx.engram ? ctx.engram->row_bytes(index_) : 0;
  Scratch<uint8_t> gathered;
  if (ctx.engram) {
    gathered.resize(nr * rb);
    ctx.engram->gather(index_, rows, int(nr), gathered.data());
  }
  Scratch<float> E(size_t(n) * size_t(width));
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < nc; ++c) {
      const size_t k = size_t(i) * nc + c;
      const int64_t row = rows[k];
      if (row < 0 || row >= w_.engram_rows)
        throw std::runtime_error("engram row id " + std::to_string(row) + " out of range");
      const uint8_t* v =
          ctx.engram ? gathered.data() + k * rb : w_.engram_table + size_t(row) * w_.engram_stride;
      float* out = E.data() + size_t(i) * width + size_t(c) * ehd;
      if (w_.engram_type) {
        gguf::decode_row(w_.engram_type, v, ehd, out);
        continue;
      }
      const uint8_t* s =
          ctx.engram ? v + ehd : w_.engram_table_scale + size_t(row) * w_.engram_scale_stride;
      // ds4's native rows are checked as they are read (the table is never read whole); the
      // store checks the rows it reads itself
      if (w_.engram_native && !ctx.engram && !gguf::engram_row_valid(v, ehd))
        throw std::runtime_error(engram_nan_row(layer_, row));
      for (int d = 0; d < ehd; ++d) out[d] = fmath::e4m3(v[d]) * fmath::ue8m0(s[d / 32]);
    }
  Scratch<float> kv(size_t(n) * size_t(D) * size_t(hc + 1));
  linear(ctx, w_.engram_wkv, E.data(), n, kv.data());
  // the Python scalar dim**-0.5, rounded to fp32 by torch
  const float dscale = float(std::pow(double(D), -0.5));
  ctx.pool.parallel_for(int64_t(n) * hc, [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a) {
      const int64_t i = a / hc;
      const int c = int(a % hc);
      const float* key = kv.data() + size_t(i) * D * (hc + 1) + size_t(c) * D;
      const float* val = kv.data() + size_t(i) * D * (hc + 1) + size_t(hc) * D;
      float* hr = h + (size_t(i) * hc + c) * D;
      const uint16_t* qw = w_.engram_q_weight + size_t(c) * D;
      const uint16_t* kw = w_.engram_k_weight + size_t(c) * D;
      // normalised per (token, copy) over D, not jointly over the copies
      double hs = 0, ks = 0, dt = 0;
      for (int d = 0; d < D; ++d) {
        hs += double(hr[d] * hr[d]);
        ks += double(key[d] * key[d]);
        const float wgt = bf16_to_f32(qw[d]) * bf16_to_f32(kw[d]);
        dt += double((hr[d] * wgt) * key[d]);  // h*weight rounded, then *key rounded
      }
      const float rstd =
          fmath::rsqrt(float(hs / double(D)) + eps) * fmath::rsqrt(float(ks / double(D)) + eps);
      const float dot = (fmath::round_sum(dt) * rstd) * dscale;
      const float mag = fmath::sqrt(std::max(std::fabs(dot), 1e-6f));
      // signed sqrt, then sigmoid; an image-span row takes none of it (gate 0)
      const float gate = image && image[i] ? 0.0f : fmath::sigmoid(std::copysign(mag, dot));
      for (int d = 0; d < D; ++d) hr[d] = round_bf16(hr[d] + gate * val[d]);
    }
  });
}

}  // namespace cedar
