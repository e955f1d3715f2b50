#include "forward/transformer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "numerics/bf16.h"

namespace cedar {

// The mHC stream of a run of rows: h [n, hc, D] (bf16 values) and the pre-mix [n, hc] that the
// next attention site collapses with.
struct Transformer::Stream {
  int n = 0;
  std::vector<float> h, pre;
  Stream(int rows, int hc, int D) : n(rows), h(size_t(rows) * hc * D), pre(size_t(rows) * hc) {}
};

Transformer::Transformer(const Checkpoint& ckpt, const KernelTable& kernels, ThreadPool& pool,
                         std::vector<int32_t> engram_token_map)
    : cfg_(ckpt.config()),
      k_(kernels),
      pool_(pool),
      w_(ModelWeights::bind(ckpt)),
      token_map_(std::move(engram_token_map)) {
  if (!cfg_.engram_layer_ids.empty()) {
    layout_ = EngramLayout::build(cfg_);
    if (int64_t(token_map_.size()) != cfg_.vocab_size)
      throw std::runtime_error("Engram token map has " + std::to_string(token_map_.size()) +
                               " entries, vocab_size is " + std::to_string(cfg_.vocab_size));
    int32_t mx = 0;
    for (int32_t v : token_map_) mx = std::max(mx, v);
    if (int64_t(mx) + 1 != cfg_.engram_compressed_vocab_size)
      throw std::runtime_error("Engram token map has " + std::to_string(int64_t(mx) + 1) +
                               " ids, engram_compressed_vocab_size is " +
                               std::to_string(cfg_.engram_compressed_vocab_size));
    engram_pad_ = token_map_.at(size_t(cfg_.engram_pad_token_id));
  }
  blocks_.resize(size_t(cfg_.num_hidden_layers));
  engrams_.resize(size_t(cfg_.num_hidden_layers));
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    blocks_[size_t(l)] = std::make_unique<Block>(cfg_, l, lw);
    if (cfg_.plan(l).has_engram)
      engrams_[size_t(l)] = std::make_unique<Engram>(cfg_, l, lw, layout_);
  }
  // The CED split exists when the decoder (candidate source and up) reads global KV that the
  // encoder rows fully determine: no KV source above the candidate source (its rows would exist
  // only for the replay rows) and no Engram layer in the decoder (its hashes would need the ids
  // of earlier chunks). Otherwise CED mode runs exactly.
  const int c = cfg_.candidate_source_layer_id;
  if (c >= 0) {
    bool ok = true;
    for (int l = c; l < cfg_.num_hidden_layers; ++l) {
      if (cfg_.plan(l).is_kv_source && l != c) ok = false;
      if (cfg_.plan(l).has_engram) ok = false;
    }
    if (ok) ced_layer_ = c;
  }
}

Transformer::~Transformer() = default;

void Transformer::check_ids(const int32_t* ids, int n) const {
  for (int i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= cfg_.vocab_size)
      throw std::runtime_error("token id " + std::to_string(ids[i]) +
                               " is outside the vocabulary (vocab_size " +
                               std::to_string(cfg_.vocab_size) + ")");
}

void Transformer::check_window(const SequenceState& st, int64_t q0, int64_t trunc) const {
  const int64_t oldest = std::max<int64_t>({0, trunc, q0 - cfg_.sliding_window + 1});
  if (oldest < q0 && oldest < st.window_from)
    throw std::runtime_error("forward: the query at position " + std::to_string(q0) +
                             " needs window rows from " + std::to_string(oldest) +
                             " but the rings hold rows from " + std::to_string(st.window_from) +
                             " only (a state restored without its window: call replay first)");
}

void Transformer::embed(const int32_t* ids, int n, Stream& s) const {
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const size_t HD = size_t(hc) * D;
  // embedding copied to every stream copy; identity pre-mix
  for (int i = 0; i < n; ++i) {
    const uint16_t* e = w_.embed + size_t(ids[i]) * D;
    for (int c = 0; c < hc; ++c)
      for (int d = 0; d < D; ++d) s.h[size_t(i) * HD + size_t(c) * D + d] = bf16_to_f32(e[d]);
    std::fill_n(s.pre.begin() + long(i) * hc, hc, 0.0f);
    s.pre[size_t(i) * hc] = 1.0f;
  }
}

