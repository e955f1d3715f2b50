#include "forward/transformer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "forward/engram_store.h"
#include "numerics/bf16.h"

namespace cedar {

Transformer::Transformer(const Checkpoint& ckpt, const KernelTable& kernels, ThreadPool& pool,
                         std::vector<int32_t> engram_token_map, HeadType head)
    : cfg_(ckpt.config()),
      k_(kernels),
      pool_(pool),
      w_(ModelWeights::bind(ckpt)),
      head_(w_.lm_head, head, &pool),
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
    // the DSpark taps of the decoder rows must come from the decoder pass
    for (int l : cfg_.dspark_target_layer_ids)
      if (cfg_.num_nextn_predict_layers > 0 && l < c) ok = false;
    if (ok) ced_layer_ = c;
  }
  is_tap_.assign(size_t(cfg_.num_hidden_layers), 0);
  if (!w_.dspark.stages.empty()) {
    dspark_ = std::make_unique<DSpark>(cfg_, w_, head_);
    for (int l : cfg_.dspark_target_layer_ids) is_tap_[size_t(l)] = 1;
  }
}

void Transformer::set_expert_source(ExpertSource* src, bool guess) {
  experts_ = src;
  for (int l = 0; l + 1 < cfg_.num_hidden_layers; ++l)
    blocks_[size_t(l)]->moe().set_next(src && guess ? &blocks_[size_t(l + 1)]->moe() : nullptr);
}

Draft Transformer::draft(const SequenceState& state, int32_t anchor, bool with_logits) const {
  if (!dspark_) throw std::runtime_error("draft: the model has no DSpark stages");
  if (split()) throw std::runtime_error("draft: not on a model split into pipeline stages");
  const Ctx ctx{k_, pool_, experts_, engram_};
  return dspark_->draft(ctx, state, anchor, with_logits);
}

namespace {

// The DSpark tap of layer slot t for rows [row0, row0 + m) of a stream h [*, hc, D]: the mean
// over the copies (exact sum, rounded to fp32, then to bf16: the reference's bf16 mean) into
// taps [m, n_taps * D] at column t * D. ref: model.py Transformer.forward (main_hiddens)
void record_tap(const float* h, int row0, int m, int hc, int D, int t, int n_taps, float* taps) {
  const size_t HD = size_t(hc) * D;
  for (int i = 0; i < m; ++i) {
    const float* hi = h + size_t(row0 + i) * HD;
    float* out = taps + size_t(i) * size_t(n_taps) * D + size_t(t) * D;
    for (int d = 0; d < D; ++d) {
      double sum = 0;
      for (int c = 0; c < hc; ++c) sum += double(hi[size_t(c) * D + d]);
      out[d] = round_bf16(float(sum / double(hc)));
    }
  }
}

// ForwardPass::image of rows p0 .. p0+n-1: empty unless one of them is in an image span.
std::vector<uint8_t> image_flags(const SequenceState& st, int64_t p0, int n) {
  std::vector<uint8_t> f;
  for (const ImageSpan& sp : st.images)
    if (sp.end() > p0 && sp.first_pos < p0 + n) {
      if (f.empty()) f.assign(size_t(n), 0);
      for (int64_t p = std::max(p0, sp.first_pos); p < std::min(p0 + n, sp.end()); ++p)
        f[size_t(p - p0)] = 1;
    }
  return f;
}

}  // namespace

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

void Transformer::embed(const int32_t* ids, int n, Stream& s, int row0) const {
  const int hc = cfg_.hc_mult;
  embed_rows(cfg_, w_.embed, ids, n, s.h.data() + size_t(row0) * hc * cfg_.hidden_size,
             s.pre.data() + size_t(row0) * hc);
}

