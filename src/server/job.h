// Job: one admitted generation request, shared between the HTTP thread that answers the client
// and the scheduler slot that runs it. The slot pushes CompletionEvents; the HTTP thread waits
// for them (with a timeout, to send keep-alives) and may cancel (client gone).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/prompt_images.h"
#include "runtime/sampler.h"
#include "server/completion.h"
#include "text/dsml_grammar.h"
#include "text/json_grammar.h"

namespace cedar::server {

struct JobSpec {
  std::vector<int32_t> prompt;
  // The prompt's images (runtime/prompt_images.h; the prompt holds their spans) and the prompt's
  // identity ids (empty without images): what session reuse and slot matching compare.
  std::vector<PromptImage> images;
  std::vector<int32_t> identity;
  const std::vector<int32_t>& key() const { return identity.empty() ? prompt : identity; }
  CompletionSetup setup;
  runtime::SamplingParams sampling;
  int64_t max_tokens = 0;  // <= 0: until the context is full
  // Test hook (--enable-test-hooks): the completion the sampler is forced to produce. The
  // prompt is still prefilled by the model; then these ids are emitted instead of samples.
  std::optional<std::vector<int32_t>> forced;
  int top_logprobs = -1;  // >= 0: report log-probabilities (runtime::GenerationOptions)
  // response_format json_object / json_schema: the answer is constrained to it
  std::shared_ptr<const text::JsonSchema> json_schema;
  // strict tool calls (not with json_schema): the calls block is constrained to these tools
  std::shared_ptr<const text::ToolGrammar> tool_grammar;
};

class Job {
 public:
  explicit Job(JobSpec spec) : spec_(std::move(spec)) {}
  const JobSpec& spec() const { return spec_; }

  // Client side: stop generating (disconnect). Idempotent.
  void cancel() {
    client_cancelled_ = true;
    halt_ = true;
  }
  bool client_cancelled() const { return client_cancelled_; }
  // Server side: the request ran past its deadline; it ends as an error saying `why`. Idempotent.
  void expire(const std::string& why) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (expiry_.empty()) expiry_ = why;
    }
    halt_ = true;
  }
  // Why the job expired ("" if it did not).
  std::string expiry() const {
    std::lock_guard<std::mutex> lk(mu_);
    return expiry_;
  }
  // The flag the generator polls: set by cancel() or when a stop sequence ended the answer.
  std::atomic<bool>& halt_flag() { return halt_; }

  // KV bytes the scheduler reserved for this job (guarded by the Scheduler's lock).
  int64_t kv_bytes = 0;

  // Slot side, once the tower has run (or the job ends without it): drops the images' patches,
  // which hold their pixels in the server's budget (server/image_pool.h). Their spans and
  // digests stay. Only the slot thread reads the patches.
  void release_image_patches() {
    for (PromptImage& im : spec_.images) im.patches.reset();
  }

  // Slot side.
  void push(std::vector<CompletionEvent>* events);  // moves them out, clears *events
  void done(Outcome outcome);

  // Client side: waits until events or the outcome are available or `timeout` passes; moves the
  // events into *out. Returns false on timeout with nothing new.
  bool wait(std::vector<CompletionEvent>* out, std::chrono::milliseconds timeout);
  bool finished() const;
  Outcome outcome() const;  // meaningful once finished()
  // Calls f(outcome) once the job is done: at once if it is, else from done() (the slot's
  // thread). One callback per job.
  void when_done(std::function<void(const Outcome&)> f);
  // Seconds from the job's creation to its first answer event (text or a tool call; -1: none
  // yet) and to done() (-1: not done).
  double seconds_to_first_token() const;
  double seconds_to_done() const;

 private:
  JobSpec spec_;
  std::atomic<bool> halt_{false};
  std::atomic<bool> client_cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<CompletionEvent> queue_;
  std::function<void(const Outcome&)> when_done_;  // guarded by mu_
  bool finished_ = false;
  Outcome outcome_;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point created_ = Clock::now();
  std::optional<Clock::time_point> first_token_, done_at_;  // guarded by mu_
  std::string expiry_;                                      // guarded by mu_
};

}  // namespace cedar::server
