#include "server/scheduler.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "base/progress.h"
#include "server/api_error.h"

namespace cedar::server {

namespace {

// The prefill progress bar of one job (base/progress.h: nothing unless stderr is a terminal and
// the prefill outlasts the bar's delay). The line is shared by the slots: a job that finds it
// taken at its first chunk stays silent rather than fight over it.
class PrefillBar {
 public:
  explicit PrefillBar(std::atomic<bool>* line) : line_(line) {}
  ~PrefillBar() { release(); }
  PrefillBar(const PrefillBar&) = delete;
  PrefillBar& operator=(const PrefillBar&) = delete;

  void update(int64_t done, int64_t total) {
    if (!bar_) {
      if (tried_) return;
      tried_ = true;
      bool free = false;
      if (!line_->compare_exchange_strong(free, true)) return;
      bar_.emplace("prefill", total, "tokens");
    }
    bar_->update(done);
    if (done >= total) release();
  }

 private:
  void release() {
    if (!bar_) return;
    bar_.reset();
    line_->store(false);
  }
  std::atomic<bool>* line_;
  std::optional<ProgressBar> bar_;
  bool tried_ = false;
};

}  // namespace

// --- The prefix-cache wrapper that reports how much was restored -----------------------------

class Scheduler::RestoreHook : public runtime::PrefixCacheHook {
 public:
  explicit RestoreHook(runtime::PrefixCacheHook* inner) : inner_(inner) {}

  int64_t restore(runtime::Engine& engine, std::span<const int32_t> ids, int64_t max_len,
                  SequenceState* state) override {
    last_restore = inner_ ? inner_->restore(engine, ids, max_len, state) : 0;
    return last_restore;
  }
  int64_t interval() const override { return inner_ ? inner_->interval() : 0; }
  void offer(std::span<const int32_t> ids, const SequenceState& state, Point where) override {
    if (inner_) inner_->offer(ids, state, where);
  }

  int64_t last_restore = 0;

 private:
  runtime::PrefixCacheHook* inner_;
};

struct Scheduler::Slot {
  int index = 0;
  std::unique_ptr<RestoreHook> hook;
  std::unique_ptr<runtime::Generator> gen;
  std::shared_ptr<Job> job;     // assigned job (guarded by Scheduler::mu_)
  std::vector<int32_t> tokens;  // the generator's tokens while idle (guarded by mu_)
  int64_t held = 0;             // KV bytes of the idle session, in the pool (guarded by mu_)
  std::condition_variable cv;
  std::thread thread;
};

// --- Scheduler ---------------------------------------------------------------------------------

namespace {

// -c, at most the model's context (the model's when -c is not given). Beyond it is an error, not
// a silent clamp: the user asked for a context the model cannot hold.
int64_t context_limit(const ModelConfig& cfg, int64_t asked) {
  const int64_t model_ctx = cfg.max_position_embeddings;
  if (model_ctx > 0 && asked > model_ctx)
    throw std::runtime_error("--ctx-size " + std::to_string(asked) + " is more than the model's " +
                             std::to_string(model_ctx) +
                             "-token context (0 or absent: the model's)");
  return asked > 0 ? asked : model_ctx > 0 ? model_ctx : std::numeric_limits<int32_t>::max();
}

}  // namespace

Scheduler::Scheduler(runtime::Engine& engine, runtime::PrefixCacheHook* cache, SchedulerOptions opt,
                     Metrics* metrics)
    : engine_(engine),
      cache_(cache),
      opt_(opt),
      metrics_(metrics),
      ctx_(context_limit(engine.config(), opt.ctx_size)),
      kv_(engine.config(), ctx_, opt.kv_pool) {
  if (const auto id = engine.tokenizer().token_to_id(text::kThinkEnd)) think_end_id_ = *id;
  runtime::BatcherOptions bo;
  bo.max_rows = std::max(1, opt_.batch_rows);
  engine_.enable_batching(bo);
  const int n = std::max(1, opt_.parallel);
  for (int i = 0; i < n; ++i) {
    auto s = std::make_unique<Slot>();
    s->index = i;
    s->hook = std::make_unique<RestoreHook>(cache_);
    s->gen = std::make_unique<runtime::Generator>(engine_, s->hook.get());
    slots_.push_back(std::move(s));
  }
  for (auto& s : slots_) s->thread = std::thread([this, p = s.get()] { slot_loop(p); });
}

Scheduler::~Scheduler() { stop(); }

int Scheduler::queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(queue_.size());
}

int Scheduler::active() const {
  std::lock_guard<std::mutex> lk(mu_);
  return active_;
}

int Scheduler::slot_count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(slots_.size());
}