// ref: model.py Transformer.forward (vision): START and END take image_start / image_end, each
// grid row's NEWLINE image_newline, the IMAGE positions the aligner rows in reading order; every
// hc copy of the row holds the vector (the stream is the embedding repeated).
void Transformer::embed_images(std::span<const ImageInput> images, int64_t p0, int n, Stream& s,
                               int row0) const {
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const VisionWeights& v = w_.vision;
  for (const ImageInput& im : images) {
    const ImageSpan& sp = im.span;
    const int64_t a = std::max(p0, sp.first_pos), b = std::min(p0 + n, sp.end());
    for (int64_t pos = a; pos < b; ++pos) {
      const int64_t o = pos - sp.first_pos;
      const uint16_t* delim = nullptr;
      const float* row = nullptr;
      if (o == 0) {
        delim = v.image_start;
      } else if (o == sp.length() - 1) {
        delim = v.image_end;
      } else {
        const int64_t r = (o - 1) / (sp.n_w + 1), c = (o - 1) % (sp.n_w + 1);
        if (c == sp.n_w)
          delim = v.image_newline;
        else
          row = im.rows + size_t(r * sp.n_w + c) * D;
      }
      float* h = s.h.data() + size_t(row0 + (pos - p0)) * hc * D;
      for (int d = 0; d < D; ++d) h[d] = delim ? bf16_to_f32(delim[d]) : row[d];
      for (int c = 1; c < hc; ++c) std::copy_n(h, D, h + size_t(c) * D);
    }
  }
}

// The checks of an item's images (before any state changes): the model has a tower; spans with
// positive grids, ascending and disjoint, each overlapping the call's rows; the call's ids at
// span positions are the placeholder; a span begun in an earlier call is the one the state
// recorded, and every recorded span that reaches into this call is given again (its rows).
void Transformer::check_images(const BatchItem& it) const {
  const SequenceState& st = *it.state;
  const int64_t p0 = it.first_pos, N = p0 + it.n;
  const auto& imgs = it.opt.images;
  for (const ImageSpan& r : st.images)
    if (r.end() > p0 &&
        std::none_of(imgs.begin(), imgs.end(), [&](const ImageInput& im) { return im.span == r; }))
      throw std::runtime_error("forward: the image span at position " +
                               std::to_string(r.first_pos) +
                               " continues into this call, which does not give its rows");
  if (imgs.empty()) return;
  if (!cfg_.has_vision || w_.vision.blocks.empty())
    throw std::runtime_error("forward: the model has no vision tower; a prompt cannot hold images");
  if (it.opt.keep_undo) throw std::runtime_error("forward: images in a speculative verify pass");
  int64_t prev_end = 0;
  for (const ImageInput& im : imgs) {
    const ImageSpan& sp = im.span;
    const std::string at = "forward: the image span at position " + std::to_string(sp.first_pos);
    if (sp.n_h <= 0 || sp.n_w <= 0 || !im.rows || sp.first_pos < prev_end)
      throw std::runtime_error(at + " is empty, has no rows or overlaps the one before it");
    if (sp.end() <= p0 || sp.first_pos >= N)
      throw std::runtime_error(at + " does not overlap the call's positions [" +
                               std::to_string(p0) + ", " + std::to_string(N) + ")");
    if (sp.first_pos < p0 && std::find(st.images.begin(), st.images.end(), sp) == st.images.end())
      throw std::runtime_error(at + " starts before this call but is not the state's");
    prev_end = sp.end();
    for (int64_t pos = std::max(p0, sp.first_pos); pos < std::min(N, sp.end()); ++pos)
      if (it.ids[pos - p0] != cfg_.image_token_id)
        throw std::runtime_error(at + ": position " + std::to_string(pos) + " holds id " +
                                 std::to_string(it.ids[pos - p0]) + ", not the image placeholder " +
                                 std::to_string(cfg_.image_token_id));
  }
}

std::vector<int32_t> Transformer::mapped_ids(const SequenceState& st, const int32_t* ids, int n,
                                             int64_t p0) const {
  std::vector<int32_t> m(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) m[size_t(i)] = st.in_image(p0 + i) ? -1 : token_map_[size_t(ids[i])];
  return m;
}

