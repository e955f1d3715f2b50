// Transformer: the V4.1 text model over one sequence's state (NUMERICS §F): embedding, the mHC
// stream of hc copies, Engram before its blocks, the blocks, the final collapse with the last FFN
// pre-mix, the norm and the fp32 head. One forward takes a run of rows at consecutive positions
// (a whole prompt, a prefill chunk or a decode step) against the per-sequence state; every row's
// result is independent of how the sequence was split into calls.
// Immutable after construction; forward() may be called for different states concurrently only
// with distinct thread pools (the kernels themselves are reentrant).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "forward/block.h"
#include "forward/engram.h"
#include "forward/linear.h"
#include "forward/weights.h"
#include "model/checkpoint.h"
#include "model/engram_layout.h"
#include "state/sequence_state.h"

namespace cedar {

enum class LogitsWanted { kNone, kLast, kAll };

class Transformer {
 public:
  // engram_token_map: token id -> compressed id (text::build_engram_token_map); required when the
  // config has Engram layers. Throws std::runtime_error naming the tensor/key on a mismatch.
  Transformer(const Checkpoint& ckpt, const KernelTable& kernels, ThreadPool& pool,
              std::vector<int32_t> engram_token_map);
  ~Transformer();

  const ModelConfig& config() const { return cfg_; }
  SequenceState new_state() const { return SequenceState(cfg_); }

  // Runs ids[0..n) at positions first_pos .. first_pos+n-1 (first_pos must equal
  // state.n_tokens) and appends them to `state`. logits: kAll -> [n, vocab], kLast -> [1, vocab]
  // (fp32), kNone -> untouched. Throws std::runtime_error on an id outside the vocabulary or a
  // position mismatch (state unchanged in both cases).
  void forward(SequenceState& state, const int32_t* ids, int n, int64_t first_pos,
               LogitsWanted want, float* logits) const;

 private:
  const ModelConfig& cfg_;
  const KernelTable& k_;
  ThreadPool& pool_;
  ModelWeights w_;
  EngramLayout layout_;
  std::vector<int32_t> token_map_;
  int32_t engram_pad_ = 0;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<std::unique_ptr<Engram>> engrams_;  // per layer, null where none
  Dumper dump_;
};

}  // namespace cedar