std::vector<Scheduler::SlotInfo> Scheduler::slot_info() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<SlotInfo> out;
  for (const auto& s : slots_) {
    SlotInfo i;
    i.id = s->index;
    i.busy = s->job != nullptr;
    i.prompt_tokens = i.busy ? int64_t(s->job->spec().prompt.size()) : 0;
    i.held_tokens = i.busy ? 0 : int64_t(s->tokens.size());
    out.push_back(i);
  }
  return out;
}

int64_t Scheduler::kv_capacity() const {
  std::lock_guard<std::mutex> lk(mu_);
  return kv_.capacity();
}

int64_t Scheduler::kv_used() const {
  std::lock_guard<std::mutex> lk(mu_);
  return kv_.used();
}

void Scheduler::reserve_kv_locked(Job& job) {
  const JobSpec& spec = job.spec();
  const int64_t T = int64_t(spec.prompt.size());
  const int64_t tokens = spec.max_tokens > 0 ? T + spec.max_tokens : ctx_;
  const int64_t need = kv_.sequence_bytes(tokens);
  // Idle sessions are a cache: drop them, largest first, before refusing anyone.
  while (need > kv_.free_bytes()) {
    Slot* victim = nullptr;
    for (auto& s : slots_)
      if (!s->job && s->held > 0 && (!victim || s->held > victim->held)) victim = s.get();
    if (!victim) break;
    victim->gen->reset();  // idle: its thread waits for a job under this lock
    victim->tokens.clear();
    kv_.give(victim->held);
    victim->held = 0;
  }
  if (!kv_.take(need)) throw ApiError(503, kv_.refusal(need, tokens, active_ + int(queue_.size())));
  job.kv_bytes = need;
}

// After a job: its reservation goes back, the session it left stays counted in the slot (and
// is dropped when it no longer fits: a job cancelled in the queue leaves an older, larger one).
void Scheduler::hold_session_locked(Slot* slot) {
  kv_.give(slot->job->kv_bytes);
  slot->job->kv_bytes = 0;
  const int64_t held =
      slot->gen->tokens().empty() ? 0 : kv_.sequence_bytes(int64_t(slot->gen->tokens().size()));
  if (kv_.take(held)) {
    slot->held = held;
  } else {
    slot->gen->reset();
    slot->held = 0;
  }
  slot->tokens = slot->gen->tokens();
}

void Scheduler::submit(std::shared_ptr<Job> job) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopping_) throw ApiError(503, "the server is shutting down");
  // max_queue counts the requests that wait: one that finds an idle slot never does
  const bool slot_idle = active_ + int(queue_.size()) < int(slots_.size());
  if (!slot_idle && int(queue_.size()) >= opt_.max_queue)
    throw ApiError(503, "the server is overloaded: " + std::to_string(queue_.size()) +
                            " requests are waiting; retry later");
  reserve_kv_locked(*job);
  queue_.push_back(std::move(job));
  dispatch_locked();
  if (metrics_) metrics_->set_queue(int(queue_.size()), active_);
}

void Scheduler::dispatch_locked() {
  while (!queue_.empty()) {
    // The idle slot whose session shares the longest prefix with the prompt (reused state).
    const auto& prompt = queue_.front()->spec().key();  // images compare by digest
    Slot* best = nullptr;
    size_t best_len = 0;
    for (auto& s : slots_) {
      if (s->job) continue;
      const size_t n = std::min(s->tokens.size(), prompt.size());
      const size_t len =
          size_t(std::mismatch(s->tokens.begin(), s->tokens.begin() + n, prompt.begin()).first -
                 s->tokens.begin());
      if (!best || len > best_len) {
        best = s.get();
        best_len = len;
      }
    }
    if (!best) return;
    best->job = std::move(queue_.front());
    queue_.pop_front();
    kv_.give(best->held);  // the job's reservation covers the session it extends
    best->held = 0;
    ++active_;
    best->cv.notify_one();
  }
}

void Scheduler::slot_loop(Slot* slot) {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      slot->cv.wait(lk, [&] { return slot->job != nullptr || stopping_; });
      if (!slot->job) return;  // stopping and nothing assigned
      job = slot->job;
    }
    Outcome outcome = run(slot, *job);
    job->release_image_patches();  // a job that ended before its tower ran
    {
      // Free the slot before the client hears that the job is done, so that its next turn can
      // already be dispatched here and reuse the state.
      std::lock_guard<std::mutex> lk(mu_);
      hold_session_locked(slot);
      slot->job.reset();
      --active_;
      dispatch_locked();
      if (metrics_) metrics_->set_queue(int(queue_.size()), active_);
    }
    job->done(std::move(outcome));
  }
}