// Engram hash rows of every Engram layer this rank runs for rows at p0 .. p0+n-1 (they depend
// on ids only): mapped [n] their Engram ids, hist_mapped [hist] those of positions p0-hist ..
// p0-1.
void Transformer::engram_rows(const int32_t* mapped_rows, int n, int64_t p0,
                              const int32_t* hist_mapped, int hist,
                              std::vector<std::vector<int64_t>>& rows) const {
  rows.assign(engrams_.size(), {});
  if (layout_.layer_ids.empty()) return;
  std::vector<int32_t> mapped(hist_mapped, hist_mapped + hist);
  mapped.insert(mapped.end(), mapped_rows, mapped_rows + n);
  for (size_t l = 0; l < engrams_.size(); ++l)
    if (engrams_[l] && owns(int(l))) {
      rows[l].resize(size_t(n) * size_t(layout_.n_cols()));
      engrams_[l]->hash_rows(mapped.data(), hist, n, p0, engram_pad_, rows[l].data());
      // tables on storage: their reads start now, while the layers below compute
      if (engram_) engram_->prefetch(engrams_[l]->table(), rows[l].data(), int(rows[l].size()));
    }
}

// final collapse of m contiguous rows with the last FFN pre-mix, norm, fp32 head
void Transformer::head(const Ctx& ctx, const float* h, const float* pre, int m, float* logits,
                       std::vector<float>& xn) const {
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const size_t HD = size_t(hc) * D;
  std::vector<float> x(size_t(m) * D);
  xn.assign(size_t(m) * D, 0.0f);
  for (int i = 0; i < m; ++i) {
    ctx.k.hc_pre(h + size_t(i) * HD, pre + size_t(i) * hc, hc, D, x.data() + size_t(i) * D);
    ctx.k.rms_norm(x.data() + size_t(i) * D, D, w_.norm, float(cfg_.rms_norm_eps),
                   xn.data() + size_t(i) * D);
  }
  head_.forward(ctx, xn.data(), m, logits);
}

LayerIO Transformer::layer_input(const int32_t* ids, int n, int64_t p0,
                                 const SequenceState& st) const {
  check_ids(ids, n);
  LayerIO io;
  io.n = n;
  io.p0 = p0;
  Stream s(n, cfg_.hc_mult, cfg_.hidden_size);
  embed(ids, n, s);
  io.h = std::move(s.h);
  io.pre = std::move(s.pre);
  const std::vector<int32_t> mapped = mapped_ids(st, ids, n, p0);
  engram_rows(mapped.data(), n, p0, st.engram_history.data(), int(st.engram_history.size()),
              io.engram_rows);
  return io;
}

void Transformer::run_layer(int l, const KernelTable& k, LayerIO& io, ForwardPass& fp) const {
  if (l < 0 || l >= cfg_.num_hidden_layers || fp.n != io.n || fp.p0 != io.p0)
    throw std::runtime_error("run_layer: layer or rows do not match");
  const Ctx ctx{k, pool_, experts_, engram_};
  if (engrams_[size_t(l)])
    engrams_[size_t(l)]->forward(ctx, io.h.data(), io.n, io.engram_rows[size_t(l)].data());
  blocks_[size_t(l)]->forward(ctx, io.h.data(), io.pre.data(), fp);
}

void Transformer::final_logits(const KernelTable& k, const LayerIO& io, float* logits) const {
  const Ctx ctx{k, pool_, experts_, engram_};
  std::vector<float> xn;
  head(ctx, io.h.data(), io.pre.data(), io.n, logits, xn);
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
  BatchItem it;
  it.state = &st;
  it.ids = ids;
  it.n = n;
  it.first_pos = p0;
  it.opt = opt;
  it.logits = logits;
  forward_batch(std::span<BatchItem>(&it, 1));
  if (it.error) std::rethrow_exception(it.error);
  return it.result;
}

