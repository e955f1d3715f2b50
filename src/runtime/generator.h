// Generator: one generation session over an Engine -- prompt ids in, streamed events out.
//
//   prefill   the prompt in chunks (CED by default where the forward supports it), after asking
//             the optional PrefixCacheHook for the longest cached prefix and reusing the
//             session's own state when the new prompt extends the tokens it already holds
//             (multi-turn chat);
//   decode    sample (Sampler, keyed by absolute position) -> stop on a stop token (EOS and the
//             turn openers, Engine::stop_token_ids), max_tokens, the context size or the cancel
//             flag (checked after each piece of text too: a caller's stop sequence ends it on
//             the token that completed it);
//   stream    each token through the UTF-8-safe IncrementalDecoder to on_text. What the text
//             means (reasoning, answer, tool calls) and the stop sequences are the one output
//             pipeline's (server/completion.h), which every front end runs on this text.
//
// Not thread-safe: one Generator per concurrent request. Generators may share one Engine: every
// forward call goes through Engine::forward (batched with the other generators' calls when the
// engine has batching on).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/prompt_images.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "state/sequence_state.h"
#include "text/output_parser.h"

namespace cedar::runtime {

// The seam for a prefix cache (src/runtime/prefix_cache*). All calls come from the generating
// thread, outside Engine::forward_mutex() (take it yourself if you run the model, e.g. for a
// bounded replay).
class PrefixCacheHook {
 public:
  enum class Point { kInterval, kPromptEnd, kAnswerEnd };
  virtual ~PrefixCacheHook() = default;

  // Restores the longest usable cached prefix of ids[0..max_len) into *state (a fresh
  // Transformer::new_state()) and returns its length, 0 on a miss (state left fresh). On a hit
  // state->n_tokens must equal the returned length and the state must be ready for forward() at
  // that position. max_len < ids.size(): the generator always runs at least the last prompt token
  // to get its logits.
  virtual int64_t restore(Engine& engine, std::span<const int32_t> ids, int64_t max_len,
                          SequenceState* state) = 0;
  // Prefill chunks are cut at multiples of this many tokens and offer(kInterval) is called at
  // each multiple reached inside the prompt; 0 = never.
  virtual int64_t interval() const { return 0; }
  // The state after exactly `ids` (state.n_tokens == ids.size()). kPromptEnd: after the whole
  // prompt; kAnswerEnd: after prompt + answer (the last sampled token is not in the state, so
  // ids ends before it). Every offered state is complete (not an open CED prompt): under CED the
  // chunk ending at an interval point completes the prompt so far (docs/RUNNING.md).
  virtual void offer(std::span<const int32_t> ids, const SequenceState& state, Point where) = 0;
};

// The completion limit where a request or a flag sets none, the same in every entry point
// (`cedar run`, the server, its web page): a reasoning model's answer at high effort runs to
// thousands of tokens, and a smaller default cuts it off inside the reasoning.
inline constexpr int64_t kDefaultMaxTokens = 32768;

struct GenerationOptions {
  SamplingParams sampling;
  int64_t max_tokens = 256;     // completion tokens (the stop token included); <= 0: until ctx_size
  int64_t ctx_size = 0;         // prompt + completion limit; <= 0: the model's
                                // max_position_embeddings (or unbounded if that is 0)
  bool exact_prefill = false;   // false: CED prefill (when available), true: every layer on
                                // every prompt row
  int64_t prefill_chunk = 512;  // prompt tokens per forward call
  // Where the prompt left the generation (Prompt::start): a constraint covers the answer, so
  // with the reasoning open it starts after </think>.
  text::GenerationStart start = text::GenerationStart::kContent;
  bool use_prefix_cache = true;               // consult the hook (if any) for this request
  const std::atomic<bool>* cancel = nullptr;  // checked between forward calls
  // Test hook: these ids replace the sampled ones, in order, and go through the model and the
  // output path exactly like sampled ids; when they run out the completion ends (kStop).
  const std::vector<int32_t>* forced = nullptr;
  // >= 0: report every token's log-probability and this many alternatives (on_logprobs).
  int top_logprobs = -1;
  // The answer (after the reasoning, if any) must be a JSON value of this schema
  // (runtime/token_constraint.h); nullptr: unconstrained. Must outlive the generation.
  const text::SchemaNode* json_schema = nullptr;
  // Or (not both): the answer's tool calls must be of this grammar's tools (strict tool calls,
  // text/dsml_grammar.h): free text then an optional calls block, or, when parser.start is
  // kToolCalls (the prompt opened the block), the block's invokes alone. Must outlive it.
  const text::ToolGrammar* tool_grammar = nullptr;
  // DSpark speculative decoding (runtime/speculative.h): the same tokens, several per forward
  // when the drafts are right.
  SpeculativeOptions speculative;
  // The prompt's images (runtime/prompt_images.h), ascending: the prompt holds each one's
  // expanded span of placeholders. Encoded by the tower when their rows are prefilled (not when
  // the session or the prefix cache already holds them); prefix reuse compares them by digest.
  // Must outlive the generation.
  std::span<const PromptImage> images;
};

enum class FinishReason { kStop, kLength, kCancelled };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled"

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // sampled tokens, the terminating stop token included
  int64_t cached_tokens = 0;      // prompt tokens not recomputed (prefix cache or session reuse)
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // sampled ids, the stop token included
  std::string text;             // the decoded completion (what on_text received)
  FinishReason finish = FinishReason::kStop;
  int32_t stop_token = -1;  // the stop token that ended it (-1 if none)
  Usage usage;
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t prefill_computed = 0;  // prompt tokens actually run through the model
  int64_t decode_steps = 0;      // single-token forward calls
  SpecStats speculative;         // the verify passes (speculative decoding)
};