// Engram hash rows of every Engram layer for rows at p0 .. p0+n-1 (they depend on ids only).
// hist_mapped [hist]: mapped ids of positions p0-hist .. p0-1.
void Transformer::engram_rows(const int32_t* ids, int n, int64_t p0, const int32_t* hist_mapped,
                              int hist, std::vector<std::vector<int64_t>>& rows) const {
  rows.assign(engrams_.size(), {});
  if (layout_.layer_ids.empty()) return;
  std::vector<int32_t> mapped(hist_mapped, hist_mapped + hist);
  for (int i = 0; i < n; ++i) mapped.push_back(token_map_[size_t(ids[i])]);
  for (size_t l = 0; l < engrams_.size(); ++l)
    if (engrams_[l]) {
      rows[l].resize(size_t(n) * size_t(layout_.n_cols()));
      engrams_[l]->hash_rows(mapped.data(), hist, n, p0, engram_pad_, rows[l].data());
    }
}

// final collapse of rows [first, first+m) with the last FFN pre-mix, norm, fp32 head
void Transformer::head(const Ctx& ctx, const Stream& s, int first, int m, int64_t p0,
                       float* logits) const {
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const size_t HD = size_t(hc) * D;
  std::vector<float> x(size_t(m) * D), xn(size_t(m) * D);
  for (int i = 0; i < m; ++i) {
    hc_pre(s.h.data() + size_t(first + i) * HD, s.pre.data() + size_t(first + i) * hc, hc, D,
           x.data() + size_t(i) * D);
    k_.rms_norm(x.data() + size_t(i) * D, D, w_.norm, float(cfg_.rms_norm_eps),
                xn.data() + size_t(i) * D);
  }
  Linear hw;
  hw.kind = Linear::Kind::BF16;
  hw.out = int(cfg_.vocab_size);
  hw.in = D;
  hw.w = reinterpret_cast<const uint8_t*>(w_.head);
  hw.name = "head";
  linear(ctx, hw, xn.data(), m, logits, LinearOut::kF32);
  if (dump_.active()) dump_.f32("final_norm", p0 + first, xn.data(), {m, D});
}

void Transformer::forward(SequenceState& st, const int32_t* ids, int n, int64_t p0,
                          LogitsWanted want, float* logits) const {
  ForwardOptions opt;
  opt.mode = PrefillMode::kExact;
  opt.logits = want;
  forward(st, ids, n, p0, opt, logits);
}

