#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "text/dsml.h"
#include "text/incremental_decoder.h"

namespace cedar::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool cancelled(const GenerationOptions& opt) {
  return opt.cancel != nullptr && opt.cancel->load(std::memory_order_relaxed);
}

// The request's constraint on the answer, if any.
std::unique_ptr<TokenConstraint> make_constraint(const Engine& engine,
                                                 const GenerationOptions& opt) {
  if (opt.json_schema)
    return std::make_unique<JsonConstraint>(engine.token_trie(), engine.tokenizer(),
                                            text::JsonMatcher(opt.json_schema),
                                            engine.stop_token_ids());
  if (opt.tool_grammar) {
    const auto start = opt.start == text::GenerationStart::kToolCalls
                           ? text::CallStart::kInsideBlock
                           : text::CallStart::kFree;
    return std::make_unique<ToolCallConstraint>(engine.token_trie(), engine.tokenizer(),
                                                text::ToolCallMatcher(opt.tool_grammar, start),
                                                engine.stop_token_ids());
  }
  return nullptr;
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

// --- StopMatcher -------------------------------------------------------------------------------

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_)
    if (s.empty()) throw std::runtime_error("stop strings must not be empty");
}

const std::string& StopMatcher::matched_string() const {
  static const std::string kNone;
  return matched_ >= 0 ? stops_[size_t(matched_)] : kNone;
}