void Transformer::plan(BatchItem& it, Member& mb) const {
  SequenceState& st = *it.state;
  const int n = it.n;
  const int64_t p0 = it.first_pos;
  const ForwardOptions& opt = it.opt;
  if (p0 != st.n_tokens)
    throw std::runtime_error("forward: first_pos " + std::to_string(p0) +
                             " does not follow the state's " + std::to_string(st.n_tokens) +
                             " tokens");
  check_ids(it.ids, n);
  check_images(it);
  const bool ced = opt.mode == PrefillMode::kCed && ced_layer_ >= 0;
  const bool completes = opt.completes_prompt || !ced;
  if (!ced && st.prompt_open())
    throw std::runtime_error("forward: exact mode on an open CED prompt (decoder at " +
                             std::to_string(st.dec_tokens) + " of " + std::to_string(st.n_tokens) +
                             " tokens): complete it in CED mode");
  if (!completes && opt.logits != LogitsWanted::kNone)
    throw std::runtime_error("forward: an open CED chunk (completes_prompt = false) has no logits");
  if (opt.logits != LogitsWanted::kNone && !it.logits && rank_ == 0)
    throw std::runtime_error("forward: logits asked for but no output buffer given");
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    const CompressedKv& c = st.compressed[size_t(l)];
    if (c.ratio > 0 && holds(l) && (c.n_rows != p0 / c.ratio || c.n_tail != int(p0 % c.ratio)))
      throw std::runtime_error("forward: layer " + std::to_string(l) + " holds " +
                               std::to_string(c.n_rows) + " compressed rows + " +
                               std::to_string(c.n_tail) + " parked tokens, which does not match " +
                               std::to_string(p0) +
                               " tokens (a truncated state: call replay first)");
  }
  const int W = cfg_.sliding_window;
  const int64_t N = p0 + n;
  // decoder rows of this call: [s_rep, N); the encoder runs on [p0, N)
  int64_t s_rep = p0;
  bool truncated = false;
  if (ced && completes) {
    const int64_t P = st.dec_tokens;
    s_rep = std::max(P, N - W);
    truncated = s_rep > P;
    if (s_rep < p0 && (!split() || rank_ == split_.owner(ced_layer_))) {
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
  if (split()) check_stage_item(it);
  if (opt.keep_undo && (st.prompt_open() || !completes || n > W))
    throw std::runtime_error("forward: an undo log covers a call of at most " + std::to_string(W) +
                             " rows on a closed prompt (" + std::to_string(n) + " rows given)");
  mb.it = &it;
  mb.ced = ced;
  mb.completes = completes;
  mb.s_rep = s_rep;
  mb.truncated = truncated;
  mb.fp = std::make_unique<ForwardPass>(cfg_, st, n, p0);
  mb.fp->dump = &dump_;
}

void Transformer::forward_batch(std::span<BatchItem> items) const {
  // validate every item before touching any state; refused items are left out
  std::vector<Member> mem;
  mem.reserve(items.size());
  for (BatchItem& it : items) {
    it.result = ForwardResult{};
    it.error = nullptr;
    if (it.n <= 0) continue;
    try {
      for (const Member& o : mem)
        if (o.it->state == it.state)
          throw std::runtime_error("forward_batch: two items of one batch name the same state");
      Member m;
      plan(it, m);
      mem.push_back(std::move(m));
    } catch (...) {
      it.error = std::current_exception();
    }
  }
  if (split()) {
    run_split(items, mem);
    return;
  }
  int step = 0;
  if (!mem.empty()) run_members(mem, step, nullptr);
}

void Transformer::run_members(std::span<Member> mem, int& stage_step, Tail* defer) const {
  const Ctx ctx{k_, pool_, experts_, engram_};
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size, W = cfg_.sliding_window;
  const int L = cfg_.num_hidden_layers;
  const size_t HD = size_t(hc) * D;
  const int c = ced_layer_ >= 0 ? ced_layer_ : L;  // stage 1: layers [0, c), stage 2: [c, L)
  // pipeline stages: the rank that runs the CED transition (the candidate source's projection
  // and the decoder stream's assembly), and this rank's part of each stage
  const int owner_c = split() ? split_.owner(c) : 0;
  const bool at_c = !split() || rank_ == owner_c;
  const int lo = split() ? lo_ : 0, hi = split() ? hi_ : L;

  // stage 1: every item's rows [p0, N) through the encoder layers
  int n1 = 0;
  for (Member& m : mem) {
    m.row1 = n1;
    n1 += m.it->n;
  }
  std::vector<Segment> segs1;
  for (Member& m : mem) segs1.push_back({m.fp.get(), m.row1});
  std::vector<std::vector<int64_t>> erows(engrams_.size());
  const size_t ncols = layout_.layer_ids.empty() ? 0 : size_t(layout_.n_cols());
  for (size_t l = 0; l < engrams_.size(); ++l)
    if (engrams_[l]) erows[l].resize(size_t(n1) * ncols);
  Stream s(n1, hc, D);
  std::vector<std::vector<int32_t>> mapped(mem.size());
  for (size_t k = 0; k < mem.size(); ++k) {
    Member& m = mem[k];
    BatchItem& it = *m.it;
    SequenceState& st = *it.state;
    for (const ImageInput& im : it.opt.images)  // the spans this call begins
      if (im.span.first_pos >= it.first_pos) st.images.push_back(im.span);
    m.fp->image = image_flags(st, it.first_pos, it.n);
    if (!layout_.layer_ids.empty()) mapped[k] = mapped_ids(st, it.ids, it.n, it.first_pos);
    if (it.opt.keep_undo)
      st.begin_undo(it.n, mapped[k].empty() ? nullptr : mapped[k].data(),
                    layout_.layer_ids.empty() ? 0 : layout_.max_ngram_size - 1,
                    dspark_ && it.opt.dspark_seed);
    std::vector<std::vector<int64_t>> er;
    engram_rows(mapped[k].data(), it.n, it.first_pos, st.engram_history.data(),
                int(st.engram_history.size()), er);
    for (size_t l = 0; l < engrams_.size(); ++l)
      if (engrams_[l])
        std::copy(er[l].begin(), er[l].end(), erows[l].begin() + long(m.row1 * ncols));
    if (owns(0)) {
      embed(it.ids, it.n, s, m.row1);
      embed_images(it.opt.images, it.first_pos, it.n, s, m.row1);
    }
    if (split()) {
      m.rows_before.resize(size_t(L));
      for (int l = 0; l < L; ++l) m.rows_before[size_t(l)] = st.compressed[size_t(l)].n_rows;
    }
  }
  const std::vector<uint8_t> image1 = image_rows(segs1);
  if (split() && rank_ > 0 && rank_ <= owner_c) {
    stage_step = 1;
    recv_hop(lo, s, mem, false);
  }
  // DSpark taps: the decoder rows of the items that seed (exact items' rows are all decoder
  // rows, and their taps below the CED layer are taken in this first pass)
  const int n_taps = int(cfg_.dspark_target_layer_ids.size());
  auto tap_slot = [&](int l) {
    const auto& t = cfg_.dspark_target_layer_ids;
    return int(std::find(t.begin(), t.end(), l) - t.begin());
  };
  auto seeds = [&](const Member& m) { return dspark_ && m.it->opt.dspark_seed; };
  for (int l = std::max(0, lo); l < std::min(c, hi); ++l) {
    if (engrams_[size_t(l)])
      engrams_[size_t(l)]->forward(ctx, s.h.data(), n1, erows[size_t(l)].data(),
                                   image1.empty() ? nullptr : image1.data());
    if (is_tap_[size_t(l)])
      for (Member& m : mem) {
        if (!seeds(m) || m.ced) continue;
        m.taps.resize(size_t(m.it->n) * size_t(n_taps) * D);
        record_tap(s.h.data(), m.row1, m.it->n, hc, D, tap_slot(l), n_taps, m.taps.data());
      }
    blocks_[size_t(l)]->forward(ctx, s.h.data(), s.pre.data(), segs1);
  }
  if (split() && rank_ < owner_c) {
    send_hop(hi, s, mem, false);
    stage_step = 2;
  }

  // Engram history after this call
  if (!layout_.layer_ids.empty())
    for (size_t k = 0; k < mem.size(); ++k) {
      SequenceState& st = *mem[k].it->state;
      std::vector<int32_t> all = st.engram_history;
      all.insert(all.end(), mapped[k].begin(), mapped[k].end());
      const size_t keep = size_t(layout_.max_ngram_size - 1);
      const size_t from = all.size() > keep ? all.size() - keep : 0;
      st.engram_history.assign(all.begin() + long(from), all.end());
    }

  // CED encoder rows: the candidate source's global KV for every row of the call
  std::vector<Segment> segs_ced;
  for (Member& m : mem)
    if (m.ced) segs_ced.push_back({m.fp.get(), m.row1});
  if (!segs_ced.empty() && at_c)
    blocks_[size_t(c)]->project_global(ctx, s.h.data(), s.pre.data(), segs_ced);
  for (Member& m : mem) {
    if (!m.ced) continue;
    SequenceState& st = *m.it->state;
    const int n = m.it->n;
    const int64_t p0 = m.it->first_pos;
    st.n_tokens = p0 + n;
    if (m.completes || !at_c) continue;
    // an open chunk keeps the candidate-source input of the last W open positions for the
    // completing chunk
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
      const size_t r = size_t(m.row1 + i);
      for (size_t d = 0; d < HD; ++d) cs.h.push_back(f32_to_bf16_bits(s.h[r * HD + d]));
      cs.pre.insert(cs.pre.end(), s.pre.begin() + long(r) * hc, s.pre.begin() + long(r + 1) * hc);
      ++cs.rows;
    }
    if (cs.rows > W) {
      const int drop = cs.rows - W;
      cs.h.erase(cs.h.begin(), cs.h.begin() + long(size_t(drop) * HD));
      cs.pre.erase(cs.pre.begin(), cs.pre.begin() + long(drop) * hc);
      cs.rows = W;
      cs.first += drop;
    }
  }

  // stage 2: the decoder rows. Exact calls continue with all their rows (and their stage-1
  // pass); a completing CED call runs [s_rep, N), the stream entering the candidate source taken
  // from the open prompt's kept rows (positions < p0) and this call's rows.
  int n2 = 0;
  for (Member& m : mem) {
    if (m.ced && !m.completes) continue;
    m.row2 = n2;
    m.m2 = int(m.it->first_pos + m.it->n - m.s_rep);
    n2 += m.m2;
  }
  Stream d(n2, hc, D);
  std::vector<Segment> segs2;
  for (Member& m : mem) {
    if (m.row2 < 0) continue;
    SequenceState& st = *m.it->state;
    const int64_t p0 = m.it->first_pos;
    for (int i = 0; i < m.m2 && at_c; ++i) {
      const int64_t pos = m.s_rep + i;
      float* hd = d.h.data() + size_t(m.row2 + i) * HD;
      float* pd = d.pre.data() + size_t(m.row2 + i) * hc;
      if (pos < p0) {
        const StreamRows& cs = st.ced_stream;
        const size_t r = size_t(pos - cs.first);
        for (size_t k = 0; k < HD; ++k) hd[k] = bf16_to_f32(cs.h[r * HD + k]);
        std::copy_n(cs.pre.data() + r * hc, hc, pd);
      } else {
        const size_t r = size_t(m.row1) + size_t(pos - p0);
        std::copy_n(s.h.data() + r * HD, HD, hd);
        std::copy_n(s.pre.data() + r * hc, hc, pd);
      }
    }
    if (m.ced) {
      m.fd = std::make_unique<ForwardPass>(cfg_, st, m.m2, m.s_rep);
      m.fd->dump = &dump_;
      m.fd->win_start = m.truncated ? m.s_rep : 0;
      m.fd->skip_compressor = true;  // the candidate source's rows were appended above
      m.fd->image = image_flags(st, m.s_rep, m.m2);
      segs2.push_back({m.fd.get(), m.row2});
    } else {
      segs2.push_back({m.fp.get(), m.row2});
    }
  }
  if (split() && rank_ > owner_c) {
    stage_step = 1;
    recv_hop(lo, d, mem, true);
  }
  for (int l = std::max(c, lo); l < std::min(L, hi) && n2 > 0; ++l) {
    if (is_tap_[size_t(l)])
      for (Member& m : mem) {
        if (!seeds(m) || m.row2 < 0) continue;
        m.taps.resize(size_t(m.m2) * size_t(n_taps) * D);
        record_tap(d.h.data(), m.row2, m.m2, hc, D, tap_slot(l), n_taps, m.taps.data());
      }
    blocks_[size_t(l)]->forward(ctx, d.h.data(), d.pre.data(), segs2);
  }
  if (split() && rank_ >= owner_c && rank_ + 1 < split_.ranks()) {
    send_hop(hi, d, mem, true);
    stage_step = 2;
  }
  for (Member& m : mem) {
    if (seeds(m) && m.row2 >= 0) dspark_->seed(ctx, m.taps.data(), m.m2, m.s_rep, *m.it->state);
    m.it->state->end_undo();
  }

  // states and results; the logits rows each item wants (rows of the stage-2 stream)
  std::vector<Want> wants;
  for (Member& m : mem) {
    if (m.row2 < 0) continue;
    BatchItem& it = *m.it;
    SequenceState& st = *it.state;
    const int64_t N = it.first_pos + it.n;
    ForwardResult& res = it.result;
    if (m.ced) {
      st.dec_tokens = N;
      st.ced_stream = StreamRows{};
      if (m.truncated) st.window_from = std::max(st.window_from, m.s_rep);
      res.truncated = m.truncated;
    } else {
      st.n_tokens = st.dec_tokens = N;
    }
    res.replay_start = m.s_rep;
    res.decoder_rows = m.m2;
    if (it.opt.logits == LogitsWanted::kNone) continue;
    int first = m.m2 - 1;
    if (it.opt.logits == LogitsWanted::kReplay) first = std::max(0, m.m2 - (m.ced ? m.m2 : W));
    if (it.opt.logits == LogitsWanted::kAll) first = int(it.first_pos - m.s_rep);
    res.logits_first_pos = m.s_rep + first;
    res.logits_rows = m.m2 - first;
    wants.push_back({&m, first, m.m2 - first});
  }
  if (!split()) {
    heads(ctx, d, wants);
    return;
  }
  // pipeline stages: the last rank hands the wanted rows round to rank 0, which has the head
  // (at once, or after launching the batch's other micro-batches: `defer`)
  if (rank_ == split_.ranks() - 1) {
    send_final(d, wants);
    stage_step = 2;
    return;
  }
  if (rank_ != 0) return;
  Tail tail{std::move(wants), std::move(d)};
  if (defer) {
    *defer = std::move(tail);
    return;
  }
  finish(tail);
}