ForwardResult Transformer::forward(SequenceState& st, const int32_t* ids, int n, int64_t p0,
                                   const ForwardOptions& opt, float* logits) const {
  ForwardResult res;
  if (n <= 0) return res;
  if (p0 != st.n_tokens)
    throw std::runtime_error("forward: first_pos " + std::to_string(p0) +
                             " does not follow the state's " + std::to_string(st.n_tokens) +
                             " tokens");
  check_ids(ids, n);
  const bool ced = opt.mode == PrefillMode::kCed && ced_layer_ >= 0;
  const bool completes = opt.completes_prompt || !ced;
  if (!ced && st.prompt_open())
    throw std::runtime_error("forward: exact mode on an open CED prompt (decoder at " +
                             std::to_string(st.dec_tokens) + " of " + std::to_string(st.n_tokens) +
                             " tokens): complete it in CED mode");
  if (!completes && opt.logits != LogitsWanted::kNone)
    throw std::runtime_error("forward: an open CED chunk (completes_prompt = false) has no logits");
  if (opt.logits != LogitsWanted::kNone && !logits)
    throw std::runtime_error("forward: logits asked for but no output buffer given");
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    const CompressedKv& c = st.compressed[size_t(l)];
    if (c.ratio > 0 && (c.n_rows != p0 / c.ratio || c.n_tail != int(p0 % c.ratio)))
      throw std::runtime_error("forward: layer " + std::to_string(l) + " holds " +
                               std::to_string(c.n_rows) + " compressed rows + " +
                               std::to_string(c.n_tail) + " parked tokens, which does not match " +
                               std::to_string(p0) +
                               " tokens (a truncated state: call replay first)");
  }
  const Ctx ctx{k_, pool_};
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size, W = cfg_.sliding_window;
  const int L = cfg_.num_hidden_layers;
  const size_t HD = size_t(hc) * D;
  const int64_t N = p0 + n;

  // decoder rows of this call: [s_rep, N); the encoder runs on [p0, N)
  const int c = ced ? ced_layer_ : L;
  int64_t s_rep = p0;
  bool truncated = false;
  if (ced && completes) {
    const int64_t P = st.dec_tokens;
    s_rep = std::max(P, N - W);
    truncated = s_rep > P;
    if (s_rep < p0) {
      const StreamRows& cs = st.ced_stream;
      if (cs.first > s_rep || cs.first + cs.rows != p0)
        throw std::runtime_error("forward: the open prompt's stream rows [" +
                                 std::to_string(cs.first) + ", " +
                                 std::to_string(cs.first + cs.rows) + ") do not cover [" +
                                 std::to_string(s_rep) + ", " + std::to_string(p0) + ")");
    }
    if (opt.logits == LogitsWanted::kAll && s_rep > p0)
      throw std::runtime_error("forward: kAll logits under CED exist only for decoder rows (" +
                               std::to_string(s_rep) + " .. " + std::to_string(N - 1) +
                               "); use kReplay/kLast or exact mode");
  }
  check_window(st, p0, 0);
  if (ced && completes) check_window(st, s_rep, truncated ? s_rep : 0);

  ForwardPass fp(cfg_, st, n, p0);
  fp.dump = &dump_;

  std::vector<std::vector<int64_t>> erows;
  const int hist = int(st.engram_history.size());
  engram_rows(ids, n, p0, st.engram_history.data(), hist, erows);

  Stream s(n, hc, D);
  embed(ids, n, s);
  for (int l = 0; l < c; ++l) {
    if (engrams_[size_t(l)])
      engrams_[size_t(l)]->forward(ctx, s.h.data(), n, erows[size_t(l)].data());
    blocks_[size_t(l)]->forward(ctx, s.h.data(), s.pre.data(), fp);
  }

  // Engram history after this call
  if (!layout_.layer_ids.empty()) {
    std::vector<int32_t> mapped = st.engram_history;
    for (int i = 0; i < n; ++i) mapped.push_back(token_map_[size_t(ids[i])]);
    const size_t keep = size_t(layout_.max_ngram_size - 1);
    const size_t from = mapped.size() > keep ? mapped.size() - keep : 0;
    st.engram_history.assign(mapped.begin() + long(from), mapped.end());
  }

  if (!ced) {
    st.n_tokens = st.dec_tokens = N;
    if (opt.logits == LogitsWanted::kNone) return res;
    int first = n - 1;
    if (opt.logits == LogitsWanted::kAll) first = 0;
    if (opt.logits == LogitsWanted::kReplay) first = std::max(0, n - W);
    head(ctx, s, first, n - first, p0, logits);
    res.logits_first_pos = p0 + first;
    res.logits_rows = n - first;
    res.replay_start = p0;
    res.decoder_rows = n;
    return res;
  }

  // CED encoder rows: the candidate source's global KV for every row of the call
  blocks_[size_t(c)]->project_global(ctx, s.h.data(), s.pre.data(), fp);
  st.n_tokens = N;

  if (!completes) {
    // keep the candidate-source input of the last W open positions for the completing chunk
    StreamRows& cs = st.ced_stream;
    if (cs.rows == 0) cs.first = p0;
    const int i0 = std::max(0, n - W);  // older rows of a long chunk would be dropped anyway
    if (i0 > 0) {
      cs.h.clear();
      cs.pre.clear();
      cs.rows = 0;
      cs.first = p0 + i0;
    }
    for (int i = i0; i < n; ++i) {
      for (size_t d = 0; d < HD; ++d) cs.h.push_back(f32_to_bf16_bits(s.h[size_t(i) * HD + d]));
      cs.pre.insert(cs.pre.end(), s.pre.begin() + long(i) * hc, s.pre.begin() + long(i + 1) * hc);
      ++cs.rows;
    }
    if (cs.rows > W) {
      const int drop = cs.rows - W;
      cs.h.erase(cs.h.begin(), cs.h.begin() + long(size_t(drop) * HD));
      cs.pre.erase(cs.pre.begin(), cs.pre.begin() + long(drop) * hc);
      cs.rows = W;
      cs.first += drop;
    }
    return res;
  }

  // CED decoder rows [s_rep, N): the stream entering the candidate source, from the open
  // prompt's kept rows (positions < p0) and this call's rows
  const int m = int(N - s_rep);
  Stream d(m, hc, D);
  for (int i = 0; i < m; ++i) {
    const int64_t pos = s_rep + i;
    float* hd = d.h.data() + size_t(i) * HD;
    float* pd = d.pre.data() + size_t(i) * hc;
    if (pos < p0) {
      const StreamRows& cs = st.ced_stream;
      const size_t r = size_t(pos - cs.first);
      for (size_t k = 0; k < HD; ++k) hd[k] = bf16_to_f32(cs.h[r * HD + k]);
      std::copy_n(cs.pre.data() + r * hc, hc, pd);
    } else {
      const size_t r = size_t(pos - p0);
      std::copy_n(s.h.data() + r * HD, HD, hd);
      std::copy_n(s.pre.data() + r * hc, hc, pd);
    }
  }
  ForwardPass fd(cfg_, st, m, s_rep);
  fd.dump = &dump_;
  fd.win_start = truncated ? s_rep : 0;
  fd.skip_compressor = true;  // the candidate source's rows were appended above
  for (int l = c; l < L; ++l) blocks_[size_t(l)]->forward(ctx, d.h.data(), d.pre.data(), fd);
  st.dec_tokens = N;
  st.ced_stream = StreamRows{};
  if (truncated) st.window_from = std::max(st.window_from, s_rep);

  res.replay_start = s_rep;
  res.decoder_rows = m;
  res.truncated = truncated;
  if (opt.logits == LogitsWanted::kNone) return res;
  int first = m - 1;
  if (opt.logits == LogitsWanted::kReplay) first = 0;
  if (opt.logits == LogitsWanted::kAll) first = int(p0 - s_rep);
  head(ctx, d, first, m - first, s_rep, logits);
  res.logits_first_pos = s_rep + first;
  res.logits_rows = m - first;
  return res;
}

