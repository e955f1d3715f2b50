#include "forward/transformer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "numerics/bf16.h"

namespace cedar {

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
}

Transformer::~Transformer() = default;

void Transformer::forward(SequenceState& st, const int32_t* ids, int n, int64_t p0,
                          LogitsWanted want, float* logits) const {
  if (n <= 0) return;
  if (p0 != st.n_tokens)
    throw std::runtime_error("forward: first_pos " + std::to_string(p0) +
                             " does not follow the state's " + std::to_string(st.n_tokens) +
                             " tokens");
  for (int i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= cfg_.vocab_size)
      throw std::runtime_error("token id " + std::to_string(ids[i]) +
                               " is outside the vocabulary (vocab_size " +
                               std::to_string(cfg_.vocab_size) + ")");
  const Ctx ctx{k_, pool_};
  const int hc = cfg_.hc_mult, D = cfg_.hidden_size;
  const size_t HD = size_t(hc) * D;
  ForwardPass fp(cfg_, st, n, p0);
  fp.dump = &dump_;

  // Engram hash rows of every Engram layer (they depend on token ids only)
  std::vector<std::vector<int64_t>> erows(engrams_.size());
  std::vector<int32_t> mapped;
  int hist = 0;
  if (!layout_.layer_ids.empty()) {
    hist = int(st.engram_history.size());
    mapped = st.engram_history;
    for (int i = 0; i < n; ++i) mapped.push_back(token_map_[size_t(ids[i])]);
    for (size_t l = 0; l < engrams_.size(); ++l)
      if (engrams_[l]) {
        erows[l].resize(size_t(n) * size_t(layout_.n_cols()));
        engrams_[l]->hash_rows(mapped.data(), hist, n, p0, engram_pad_, erows[l].data());
      }
  }

  // embedding, copied to every stream copy; identity pre-mix
  std::vector<float> h(size_t(n) * HD), pre(size_t(n) * hc, 0.0f);
  for (int i = 0; i < n; ++i) {
    const uint16_t* e = w_.embed + size_t(ids[i]) * D;
    for (int c = 0; c < hc; ++c)
      for (int d = 0; d < D; ++d) h[size_t(i) * HD + size_t(c) * D + d] = bf16_to_f32(e[d]);
    pre[size_t(i) * hc] = 1.0f;
  }
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    if (engrams_[size_t(l)])
      engrams_[size_t(l)]->forward(ctx, h.data(), n, erows[size_t(l)].data());
    blocks_[size_t(l)]->forward(ctx, h.data(), pre.data(), fp);
  }

  // state bookkeeping after every layer ran
  st.n_tokens = p0 + n;
  if (!layout_.layer_ids.empty()) {
    const size_t keep = size_t(layout_.max_ngram_size - 1);
    const size_t from = mapped.size() > keep ? mapped.size() - keep : 0;
    st.engram_history.assign(mapped.begin() + long(from), mapped.end());
  }

  if (want == LogitsWanted::kNone) return;
  // final collapse with the last FFN pre-mix, norm, fp32 head
  const int first = want == LogitsWanted::kAll ? 0 : n - 1;
  const int m = n - first;
  std::vector<float> x(size_t(m) * D), xn(size_t(m) * D);
  for (int i = 0; i < m; ++i) {
    hc_pre(h.data() + size_t(first + i) * HD, pre.data() + size_t(first + i) * hc, hc, D,
           x.data() + size_t(i) * D);
    k_.rms_norm(x.data() + size_t(i) * D, D, w_.norm, float(cfg_.rms_norm_eps),
                xn.data() + size_t(i) * D);
  }
  Linear head;
  head.kind = Linear::Kind::BF16;
  head.out = int(cfg_.vocab_size);
  head.in = D;
  head.w = reinterpret_cast<const uint8_t*>(w_.head);
  head.name = "head";
  linear(ctx, head, xn.data(), m, logits, LinearOut::kF32);
  if (dump_.active()) dump_.f32("final_norm", p0, xn.data(), {m, D});
}

}  // namespace cedar