// The head: single-row wants (decode steps, prompt ends) share one GEMM over the batch; a
// many-row want writes its own buffer directly.
void Transformer::heads(const Ctx& ctx, Stream& d, std::span<const Want> wants) const {
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const size_t HD = size_t(hc) * D;
  const int64_t V = cfg_.vocab_size;
  std::vector<float> xn;
  auto dump_rows = [&](const Want& w, const float* rows) {
    if (dump_.active()) dump_.f32("final_norm", w.m->s_rep + w.first, rows, {w.rows, D});
  };
  std::vector<const Want*> singles;
  for (const Want& w : wants) {
    if (w.rows == 1 && wants.size() > 1) {
      singles.push_back(&w);
      continue;
    }
    const size_t r = size_t(w.m->row2 + w.first);
    head(ctx, d.h.data() + r * HD, d.pre.data() + r * hc, w.rows, w.m->it->logits, xn);
    dump_rows(w, xn.data());
  }
  if (!singles.empty()) {
    const int m = int(singles.size());
    std::vector<float> hh(size_t(m) * HD), pp(size_t(m) * hc), lg(size_t(m) * size_t(V));
    for (int i = 0; i < m; ++i) {
      const size_t r = size_t(singles[size_t(i)]->m->row2 + singles[size_t(i)]->first);
      std::copy_n(d.h.data() + r * HD, HD, hh.data() + size_t(i) * HD);
      std::copy_n(d.pre.data() + r * hc, hc, pp.data() + size_t(i) * hc);
    }
    head(ctx, hh.data(), pp.data(), m, lg.data(), xn);
    for (int i = 0; i < m; ++i) {
      std::copy_n(lg.data() + size_t(i) * size_t(V), size_t(V), singles[size_t(i)]->m->it->logits);
      dump_rows(*singles[size_t(i)], xn.data() + size_t(i) * D);
    }
  }
}