Outcome Scheduler::run(Slot* slot, Job& job) {
  const JobSpec& spec = job.spec();
  CompletionPipeline pipe(spec.setup);
  std::vector<CompletionEvent> evs;
  const int64_t T = int64_t(spec.prompt.size());
  Usage usage;
  usage.prompt_tokens = T;

  auto finish = [&](Finish f, std::string error) {
    if (error.empty() && f == Finish::kCancelled) error = job.expiry();  // past its deadline
    pipe.finish(f, &evs);
    job.push(&evs);
    Outcome o = pipe.outcome();
    if (!error.empty()) {
      o.finish = Finish::kError;
      o.error = error;
    }
    o.usage.prompt_tokens = usage.prompt_tokens;
    o.usage.cached_tokens = usage.cached_tokens;
    if (metrics_) {
      metrics_->add_prompt(usage.prompt_tokens, usage.cached_tokens);
      if (job.client_cancelled()) metrics_->add_cancelled();
    }
    return o;
  };
  if (job.halt_flag()) return finish(Finish::kCancelled, {});  // the client left while queued

  runtime::Generator& gen = *slot->gen;
  // What the generator will reuse of its own session (its rule, Generator::prefill).
  const auto& held = gen.tokens();
  int64_t session = 0;
  if (!held.empty() && int64_t(held.size()) < T && gen.state().n_tokens == int64_t(held.size()) &&
      std::equal(held.begin(), held.end(), spec.key().begin()))
    session = int64_t(held.size());
  slot->hook->last_restore = 0;

  runtime::GenerationOptions opt;
  opt.sampling = spec.sampling;
  opt.max_tokens = spec.max_tokens;
  opt.ctx_size = ctx_;
  opt.prefill_chunk = std::max<int64_t>(1, opt_.prefill_chunk);
  opt.cancel = &job.halt_flag();
  // Test hook: the forced ids replace the sampled ones and run through the model like them.
  if (spec.forced) opt.forced = &*spec.forced;
  opt.top_logprobs = spec.top_logprobs;
  opt.start = spec.setup.parser.start;  // where the answer (and its constraint) starts
  opt.json_schema = spec.json_schema ? spec.json_schema->root() : nullptr;
  opt.tool_grammar = spec.tool_grammar.get();
  opt.speculative = opt_.speculative;
  opt.images = spec.images;

  bool started = false;
  auto start = [&] {
    if (started) return;
    started = true;
    CompletionEvent e;
    e.kind = CompletionEvent::Kind::kStarted;
    e.usage.prompt_tokens = T;
    e.usage.cached_tokens = std::max(session, slot->hook->last_restore);
    evs.push_back(std::move(e));
    job.push(&evs);
  };
  runtime::GenerationCallbacks cb;
  cb.on_token = [&](int32_t id) {
    start();
    pipe.on_token(id, think_end_id_);
    if (metrics_) metrics_->add_completion_tokens(1);
  };
  PrefillBar bar(&progress_line_);
  cb.on_prefill = [&bar](int64_t done, int64_t total) { bar.update(done, total); };
  cb.on_images_encoded = [&job] { job.release_image_patches(); };
  cb.on_logprobs = [&](const runtime::TokenLogprobs& t) {
    pipe.on_logprobs(t, engine_.tokenizer(), engine_.is_stop_token(t.id), &evs);
  };
  cb.on_text = [&](const std::string& text) {
    if (pipe.on_text(text, &evs)) job.halt_flag() = true;  // stop sequence: end it
    job.push(&evs);
  };

  Finish fin = Finish::kStop;
  try {
    const runtime::GenerationResult res = gen.generate(spec.prompt, opt, cb);
    if (metrics_)
      metrics_->add_speculative(res.speculative.drafted, res.speculative.accepted,
                                res.speculative.passes);
    usage.prompt_tokens = res.usage.prompt_tokens;
    usage.cached_tokens = res.usage.cached_tokens;
    switch (res.finish) {
      case runtime::FinishReason::kStop:
        fin = Finish::kStop;
        break;
      case runtime::FinishReason::kLength:
        fin = Finish::kLength;
        break;
      case runtime::FinishReason::kCancelled:
        fin = pipe.stopped() ? Finish::kStop : Finish::kCancelled;
        break;
    }
  } catch (const std::exception& e) {
    start();
    return finish(Finish::kError, std::string("generation failed: ") + e.what());
  }
  return finish(fin, {});
}

void Scheduler::stop() {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && slots_.empty()) return;
    stopping_ = true;
    dropped.swap(queue_);
    for (auto& j : dropped) {
      kv_.give(j->kv_bytes);
      j->kv_bytes = 0;
      j->release_image_patches();  // never runs: no slot reads them
    }
    for (auto& s : slots_)
      if (s->job) s->job->cancel();
  }
  for (auto& j : dropped) {
    Outcome o;
    o.finish = Finish::kError;
    o.error = "the server is shutting down";
    j->done(std::move(o));
  }
  for (auto& s : slots_) s->cv.notify_all();
  for (auto& s : slots_)
    if (s->thread.joinable()) s->thread.join();
  std::lock_guard<std::mutex> lk(mu_);
  slots_.clear();
}

}  // namespace cedar::server