int64_t Transformer::replay(SequenceState& st, std::span<const int32_t> ids,
                            int64_t ids_first) const {
  const int64_t h = st.n_tokens;
  const int W = cfg_.sliding_window, hc = cfg_.hc_mult, D = cfg_.hidden_size;
  if (st.prompt_open()) throw std::runtime_error("replay: the state has an open CED prompt");
  if (ids_first < 0 || ids_first + int64_t(ids.size()) != h)
    throw std::runtime_error("replay: ids cover positions [" + std::to_string(ids_first) + ", " +
                             std::to_string(ids_first + int64_t(ids.size())) + "), the state has " +
                             std::to_string(h) + " tokens");
  const int64_t s = std::max<int64_t>(0, h - W);
  const int S1 = layout_.layer_ids.empty() ? 0 : layout_.max_ngram_size - 1;
  const int64_t need = std::max<int64_t>(0, s - S1);
  if (ids_first > need)
    throw std::runtime_error("replay: ids start at position " + std::to_string(ids_first) +
                             ", the replay of [" + std::to_string(s) + ", " + std::to_string(h) +
                             ") needs them from " + std::to_string(need));
  check_ids(ids.data(), int(ids.size()));
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    const CompressedKv& c = st.compressed[size_t(l)];
    if (c.ratio <= 0) continue;
    if (c.n_rows != h / c.ratio)
      throw std::runtime_error("replay: layer " + std::to_string(l) + " holds " +
                               std::to_string(c.n_rows) + " compressed rows, " + std::to_string(h) +
                               " tokens need " + std::to_string(h / c.ratio));
    if (c.n_tail != int(h % c.ratio) && c.n_tail != 0)
      throw std::runtime_error("replay: layer " + std::to_string(l) + " has " +
                               std::to_string(c.n_tail) + " parked tokens, " + std::to_string(h) +
                               " tokens need " + std::to_string(h % c.ratio));
  }
  if (h == 0) {
    st.window_from = 0;
    return 0;
  }
  // Engram: mapped ids of the look-back before s, and the history the state must end with
  const int64_t hist_first = std::max<int64_t>(0, s - S1);
  std::vector<int32_t> hist_mapped;
  for (int64_t p = hist_first; p < s; ++p)
    hist_mapped.push_back(token_map_[size_t(ids[size_t(p - ids_first)])]);
  if (S1 > 0) {
    std::vector<int32_t> expect;
    for (int64_t p = std::max<int64_t>(0, h - S1); p < h; ++p)
      expect.push_back(token_map_[size_t(ids[size_t(p - ids_first)])]);
    if (st.engram_history.empty())
      st.engram_history = expect;
    else if (st.engram_history != expect)
      throw std::runtime_error(
          "replay: the ids do not match the state's Engram history (not this state's tokens)");
  }
  const int n = int(h - s);
  const int32_t* rid = ids.data() + (s - ids_first);
  std::vector<std::vector<int64_t>> erows;
  engram_rows(rid, n, s, hist_mapped.data(), int(hist_mapped.size()), erows);

  const Ctx ctx{k_, pool_};
  ForwardPass fp(cfg_, st, n, s);
  fp.dump = &dump_;
  fp.win_start = s;
  fp.skip_compressor = true;
  fp.rebuild_tails = true;
  Stream str(n, hc, D);
  embed(rid, n, str);
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    if (engrams_[size_t(l)])
      engrams_[size_t(l)]->forward(ctx, str.h.data(), n, erows[size_t(l)].data());
    blocks_[size_t(l)]->forward(ctx, str.h.data(), str.pre.data(), fp);
  }
  st.window_from = s;
  st.dec_tokens = h;
  return s;
}

}  // namespace cedar
