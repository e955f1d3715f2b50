// ThreadPool: a fixed set of worker threads running static partitions of an index range.
// Owned by the caller of the forward (one per process). Work is split into contiguous ranges and
// every output element is computed by exactly one task, so results never depend on the number of
// threads or on timing.
//
// The forward pass issues one or two parallel regions per matrix product, thousands per decoded
// token, so a region must cost about a microsecond: the caller publishes a job with one atomic
// store and workers spin on it for a bounded time before sleeping (no mutex on the hot path).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace cedar {

template <class Sig>
class FunctionRef;

// Non-owning reference to a callable: two pointers, no allocation, unlike std::function whose
// large-capture lambdas go to the heap. The callable must outlive every call through the
// reference (a lambda passed straight to parallel_for lives until parallel_for returns).
template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<
                         !std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
                         std::is_object_v<std::remove_reference_t<F>> &&
                         std::is_invocable_r_v<R, std::remove_reference_t<F>&, Args...>>>
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): callers pass lambdas
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_(&invoke<std::remove_reference_t<F>>) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  template <class F>
  static R invoke(void* obj, Args... args) {
    return (*static_cast<F*>(obj))(std::forward<Args>(args)...);
  }

  void* obj_;
  R (*call_)(void*, Args...);
};

// The grain of a row-wise region whose rows take about `ops_per_row` element operations each:
// rows per chunk so that a chunk holds at least 2^15 of them (a few microseconds). A pool round
// trip costs about 2 us (an empty two-way region on the 2-vCPU machines here: 2.2 us), which
// smaller chunks do not repay: a few rows of a small model (a speculative verify pass's 6 rows
// of hc x D = 512) run on the caller, a prefill's hundreds of rows still split.
inline int64_t grain_for(int64_t ops_per_row) {
  constexpr int64_t kChunkOps = int64_t(1) << 15;
  return std::max<int64_t>(1, kChunkOps / std::max<int64_t>(1, ops_per_row));
}

// The CPUs this process may run on (its affinity mask: taskset, cgroup cpusets), else
// std::thread::hardware_concurrency().
int available_cpus();

class ThreadPool {
 public:
  using Task = FunctionRef<void(int64_t, int64_t)>;

  // n_threads <= 0: available_cpus(). Throws std::system_error when the system refuses a thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n); blocks until all are done. [0, n) is
  // cut into at most size() contiguous chunks of >= grain indices; chunk c runs on thread c
  // (0 = the caller). The first exception thrown by any chunk is rethrown here once all chunks
  // have finished. Called from inside a chunk (of any pool), it runs fn(0, n) inline.
  //
  // Not reentrant: the engine serialises its callers. Calls from two outside threads at once are
  // serialised by an entry lock (uncontended in the engine) rather than corrupting the job.
  void parallel_for(int64_t n, Task fn, int64_t grain = 1);

  // Calls fn(i) once for every i in [0, n), each index claimed by whichever thread is free
  // next: for independent items of uneven cost or on threads that do not run at the same speed
  // (a core shared with another process, a worker still waking up). Which thread runs an item
  // must not change its result -- true of the tiles of a matrix product, whose every output
  // element one item computes alone.
  void parallel_for_each(int64_t n, FunctionRef<void(int64_t)> fn);

 private:
  void worker_loop(int id);
  void stop_workers();
  void run_chunk(int64_t c) noexcept;
  void rethrow_captured();

  std::vector<std::thread> workers_;
  std::mutex entry_mu_;

  // Written by the caller, read by spinning workers: one cache line, stored together before the
  // generation bump that publishes them.
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
  const Task* job_ = nullptr;
  int64_t n_ = 0;
  int64_t chunks_ = 0;
  std::atomic<int> workers_asleep_{0};

  // Written by finishing workers, read by the waiting caller: kept off the line above so the
  // countdown does not disturb workers still spinning on the generation.
  alignas(64) std::atomic<int> pending_{0};
  std::atomic<uint32_t> done_{0};  // generation of the last completed job
  std::atomic<int> caller_asleep_{0};
  std::atomic_flag error_set_;
  std::exception_ptr error_;
};

}  // namespace cedar
