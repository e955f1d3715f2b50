// DSpark: V4.1's parallel drafter (spec v41-extras §2, docs/NUMERICS.md §D). Three window-only
// stages under mtp.* read the target's taps -- the mean over the hc copies of the input of each
// target layer -- through stage 0's context projection main_x = main_norm(main_proj(taps)).
// Each stage keeps a ring of main_kv rows (its own kv projection of main_x, RoPE'd and FP8) for
// the target's last `window` processed positions; a draft cycle after position p runs the block
// [anchor, noise x (block - 1)] at positions p+1 .. p+block through the stages, every block row
// attending to all ring rows and all block rows (no causal mask among them), then the target's
// LM head on the last stage's norm, the sequential Markov bias and the confidence head.
// Immutable after construction; the rings live in SequenceState.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "forward/attention.h"
#include "forward/block.h"
#include "forward/moe.h"
#include "forward/vocab_product.h"
#include "forward/weights.h"
#include "state/sequence_state.h"

namespace cedar {

struct Draft {
  std::vector<int32_t> tokens;    // [block + 1]: the anchor, then the drafted tokens
  std::vector<float> logits;      // [block, vocab] fp32: draft logits, Markov bias included
                                  // (empty unless asked for)
  std::vector<float> confidence;  // [block] fp32 confidence logits (sigmoid: P(accept k | < k))
};

class DSpark {
 public:
  // head: the target's LM head (w.lm_head), which the draft shares
  DSpark(const ModelConfig& cfg, const ModelWeights& w, const VocabProduct& head);
  ~DSpark();

  int block_size() const { return cfg_.dspark_block_size; }
  // whether a draft without logits picks its tokens among classes of ids that share both their
  // head row and their Markov row (both heads repeat rows: forward/vocab_product.h)
  bool drafts_in_classes() const { return !joint_first_.empty(); }

  // The taps of n target rows at positions p0 .. p0+n-1 ([n, n_taps * D] bf16 values) into
  // every stage's ring of st (only the last min(window, n) rows matter). Rows continuing the
  // ring (p0 == st.dspark_to) extend it; any other p0 restarts it at p0.
  // ref: model.py DSparkAttention.forward (the main_kv half), DSparkBlock.forward_embed
  void seed(const Ctx& ctx, const float* taps, int n, int64_t p0, SequenceState& st) const;

  // One draft cycle after the state's last position p = st.n_tokens - 1 with `anchor` (the
  // target's token for p + 1), temperature 0: each drafted token is the first maximum of its
  // draft logits. The block attends to the ring rows of positions [max(from, p - window + 1),
  // p] (from = st.dspark_from: the whole window once the rings are full, as the reference; fewer
  // rows after a restart, e.g. right after a prefix-cache restore). Throws std::runtime_error
  // when the rings do not reach position p (a forward that did not seed them ran since).
  // with_logits false: the tokens and confidences alone, which spares writing the vocabulary-wide
  // logits (the same tokens: a model whose head and Markov head share their repeated rows picks
  // them among the distinct rows, forward/vocab_product.h).
  // ref: model.py Transformer.forward_spec, DSparkBlock.forward_head
  Draft draft(const Ctx& ctx, const SequenceState& st, int32_t anchor,
              bool with_logits = true) const;

 private:
  struct Stage;
  // joint_head_ / joint_markov_ / joint_first_ from the two products' classes
  void join_classes();
  // the attention of stage s for the block's normalised rows xn [B, D] after position p, over
  // the ring rows of positions from .. p (at most a window)
  void attention(const Ctx& ctx, const Stage& sg, const WindowRing& ring, int64_t from, int64_t p,
                 const float* xn, int B, float* out) const;

  const ModelConfig& cfg_;
  const ModelWeights& w_;
  // M_head as the Markov loop multiplies it: the checkpoint's, or, for a rank that is not a
  // multiple of 32 (the tiny preset's 16), a copy zero-padded to one so the fast GEMM families
  // run it (zero terms leave the exact sum unchanged: reference mode is unaffected)
  Linear markov_head_;
  std::vector<uint16_t> markov_padded_;
  std::optional<VocabProduct> markov_;  // markov_head_'s product
  const VocabProduct& head_;
  // the joint classes (ids with the same head class and the same Markov class), numbered in
  // order of their lowest ids: each one's head class, Markov class and lowest id. Empty when
  // either product runs whole.
  std::vector<int32_t> joint_head_, joint_markov_, joint_first_;
  std::vector<std::unique_ptr<Stage>> stages_;
  RopeTable rope_;  // window-only layers: rope_theta, no YaRN
  float softmax_scale_;
};

}  // namespace cedar
