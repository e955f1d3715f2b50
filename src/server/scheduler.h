// Scheduler: admission queue + `parallel` slots that run generations on one shared Engine.
//
// Each slot owns a runtime::Generator (its session state is reused when the next prompt extends
// it, so jobs are dispatched to the idle slot whose tokens share the longest prefix with the
// prompt) and runs on its own thread. Forward calls are serialised through a FIFO TurnGate that a
// slot holds only for one step at a time:
//   * a decoding slot yields the gate after every sampled token (one decode token per active
//     request per round);
//   * a prefilling slot yields after every `prefill_chunk` prompt tokens (the generator cuts its
//     prefill at that interval through a PrefixCacheHook wrapper), so a long prompt does not
//     stall the others' decoding.
// That is round-robin time slicing of one sequence per forward call. A batched forward over
// several sequences (continuous batching proper) does not exist in the runtime yet; when it does,
// the gate's round becomes one batched step. See docs/SERVER.md.
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
#include "server/job.h"
#include "server/metrics.h"

namespace cedar::server {

// A FIFO ticket lock: whoever waits longest runs next.
class TurnGate {
 public:
  void acquire();
  void release();
  // Lets every slot that is waiting now run one step first (no-op when nobody waits).
  void yield();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0, serving_ = 0;
};

struct SchedulerOptions {
  int parallel = 4;             // slots (requests generated concurrently)
  int64_t ctx_size = 0;         // prompt + completion limit; <= 0: the model's
  int64_t prefill_chunk = 128;  // prompt tokens per turn
  int max_queue = 256;          // waiting requests beyond which submit() answers 503
};

class Scheduler {
 public:
  // `cache` (may be null) is the prefix cache, shared by all slots (it must be thread-safe).
  Scheduler(runtime::Engine& engine, runtime::PrefixCacheHook* cache, SchedulerOptions opt,
            Metrics* metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job. Throws ApiError 503 when the queue is full or the server is stopping.
  void submit(std::shared_ptr<Job> job);
  // The context limit requests are checked against.
  int64_t ctx_size() const { return ctx_; }
  int queued() const;
  int active() const;
  // Finishes the running jobs as cancelled, fails the queued ones, joins the slots.
  void stop();

 private:
  struct Slot;
  class ChunkHook;
  void slot_loop(Slot* slot);
  Outcome run(Slot* slot, Job& job);  // the job's events are pushed, the outcome returned
  void dispatch_locked();

  runtime::Engine& engine_;
  runtime::PrefixCacheHook* cache_;
  SchedulerOptions opt_;
  Metrics* metrics_;
  int64_t ctx_ = 0;
  int32_t think_end_id_ = -1;
  TurnGate gate_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int active_ = 0;
  bool stopping_ = false;
};

}  // namespace cedar::server
