// Engine: one loaded model directory -- the memory-mapped Checkpoint, the tokenizer, the Engram
// token map, the thread pool and the Transformer over them -- plus prompt helpers (render a chat
// request with the V4.1 template and tokenize it by the segment contract). The facade that
// `cedar run`, `cedar bench` and the server share (docs/RUNNING.md).
//
// The Transformer is immutable, but its ThreadPool is not reentrant: forward calls on one Engine
// must not overlap. Engine::forward() is safe from any thread: it runs the call under
// forward_mutex(), or, once enable_batching() was called (the server), hands it to a
// ForwardBatcher that runs the calls of all threads waiting at that moment as one batched pass
// (continuous batching). Generator goes through Engine::forward for every prefill chunk and
// decode step.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_pool.h"
#include "forward/engram_store.h"
#include "forward/expert_cache.h"
#include "forward/transformer.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "runtime/batcher.h"
#include "runtime/memory_plan.h"
#include "runtime/spec_payoff.h"
#include "runtime/token_constraint.h"
#include "text/chat_encoder.h"
#include "text/chat_request.h"
#include "text/tokenizer.h"
#include "vision/image_processor.h"

namespace cedar::runtime {

struct EngineOptions {
  std::string model_dir;       // required
  int threads = 0;             // <= 0: all cores
  std::string kernels;         // kernel table name (choose_kernels; "": auto)
  std::string tokenizer_path;  // "": <model_dir>/tokenizer.json
  // The serving shape and --mem-budget (runtime/memory_plan.h): load() refuses a plan that
  // does not fit, and streams the routed experts when only a part of them does.
  MemoryRequest memory;
  EvictionPolicy expert_policy = EvictionPolicy::kLfu;  // of the expert cache
  bool expert_guess = true;  // prefetch each next layer's guessed experts (MoE::set_next)
  // GGUF block weights re-encoded into the release formats rather than computed in place
  // (Checkpoint::OpenOptions::blocks_in_place)
  bool gguf_requant = false;
  // the vocabulary head as stored, or requantized to Q8B at load (--head-type)
  HeadType head_type = HeadType::kStored;
};

// A tokenized prompt and how generation starts after it (for the output parser).
struct Prompt {
  std::vector<int32_t> ids;
  std::string text;  // the rendered prompt (raw prompts: the text itself)
  text::GenerationStart start = text::GenerationStart::kContent;
  bool thinking = false;
  // the image parts' URLs (or, from the CLI, file names), one per image placeholder of ids
  std::vector<std::string> images;
};

class Engine {
 public:
  // Throws std::runtime_error naming the directory / file / tensor on any problem.
  static std::unique_ptr<Engine> load(const EngineOptions& opt);
  ~Engine();

  const EngineOptions& options() const { return opt_; }
  const ModelConfig& config() const { return ckpt_->config(); }
  const Checkpoint& checkpoint() const { return *ckpt_; }
  const text::Tokenizer& tokenizer() const { return *tok_; }
  const Transformer& model() const { return *model_; }
  const KernelTable& kernels() const { return *kernels_; }
  const MemoryPlan& memory_plan() const { return plan_; }
  // The expert cache when the plan streams the routed experts (nullptr: all mapped).
  const ExpertCache* expert_cache() const { return experts_.get(); }
  // The Engram row store when the plan reads the Engram tables from storage (nullptr: mapped).
  const EngramStore* engram_store() const { return engram_.get(); }
  ThreadPool& pool() { return *pool_; }
  // Splits the model into pipeline stages (Transformer::set_stage): before any forward.
  void set_stage(const StageSplit& split, StageLink* link) { model_->set_stage(split, link); }
  std::mutex& forward_mutex() { return forward_mu_; }

  // Transformer::forward, safe to call from any thread (see above).
  ForwardResult forward(SequenceState& state, const int32_t* ids, int n, int64_t first_pos,
                        const ForwardOptions& opt, float* logits);
  // Transformer::draft (one DSpark draft cycle) under the same lock as the unbatched forward.
  Draft draft(const SequenceState& state, int32_t anchor, bool with_logits = true);
  // The aligner rows of a preprocessed image (forward/vision_tower.h encode_image), under the
  // same lock. Throws std::invalid_argument on a model without a vision tower.
  std::vector<float> encode_image(const vision::ImagePatches& patches);
  // From now on forward() calls of concurrent threads share batched passes. Call before the
  // threads start; a second call changes nothing.
  void enable_batching(BatcherOptions opt = {});
  // The batcher's counters (all zero without batching).
  BatcherStats batcher_stats() const;
  int threads() const { return pool_->size(); }

  // Ids that end an assistant turn: eos_token_id (1) and, as optional safety (v41-interface
  // §2.5, `dsv4_multi_eos`), <｜User｜> and <｜Assistant｜> when the tokenizer has them.
  const std::vector<int32_t>& stop_token_ids() const { return stop_ids_; }
  bool is_stop_token(int32_t id) const;

  // Chat request -> prompt ids via the V4.1 template (ChatEncoder + encode_prompt).
  Prompt render_chat(const text::ChatRequest& req) const;
  // An OpenAI Chat Completions (or FIM completions) body; throws text::RequestError.
  Prompt render_request(const text::ojson& body) const;
  // Plain text tokenized as BPE (added-token strings stay plain text), with BOS prepended
  // when add_bos.
  Prompt encode_raw(std::string_view text, bool add_bos = true) const;

  // The vocabulary's byte trie for constrained decoding, built on first use (thread-safe).
  const TokenTrie& token_trie() const;

  // What DSpark speculation measured in the last generation that used it (runtime/spec_payoff.h:
  // a pass's cost and yield against a plain step's): the next generation's payoff gate starts
  // from it instead of learning again. Thread-safe.
  SpecPayoff spec_payoff() const;
  void set_spec_payoff(const SpecPayoff& p);

 private:
  Engine() = default;
  Prompt prompt_from(text::RenderResult r) const;

  EngineOptions opt_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<text::Tokenizer> tok_;
  std::unique_ptr<ThreadPool> pool_;
  MemoryPlan plan_;
  std::unique_ptr<ExpertCache> experts_;  // before model_: outlive its forwards
  std::unique_ptr<EngramStore> engram_;
  std::unique_ptr<Transformer> model_;
  const KernelTable* kernels_ = nullptr;
  std::vector<int32_t> stop_ids_;
  std::mutex forward_mu_;
  mutable std::mutex payoff_mu_;
  SpecPayoff payoff_;
  mutable std::once_flag trie_once_;
  mutable std::unique_ptr<TokenTrie> trie_;
  std::unique_ptr<ForwardBatcher> batcher_;  // declared last: stopped before the model goes
};

}  // namespace cedar::runtime