struct GenerationCallbacks {
  std::function<void(const std::string&)> on_text;  // the completion's decoded text, in pieces
  std::function<void(int32_t id)> on_token;         // every sampled id, in order
  // after on_token, when GenerationOptions::top_logprobs >= 0
  std::function<void(const TokenLogprobs&)> on_logprobs;
  // after each prefill chunk: prompt tokens in the state so far, of `total`
  std::function<void(int64_t done, int64_t total)> on_prefill;
  // once the tower has encoded the prompt's images (those the session or the prefix cache did
  // not already hold), before the first chunk: their patches are not read again, so the caller
  // may free them (the server's pixel budget counts them until then)
  std::function<void()> on_images_encoded;
};

class Generator {
 public:
  explicit Generator(Engine& engine, PrefixCacheHook* cache = nullptr);

  // Runs one completion of `prompt` (non-empty). Throws std::runtime_error on bad input (empty
  // prompt, prompt >= ctx_size, id outside the vocabulary) before touching the state.
  GenerationResult generate(std::span<const int32_t> prompt, const GenerationOptions& opt,
                            const GenerationCallbacks& cb = {});

  Engine& engine() const { return engine_; }
  // The tokens the session state holds (prompt + completion minus the last sampled token).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const SequenceState& state() const { return state_; }
  // Drops the session state (the next generate starts cold, or from the prefix cache).
  void reset();

 private:
  void prefill(std::span<const int32_t> prompt, const GenerationOptions& opt,
               const GenerationCallbacks& cb, GenerationResult* res, std::vector<float>* logits);
  // ids may be identity ids (prompt_images.h): their image positions go in as the placeholder
  // token with the image's rows. seed: write the DSpark rings too when speculation is on
  // (VerifyPass::seeding).
  void forward(const int32_t* ids, int n, bool want_logits, bool completes_prompt,
               const GenerationOptions& opt, std::vector<float>* logits,
               std::span<const ImageInput> images = {}, bool seed = true);
  void next_logits(int32_t id, int64_t left, VerifyPass& look, const GenerationOptions& opt,
                   std::vector<float>* logits, GenerationResult* res);

  Engine& engine_;
  PrefixCacheHook* cache_;
  SequenceState state_;
  std::vector<int32_t> tokens_;
};

// Streams completion text with stop strings: push() returns the text that can no longer become
// (part of) a stop string; once a stop string is complete, matched() is true and the text before
// it has been returned. finish() returns the held-back rest at the end (no match).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  std::string push(std::string_view text);
  std::string finish();
  bool matched() const { return matched_ >= 0; }
  const std::string& matched_string() const;

 private:
  std::vector<std::string> stops_;
  std::string held_;
  int matched_ = -1;
};

}  // namespace cedar::runtime
