// Scheduler: admission queue + `parallel` slots that run generations on one shared Engine.
//
// Each slot owns a runtime::Generator (its session state is reused when the next prompt extends
// it, so jobs are dispatched to the idle slot whose tokens share the longest prefix with the
// prompt) and runs on its own thread. The engine runs with batching on (runtime::ForwardBatcher):
// the forward calls of all slots that are waiting at the same moment -- one decode step per
// decoding request, prefill chunks of `prefill_chunk` prompt tokens -- go through the model as
// one batched pass (continuous batching), so a long prompt is fed in chunks next to the decoders
// instead of stalling them. See docs/SERVER.md.
//
// With a KV pool smaller than every slot's full context (`--kv-ram`, runtime/kv_pool.h) a job
// reserves the KV of its whole sequence when it is submitted (queued jobs too): one that does
// not fit, after the idle slots' sessions are dropped, is refused with a 503 naming the numbers.
// An idle slot's session holds the KV of its tokens until a job lands there or is evicted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/kv_pool.h"
#include "server/job.h"
#include "server/metrics.h"

namespace cedar::server {

struct SchedulerOptions {
  int parallel = 8;             // slots (requests generated concurrently)
  int64_t ctx_size = 0;         // prompt + completion limit; <= 0: the model's
  int64_t prefill_chunk = 128;  // prompt tokens per forward call (one chunk per pass)
  int batch_rows = 512;         // rows per batched pass (runtime::BatcherOptions::max_rows)
  int max_queue = 256;  // requests that may wait for a slot; past it submit() answers 503 (0: none)
  runtime::SpeculativeOptions speculative;  // DSpark speculative decoding of every request
  int64_t kv_pool = 0;  // KV bytes shared by the slots (0: each slot holds a full context)
};

class Scheduler {
 public:
  // `cache` (may be null) is the prefix cache, shared by all slots (it must be thread-safe).
  Scheduler(runtime::Engine& engine, runtime::PrefixCacheHook* cache, SchedulerOptions opt,
            Metrics* metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job. Throws ApiError 503 when the queue is full, the server is stopping or the
  // job's KV does not fit in the pool.
  void submit(std::shared_ptr<Job> job);
  // The context limit requests are checked against.
  int64_t ctx_size() const { return ctx_; }
  int queued() const;
  int active() const;
  int slot_count() const;
  // Each slot: running a job (its prompt's length) or idle (the session it holds for reuse).
  struct SlotInfo {
    int id = 0;
    bool busy = false;
    int64_t prompt_tokens = 0;  // the running job's prompt (0 when idle)
    int64_t held_tokens = 0;    // an idle slot's session tokens (reused by a matching prompt)
  };
  std::vector<SlotInfo> slot_info() const;
  // The KV pool: capacity (0: unlimited) and bytes reserved by jobs and idle sessions.
  int64_t kv_capacity() const;
  int64_t kv_used() const;
  // Finishes the running jobs as cancelled, fails the queued ones, joins the slots.
  void stop();

 private:
  struct Slot;
  class RestoreHook;
  void slot_loop(Slot* slot);
  Outcome run(Slot* slot, Job& job);  // the job's events are pushed, the outcome returned
  void dispatch_locked();
  void reserve_kv_locked(Job& job);  // throws ApiError 503
  void hold_session_locked(Slot* slot);

  runtime::Engine& engine_;
  runtime::PrefixCacheHook* cache_;
  SchedulerOptions opt_;
  Metrics* metrics_;
  int64_t ctx_ = 0;
  int32_t think_end_id_ = -1;

  mutable std::mutex mu_;
  // A long prefill draws a progress bar on a terminal; one job at a time owns the line.
  std::atomic<bool> progress_line_{false};
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int active_ = 0;
  bool stopping_ = false;
  runtime::KvPool kv_;  // guarded by mu_
};

}  // namespace cedar::server