int64_t Transformer::replay(SequenceState& st, std::span<const int32_t> ids,
                            int64_t ids_first) const {
  const int64_t h = st.n_tokens;
  const int W = cfg_.sliding_window, hc = cfg_.hc_mult, D = cfg_.hidden_size;
  if (st.prompt_open()) throw std::runtime_error("replay: the state has an open CED prompt");
  if (split()) throw std::runtime_error("replay: not on a model split into pipeline stages");
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
  {
    // image positions may carry identity ids (runtime/prompt_images.h): only text ids are read
    std::vector<int32_t> text(ids.begin(), ids.end());
    for (size_t i = 0; i < text.size(); ++i)
      if (st.in_image(ids_first + int64_t(i))) text[i] = int32_t(cfg_.image_token_id);
    check_ids(text.data(), int(text.size()));
  }
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
  for (const ImageSpan& sp : st.images)
    if (sp.end() > s)
      throw std::runtime_error("replay: the image span at position " +
                               std::to_string(sp.first_pos) +
                               " lies in the replayed rows, whose image rows a replay from ids "
                               "cannot rebuild");
  // Engram: mapped ids of the look-back before s, and the history the state must end with
  const int64_t hist_first = std::max<int64_t>(0, s - S1);
  const std::vector<int32_t> hist_mapped =
      mapped_ids(st, ids.data() + (hist_first - ids_first), int(s - hist_first), hist_first);
  if (S1 > 0) {
    const int64_t e0 = std::max<int64_t>(0, h - S1);
    const std::vector<int32_t> expect =
        mapped_ids(st, ids.data() + (e0 - ids_first), int(h - e0), e0);
    if (st.engram_history.empty())
      st.engram_history = expect;
    else if (st.engram_history != expect)
      throw std::runtime_error(
          "replay: the ids do not match the state's Engram history (not this state's tokens)");
  }
  const int n = int(h - s);
  const int32_t* rid = ids.data() + (s - ids_first);
  std::vector<std::vector<int64_t>> erows;
  const std::vector<int32_t> mapped = mapped_ids(st, rid, n, s);
  engram_rows(mapped.data(), n, s, hist_mapped.data(), int(hist_mapped.size()), erows);

  const Ctx ctx{k_, pool_, experts_, engram_};
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
