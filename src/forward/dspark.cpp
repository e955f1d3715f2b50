#include "forward/dspark.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "base/scratch.h"
#include "numerics/bf16.h"

namespace cedar {

struct DSpark::Stage {
  const LayerWeights& w;
  HcSite hc_attn, hc_ffn;
  MoE ffn;
  AttnOutput out;

  Stage(const ModelConfig& cfg, int s, const LayerWeights& lw)
      : w(lw),
        hc_attn(hc_site(cfg, lw, true, prefix(s))),
        hc_ffn(hc_site(cfg, lw, false, prefix(s))),
        ffn(cfg, cfg.num_hidden_layers + s, lw),
        out(cfg, lw, prefix(s) + "attn") {}
  static std::string prefix(int s) { return "mtp." + std::to_string(s) + "."; }
};

DSpark::DSpark(const ModelConfig& cfg, const ModelWeights& w, const VocabProduct& head)
    : cfg_(cfg), w_(w), head_(head), rope_(RopeTable::for_layer(cfg, 0)) {
  if (w.dspark.stages.empty()) throw std::runtime_error("the model has no DSpark stages");
  for (size_t s = 0; s < w.dspark.stages.size(); ++s)
    stages_.push_back(std::make_unique<Stage>(cfg, int(s), w.dspark.stages[s]));
  softmax_scale_ = float(std::pow(double(cfg.head_dim), -0.5));
  markov_head_ = w.dspark.markov_head;
  const int r = cfg.dspark_markov_rank, rp = (r + 31) / 32 * 32;
  if (rp != r) {
    const size_t V = size_t(markov_head_.out);
    markov_padded_.assign(V * size_t(rp), 0);
    for (size_t v = 0; v < V; ++v)
      std::copy_n(markov_head_.bf16() + v * size_t(r), r, markov_padded_.data() + v * size_t(rp));
    markov_head_.w = reinterpret_cast<const uint8_t*>(markov_padded_.data());
    markov_head_.in = rp;
  }
  markov_.emplace(markov_head_);
  join_classes();
}

// The head and the Markov head need not repeat the same rows: a trainer leaves identical the
// rows of ids that never met a gradient of their own, and which ids those are differs between
// the tables (the default model: 1,414 ids new to the target's last run). Every id of a joint
// class has the same head output and the same Markov output, which is all a draft's choice reads.
void DSpark::join_classes() {
  if (!head_.classes() || !markov_->classes() || head_.rows() != markov_->rows()) return;
  std::unordered_map<int64_t, int32_t> seen;
  for (int32_t v = 0; v < head_.rows(); ++v) {
    const int32_t h = head_.class_of(v), m = markov_->class_of(v);
    if (seen.emplace((int64_t(h) << 32) | uint32_t(m), int32_t(joint_first_.size())).second) {
      joint_head_.push_back(h);
      joint_markov_.push_back(m);
      joint_first_.push_back(v);
    }
  }
}

DSpark::~DSpark() = default;

void DSpark::seed(const Ctx& ctx, const float* taps, int n, int64_t p0, SequenceState& st) const {
  if (n <= 0) return;
  const int D = cfg_.hidden_size, hd = cfg_.head_dim, W = cfg_.sliding_window;
  const int rd = cfg_.qk_rope_head_dim;
  const int i0 = std::max(0, n - W), m = n - i0;
  const int K = int(cfg_.dspark_target_layer_ids.size()) * D;
  // main_x = main_norm(main_proj(taps)), once for every stage
  Scratch<float> proj(size_t(m) * size_t(D)), main_x(proj.size());
  linear(ctx, w_.dspark.main_proj, taps + size_t(i0) * size_t(K), m, proj.data());
  for (int i = 0; i < m; ++i)
    ctx.k.rms_norm(proj.data() + size_t(i) * D, D, w_.dspark.main_norm, float(cfg_.rms_norm_eps),
                   main_x.data() + size_t(i) * D);
  Scratch<int64_t> pos(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) pos[size_t(i)] = p0 + i0 + i;
  Scratch<float> cs(size_t(m) * size_t(rd / 2)), sn(cs.size());
  rope_rows(rope_, pos.data(), m, cs.data(), sn.data());
  Scratch<float> kvr(size_t(m) * size_t(hd)), vals(kvr.size());
  Scratch<uint8_t> codes(kvr.size()), scales(size_t(m) * size_t(hd / 32));
  for (size_t s = 0; s < stages_.size(); ++s) {
    const LayerWeights& lw = stages_[s]->w;
    linear(ctx, lw.wkv, main_x.data(), m, kvr.data());
    window_kv_rows(ctx, cfg_, lw, kvr.data(), m, cs.data(), sn.data(), codes.data(), scales.data(),
                   vals.data());
    WindowRing& ring = st.dspark.at(s);
    for (int i = 0; i < m; ++i) {
      std::copy_n(codes.data() + size_t(i) * hd, hd, ring.row_codes(pos[size_t(i)]));
      std::copy_n(scales.data() + size_t(i) * (hd / 32), hd / 32, ring.row_scales(pos[size_t(i)]));
    }
  }
  if (p0 != st.dspark_to) st.dspark_from = p0;
  st.dspark_to = p0 + n;
  st.dspark_from = std::max(st.dspark_from, st.dspark_to - W);
}

void DSpark::attention(const Ctx& ctx, const Stage& sg, const WindowRing& ring, int64_t from,
                       int64_t p, const float* xn, int B, float* out) const {
  const int H = cfg_.num_attention_heads, hd = cfg_.head_dim, rd = cfg_.qk_rope_head_dim;
  Scratch<int64_t> pos(static_cast<size_t>(B));
  for (int i = 0; i < B; ++i) pos[size_t(i)] = p + 1 + i;
  AttnRows ar;
  attn_rows(ctx, cfg_, sg.w, rope_, xn, B, pos.data(), ar);
  // one key list for every block row: the ring oldest first, then the block's own rows
  Scratch<KeyRow> keys;
  for (int64_t q = std::max<int64_t>(from, p - cfg_.sliding_window + 1); q <= p; ++q)
    keys.push_back({ring.row_codes(q), ring.row_scales(q)});
  for (int i = 0; i < B; ++i)
    keys.push_back({ar.codes.data() + size_t(i) * hd, ar.scales.data() + size_t(i) * (hd / 32)});
  AttnKeys ak;
  ak.win = keys.data();
  ak.n_win = int(keys.size());
  Scratch<float> o(size_t(B) * size_t(H) * size_t(hd));
  const size_t scratch_floats = ctx.k.sparse_attn_scratch(H, hd);
  ctx.pool.parallel_for(B, [&](int64_t i0, int64_t i1) {
    Scratch<float> scratch(scratch_floats);
    for (int64_t i = i0; i < i1; ++i) {
      float* oi = o.data() + i * H * hd;
      ctx.k.sparse_attn(ar.q.data() + i * H * hd, H, hd, ak, sg.w.attn_sink, softmax_scale_, oi,
                        scratch.data());
      for (int h = 0; h < H; ++h)
        ctx.k.rope(oi + h * hd + hd - rd, rd, ar.cs.data() + i * (rd / 2),
                   ar.sn.data() + i * (rd / 2), true);
    }
  });
  sg.out.forward(ctx, o.data(), B, out);
}

Draft DSpark::draft(const Ctx& ctx, const SequenceState& st, int32_t anchor,
                    bool with_logits) const {
  const int64_t p = st.n_tokens - 1, V = cfg_.vocab_size;
  const int B = cfg_.dspark_block_size, hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const int r = cfg_.dspark_markov_rank;
  if (p < 0 || st.dspark_to != st.n_tokens || st.dspark_from >= st.dspark_to)
    throw std::runtime_error("DSpark::draft: the rings hold positions [" +
                             std::to_string(st.dspark_from) + ", " + std::to_string(st.dspark_to) +
                             "), the draft after position " + std::to_string(p) +
                             " needs them up to it");
  if (anchor < 0 || anchor >= V)
    throw std::runtime_error("DSpark::draft: anchor " + std::to_string(anchor) +
                             " is outside the vocabulary");
  // the block [anchor, noise...] embedded into every copy, one-hot pre-mix
  const size_t HD = size_t(hc) * D;
  Scratch<float> h(size_t(B) * HD), pre(size_t(B) * hc);
  Scratch<int32_t> ids(static_cast<size_t>(B), int32_t(cfg_.dspark_noise_token_id));
  ids[0] = anchor;
  embed_rows(cfg_, w_.embed, ids.data(), B, h.data(), pre.data());
  Scratch<float> y(size_t(B) * D);
  for (size_t s = 0; s < stages_.size(); ++s) {
    const Stage& sg = *stages_[s];
    const WindowRing& ring = st.dspark.at(s);
    mhc_block(
        ctx, cfg_, sg.w, sg.hc_attn, sg.hc_ffn, sg.ffn, h.data(), pre.data(), B,
        [&](const float* xn, float* out) {
          attention(ctx, sg, ring, st.dspark_from, p, xn, B, out);
        },
        y.data());
  }
  // head: collapse with the last pre-mix (bf16, before the norm), the target's fp32 LM head
  Scratch<float> yc(size_t(B) * D), yn(yc.size());
  for (int i = 0; i < B; ++i) {
    ctx.k.hc_pre(h.data() + size_t(i) * HD, pre.data() + size_t(i) * hc, hc, D,
                 yc.data() + size_t(i) * D);
    ctx.k.rms_norm(yc.data() + size_t(i) * D, D, w_.dspark.norm, float(cfg_.rms_norm_eps),
                   yn.data() + size_t(i) * D);
  }
  Draft out;
  out.tokens.push_back(anchor);
  out.confidence.resize(size_t(B));
  // joined = [y_k ; e_k ; zeros up to the padded rank]
  Scratch<float> joined(size_t(D + markov_head_.in), 0.0f);
  auto join = [&](int k) {
    const uint16_t* e = w_.dspark.markov_embed + size_t(out.tokens.back()) * size_t(r);
    std::copy_n(yc.data() + size_t(k) * D, D, joined.data());
    for (int j = 0; j < r; ++j) joined[size_t(D + j)] = bf16_to_f32(e[j]);
  };
  auto confidence = [&](int k) {
    linear(ctx, w_.dspark.confidence, joined.data(), 1, &out.confidence[size_t(k)],
           LinearOut::kF32);
  };
  // the sequential Markov loop: row k gets M_head . E_markov[x_{k-1}] and picks x_k; the
  // confidence of row k reads [y_k ; E_markov[x_{k-1}]]
  if (!with_logits && drafts_in_classes()) {
    // every id of a joint class has the same head and Markov outputs, so the sums and their
    // first maximum over the joint classes (numbered in order of their lowest ids) pick the
    // token the vocabulary-wide scan picks: no row is ever expanded to the vocabulary
    const int J = int(joint_first_.size()), ld = head_.distinct_ld();
    Scratch<float> dh(size_t(B) * size_t(ld)), dm(static_cast<size_t>(markov_->distinct_ld()));
    Scratch<float> sh(static_cast<size_t>(J)), sm(static_cast<size_t>(J));
    head_.forward_distinct(ctx, yn.data(), B, dh.data());
    for (int k = 0; k < B; ++k) {
      join(k);
      markov_->forward_distinct(ctx, joined.data() + D, 1, dm.data());
      const float* dk = dh.data() + size_t(k) * size_t(ld);
      for (int j = 0; j < J; ++j) {
        sh[size_t(j)] = dk[joint_head_[size_t(j)]];
        sm[size_t(j)] = dm[size_t(joint_markov_[size_t(j)])];
      }
      const int64_t j = ctx.k.add_argmax(sh.data(), sm.data(), J, sh.data());
      out.tokens.push_back(joint_first_[size_t(j)]);
      confidence(k);
    }
    return out;
  }
  out.logits.resize(size_t(B) * size_t(V));
  head_.forward(ctx, yn.data(), B, out.logits.data());
  Scratch<float> bias(static_cast<size_t>(V));
  for (int k = 0; k < B; ++k) {
    join(k);
    markov_->forward(ctx, joined.data() + D, 1, bias.data());
    float* lk = out.logits.data() + size_t(k) * size_t(V);
    out.tokens.push_back(int32_t(ctx.k.add_argmax(lk, bias.data(), V, lk)));
    confidence(k);
  }
  return out;
}

}  // namespace cedar