std::string StopMatcher::push(std::string_view text) {
  if (matched_ >= 0) return {};
  held_.append(text);
  // The earliest complete stop string wins (ties: the one listed first).
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = held_.find(stops_[i]);
    if (at != std::string::npos && at < best) {
      best = at;
      matched_ = int(i);
    }
  }
  if (best != std::string::npos) {
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string. held_ is valid UTF-8
  // and the stop strings are too, so the cut falls on a character boundary.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_k = std::min(s.size() - 1, held_.size());
    for (size_t k = max_k; k > hold; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::finish() {
  std::string out;
  out.swap(held_);
  return out;
}

namespace {

// The images of a generation lie inside the prompt, ascending, with patches, on a model with a
// tower, and the prompt holds the placeholder at every position of their spans.
void check_images(const ModelConfig& cfg, std::span<const int32_t> prompt,
                  std::span<const PromptImage> images) {
  int64_t prev_end = 0;
  for (const PromptImage& im : images) {
    if (!cfg.has_vision) throw std::runtime_error("the model has no vision tower");
    if (!im.patches || im.span.n_h <= 0 || im.span.n_w <= 0 || im.span.first_pos < prev_end ||
        im.span.end() > int64_t(prompt.size()))
      throw std::runtime_error("an image span at position " + std::to_string(im.span.first_pos) +
                               " is empty, overlaps another or lies outside the prompt");
    prev_end = im.span.end();
    for (int64_t p = im.span.first_pos; p < im.span.end(); ++p)
      if (prompt[size_t(p)] != int32_t(cfg.image_token_id))
        throw std::runtime_error("prompt position " + std::to_string(p) + " holds id " +
                                 std::to_string(prompt[size_t(p)]) +
                                 " inside an image span, not the image placeholder");
  }
}

}  // namespace

// --- Generator ---------------------------------------------------------------------------------

Generator::Generator(Engine& engine, PrefixCacheHook* cache) : engine_(engine), cache_(cache) {}

void Generator::reset() {
  state_ = SequenceState();
  tokens_.clear();
}

void Generator::forward(const int32_t* ids, int n, bool want_logits, bool completes_prompt,
                        const GenerationOptions& opt, std::vector<float>* logits,
                        std::span<const ImageInput> images, bool seed) {
  const int64_t V = engine_.config().vocab_size;
  std::vector<int32_t> real;  // identity ids -> the ids the model reads
  if (!images.empty()) {
    real.assign(ids, ids + n);
    for (int32_t& id : real)
      if (id < 0) id = int32_t(engine_.config().image_token_id);
  }
  if (want_logits) logits->resize(size_t(V));
  ForwardOptions fo;
  fo.mode = opt.exact_prefill ? PrefillMode::kExact : PrefillMode::kCed;
  fo.completes_prompt = completes_prompt;
  fo.logits = want_logits ? LogitsWanted::kLast : LogitsWanted::kNone;
  fo.dspark_seed = opt.speculative.enabled && seed;  // the drafter's rings follow the state
  fo.images = images;
  engine_.forward(state_, real.empty() ? ids : real.data(), n, int64_t(tokens_.size()), fo,
                  want_logits ? logits->data() : nullptr);
  tokens_.insert(tokens_.end(), ids, ids + n);
}

void Generator::prefill(std::span<const int32_t> prompt, const GenerationOptions& opt,
                        const GenerationCallbacks& cb, GenerationResult* res,
                        std::vector<float>* logits) {
  const int64_t T = int64_t(prompt.size());
  // Session reuse: the state already holds a strict prefix of this prompt (the previous turn).
  int64_t reused = 0;
  // A prompt left open by a cancelled CED prefill can only be continued in CED mode.
  if (!tokens_.empty() && int64_t(tokens_.size()) < T &&
      state_.n_tokens == int64_t(tokens_.size()) && (!state_.prompt_open() || !opt.exact_prefill) &&
      std::equal(tokens_.begin(), tokens_.end(), prompt.begin()))
    reused = int64_t(tokens_.size());
  if (cache_ != nullptr && opt.use_prefix_cache && reused < T - 1) {
    SequenceState s = engine_.model().new_state();
    const int64_t got = cache_->restore(engine_, prompt, T - 1, &s);
    if (got < 0 || got > T - 1 || (got > 0 && s.n_tokens != got))
      throw std::runtime_error("prefix cache restored an inconsistent state (" +
                               std::to_string(got) + " tokens, state holds " +
                               std::to_string(s.n_tokens) + ")");
    if (got > reused) {
      state_ = std::move(s);
      tokens_.assign(prompt.begin(), prompt.begin() + got);
      reused = got;
    }
  }
  if (reused == 0) {
    state_ = engine_.model().new_state();
    tokens_.clear();
  }
  res->usage.cached_tokens = reused;
  // the images whose rows are still to run go through the tower now
  std::vector<std::vector<float>> rows;
  std::vector<ImageInput> images;
  rows.reserve(opt.images.size());
  for (const PromptImage& im : opt.images)
    if (im.span.end() > reused) {
      rows.push_back(engine_.encode_image(*im.patches));
      images.push_back({im.span, rows.back().data()});
    }
  if (!opt.images.empty() && cb.on_images_encoded) cb.on_images_encoded();

  const int64_t chunk = std::max<int64_t>(1, opt.prefill_chunk);
  const int64_t interval = cache_ != nullptr && opt.use_prefix_cache ? cache_->interval() : 0;
  int64_t pos = reused;
  while (pos < T) {
    int64_t end = std::min(T, pos + chunk);
    if (interval > 0) end = std::min(end, (pos / interval + 1) * interval);
    const bool last = end == T;
    // A chunk ending at an interval point completes the prompt so far (CED runs the decoder on
    // its last <= window rows), because an open CED prompt is not a snapshot (FORWARD.md). This
    // gives the decoder more context than a one-shot CED prefill, so with an interval the CED
    // logits may differ slightly from a run without one (exact prefill: identical).
    const bool at_interval = !last && interval > 0 && end % interval == 0;
    forward(prompt.data() + pos, int(end - pos), last, last || at_interval, opt, logits,
            images_in(images, pos, int(end - pos)));
    res->prefill_computed += end - pos;
    pos = end;
    if (cb.on_prefill) cb.on_prefill(pos, T);
    if (at_interval)
      cache_->offer(std::span<const int32_t>(tokens_), state_, PrefixCacheHook::Point::kInterval);
    if (!last && cancelled(opt)) return;
  }
  if (cache_ != nullptr && opt.use_prefix_cache)
    cache_->offer(std::span<const int32_t>(tokens_), state_, PrefixCacheHook::Point::kPromptEnd);
}

// The logits of the row after `id` (chosen, not yet in the state): the verify pass's next row
// when `id` is its draft; else the pass ends (its other rows rewound) and a new one runs
// [id, drafts] (at most left - 1 drafts: left tokens may still come), or a plain forward of id.
void Generator::next_logits(int32_t id, int64_t left, VerifyPass& look,
                            const GenerationOptions& opt, std::vector<float>* logits,
                            GenerationResult* res) {
  const size_t V = size_t(engine_.config().vocab_size);
  if (look.advance(id)) {
    logits->assign(look.logits(), look.logits() + V);
    return;
  }
  if (look.active()) tokens_.resize(tokens_.size() - size_t(look.finish(state_)));
  ForwardOptions fo;
  fo.mode = PrefillMode::kExact;
  if (look.run(state_, id, int(std::min<int64_t>(look.spec_tokens(), left - 1)), fo)) {
    tokens_.insert(tokens_.end(), look.rows().begin(), look.rows().end());
    logits->assign(look.logits(), look.logits() + V);
    return;
  }
  const double t0 = look.now();
  forward(&id, 1, true, true, opt, logits, {}, look.seeding());
  look.plain_step(look.now() - t0);
  ++res->decode_steps;
}

GenerationResult Generator::generate(std::span<const int32_t> prompt, const GenerationOptions& opt,
                                     const GenerationCallbacks& cb) {
  const ModelConfig& cfg = engine_.config();
  const int64_t T = int64_t(prompt.size());
  if (T == 0) throw std::runtime_error("empty prompt");
  for (int32_t id : prompt)
    if (id < 0 || id >= cfg.vocab_size)
      throw std::runtime_error("prompt token id " + std::to_string(id) +
                               " is outside the vocabulary (vocab_size " +
                               std::to_string(cfg.vocab_size) + ")");
  int64_t ctx = opt.ctx_size > 0                  ? opt.ctx_size
                : cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings
                                                  : std::numeric_limits<int64_t>::max();
  if (T >= ctx)
    throw std::runtime_error("the prompt has " + std::to_string(T) +
                             " tokens, which does not fit the context size " + std::to_string(ctx));
  if (opt.json_schema && opt.tool_grammar)
    throw std::runtime_error(
        "a JSON answer and strict tool calls cannot both constrain one answer");
  try {
    opt.sampling.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("sampling: ") + e.what());
  }
  const Sampler sampler(opt.sampling);
  VerifyPass look(engine_, opt.speculative);  // throws before any work on a model without stages
  const int64_t room = ctx - T;
  const int64_t max_new = opt.max_tokens > 0 ? std::min(opt.max_tokens, room) : room;

  check_images(cfg, prompt, opt.images);
  // image positions compare by their image's digest (session reuse, the prefix cache)
  const std::vector<int32_t> key =
      opt.images.empty() ? std::vector<int32_t>() : identity_ids(prompt, opt.images);
  GenerationResult res;
  res.usage.prompt_tokens = T;
  std::vector<float> logits;
  try {
    const auto t0 = Clock::now();
    prefill(key.empty() ? prompt : std::span<const int32_t>(key), opt, cb, &res, &logits);
    res.prefill_seconds = seconds_since(t0);
  } catch (...) {
    reset();  // a failed forward may leave the state half-written
    throw;
  }

  text::IncrementalDecoder dec(engine_.tokenizer());
  auto emit = [&](const std::string& s) {
    if (s.empty()) return;
    res.text += s;
    if (cb.on_text) cb.on_text(s);
  };

  // A constraint covers the answer: when the prompt opened the reasoning it starts after
  // </think>.
  const std::unique_ptr<TokenConstraint> grammar = make_constraint(engine_, opt);
  bool reasoning_open = grammar && opt.start == text::GenerationStart::kReasoning;
  bool constrain = grammar && !reasoning_open;
  std::string think_tail;  // the reasoning's last decoded bytes, for a </think> split over pieces
  std::unordered_map<int32_t, int> penalty_counts;  // completion tokens so far (penalties)
  const auto t1 = Clock::now();
  bool finished = false;
  if (int64_t(tokens_.size()) < T) {  // cancelled during prefill
    res.finish = FinishReason::kCancelled;
    finished = true;
  }
  try {
    while (!finished) {
      if (cancelled(opt)) {
        res.finish = FinishReason::kCancelled;
        break;
      }
      // the position of the token chosen now (inside a verify pass: after its current row)
      const int64_t pos = look.active() ? look.position() + 1 : int64_t(tokens_.size());
      int32_t id = 0;
      if (opt.forced) {
        if (res.tokens.size() >= opt.forced->size()) {
          res.finish = FinishReason::kStop;
          break;
        }
        id = (*opt.forced)[res.tokens.size()];
      } else {
        if (opt.sampling.has_penalties())
          apply_penalties(std::span<float>(logits), penalty_counts, opt.sampling);
        if (constrain) grammar->mask(std::span<float>(logits));
        id = sampler.sample(std::span<const float>(logits), pos);
      }
      if (constrain) grammar->accept(id);
      if (opt.sampling.has_penalties()) ++penalty_counts[id];
      res.tokens.push_back(id);
      if (cb.on_token) cb.on_token(id);
      if (opt.top_logprobs >= 0 && cb.on_logprobs)
        cb.on_logprobs(token_logprobs(std::span<const float>(logits), id, opt.top_logprobs));
      if (engine_.is_stop_token(id)) {
        res.finish = FinishReason::kStop;
        res.stop_token = id;
        break;
      }
      const std::string piece = dec.push(id);
      if (reasoning_open) {
        think_tail += piece;
        if (think_tail.find(text::kThinkEnd) != std::string::npos) {
          reasoning_open = false;
          constrain = grammar != nullptr;
        } else if (think_tail.size() >= text::kThinkEnd.size()) {
          think_tail.erase(0, think_tail.size() - (text::kThinkEnd.size() - 1));
        }
      }
      emit(piece);
      if (cancelled(opt)) {  // (the caller's stop sequence matched this piece)
        res.finish = FinishReason::kCancelled;
        break;
      }
      if (int64_t(res.tokens.size()) >= max_new) {
        res.finish = FinishReason::kLength;
        break;
      }
      next_logits(id, max_new - int64_t(res.tokens.size()), look, opt, &logits, &res);
    }
    if (look.active()) tokens_.resize(tokens_.size() - size_t(look.finish(state_)));
  } catch (...) {
    reset();
    throw;
  }
  emit(dec.flush());  // the detokenizer's held bytes (an incomplete UTF-8 sequence)
  res.decode_seconds = seconds_since(t1);
  res.speculative = look.stats();
  res.usage.completion_tokens = int64_t(res.tokens.size());
  if (cache_ != nullptr && opt.use_prefix_cache && int64_t(tokens_.size()) > T)
    cache_->offer(std::span<const int32_t>(tokens_), state_, PrefixCacheHook::Point::kAnswerEnd);
  return res;
}

}  // namespace cedar::runtime
