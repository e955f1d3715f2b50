#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <climits>

#ifdef __linux__
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace cedar {

namespace {

using Clock = std::chrono::steady_clock;

// How long a waiter spins before blocking. Long enough to bridge the serial gaps between the
// parallel regions of one decode step (so those never pay a futex wake), short enough that an
// idle server drops to 0% CPU almost at once.
constexpr auto kSpinBudget = std::chrono::microseconds(100);
// Pauses between checks of the clock (a pause takes 10-150 ns depending on the CPU). Every check
// also yields: a short syscall when the core is ours, but when the thread we wait for shares our
// core (more runnable threads than cores) it runs now rather than after our time slice. Starting
// to yield only after 10 us of pauses measured 3x slower per call on a loaded 2-core machine and
// no faster with the cores to ourselves.
constexpr uint32_t kPausesPerCheck = 16;
// A gap this long between two clock reads of a spin means the thread was descheduled: there are
// more runnable threads than cores. A spinner, always runnable, then waits for its next time
// slice (milliseconds) while the thread it waits for may be the one it keeps off the core. So
// the thread blocks at once for a while instead: the kernel favours waking sleepers, which then
// schedules the pool's threads as soon as there is work (the old condvar behaviour).
constexpr auto kPreemptedGap = std::chrono::microseconds(50);
constexpr auto kMinBackoff = std::chrono::milliseconds(10);
constexpr int kMaxBackoffDoublings = 7;  // 1.28 s

// Per thread: whether spinning pays at the moment.
struct SpinPolicy {
  bool backing_off = false;
  int doublings = 0;
  Clock::time_point until{};

  bool may_spin() {
    if (!backing_off) return true;  // the common case reads no clock
    if (Clock::now() < until) return false;
    backing_off = false;
    return true;
  }
  // Preempted again soon after the last back-off ended: the load persists, back off longer.
  void preempted(Clock::time_point now) {
    const auto last = kMinBackoff * (1 << doublings);
    doublings = now - until < last ? std::min(doublings + 1, kMaxBackoffDoublings) : 0;
    until = now + kMinBackoff * (1 << doublings);
    backing_off = true;
  }
};
thread_local SpinPolicy t_spin;

// Set while a thread runs a task: a nested parallel_for then runs inline (same results).
thread_local bool t_in_task = false;
struct TaskScope {
  bool prev;
  TaskScope() : prev(t_in_task) { t_in_task = true; }
  ~TaskScope() { t_in_task = prev; }
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();  // frees the core's resources for its hyperthread sibling
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until word != old or the spin budget is spent; returns whether it changed.
bool spin_for_change(const std::atomic<uint32_t>& word, uint32_t old) {
  if (!t_spin.may_spin()) return word.load(std::memory_order_acquire) != old;
  Clock::time_point start{}, last{};  // read lazily: most waits end before the first check
  for (uint32_t i = 1;; ++i) {
    if (word.load(std::memory_order_acquire) != old) return true;
    cpu_relax();
    if (i % kPausesPerCheck != 0) continue;
    const auto now = Clock::now();
    if (i == kPausesPerCheck) start = last = now;
    if (now - last > kPreemptedGap) {
      t_spin.preempted(now);
      return false;
    }
    if (now - start > kSpinBudget) return false;
    std::this_thread::yield();
    last = now;
  }
}

// Blocks while word == old; may return spuriously. On Linux a bare futex: std::atomic::wait
// (libstdc++ 12) spins and calls sched_yield a few times of its own before sleeping, which would
// undo the back-off above on a loaded machine.
void block_while(const std::atomic<uint32_t>& word, uint32_t old) {
#ifdef __linux__
  static_assert(sizeof(word) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
#else
  word.wait(old, std::memory_order_acquire);
#endif
}

void wake_all(std::atomic<uint32_t>& word) {
#ifdef __linux__
  syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
  word.notify_all();
#endif
}

// Waits until word != old: spins, then blocks. `asleep` counts blocked waiters so that publish()
// only makes the wake syscall when someone sleeps. Both sides use seq_cst (store word / load
// asleep vs. increment asleep / load word): either the publisher sees the sleeper, or the
// sleeper sees the new value; and the futex only sleeps while word still holds `old`.
void await_change(const std::atomic<uint32_t>& word, uint32_t old, std::atomic<int>& asleep) {
  if (spin_for_change(word, old)) return;
  asleep.fetch_add(1, std::memory_order_seq_cst);
  while (word.load(std::memory_order_seq_cst) == old) block_while(word, old);
  asleep.fetch_sub(1, std::memory_order_relaxed);
}

void publish(std::atomic<uint32_t>& word, uint32_t value, std::atomic<int>& asleep) {
  word.store(value, std::memory_order_seq_cst);
  if (asleep.load(std::memory_order_seq_cst) > 0) wake_all(word);
}

}  // namespace

// hardware_concurrency() counts the whole machine; threads beyond the CPUs this process may use
// (taskset, cgroup cpusets) only time-share them.
int available_cpus() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = available_cpus();
  workers_.reserve(size_t(n_threads - 1));
  try {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (...) {
    // the system refused a thread: the started ones must be joined before the exception leaves
    // (a joinable std::thread destroyed would terminate the process)
    stop_workers();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true, std::memory_order_relaxed);
  // stop_ is published by the generation bump; wake unconditionally, the cost does not matter.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  wake_all(generation_);
  for (auto& t : workers_) t.join();
}

// Every worker takes part in every job (those past the last chunk with an empty range), so a
// worker is never more than one generation behind and the job fields are never rewritten while
// a worker may still read them.
void ThreadPool::worker_loop(int id) {
  t_in_task = true;  // a worker only ever runs chunks
  uint32_t seen = 0;
  for (;;) {
    await_change(generation_, seen, workers_asleep_);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_relaxed)) return;
    run_chunk(id);
    // acq_rel: the last one to count down has seen every other worker's writes, and passes them
    // on to the caller through done_.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) publish(done_, seen, caller_asleep_);
  }
}

void ThreadPool::run_chunk(int64_t c) noexcept {
  if (c >= chunks_) return;
  const int64_t begin = n_ * c / chunks_, end = n_ * (c + 1) / chunks_;
  try {
    (*job_)(begin, end);
  } catch (...) {
    if (!error_set_.test_and_set(std::memory_order_relaxed)) error_ = std::current_exception();
  }
}

void ThreadPool::parallel_for(int64_t n, Task fn, int64_t grain) {
  if (n <= 0) return;
  const int64_t chunks =
      std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (chunks <= 1 || t_in_task) {
    TaskScope scope;
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> entry(entry_mu_);
  job_ = &fn;
  n_ = n;
  chunks_ = chunks;
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  publish(generation_, gen, workers_asleep_);  // releases the job fields above
  {
    TaskScope scope;
    run_chunk(0);
  }
  await_change(done_, gen - 1, caller_asleep_);
  job_ = nullptr;
  rethrow_captured();
}

void ThreadPool::parallel_for_each(int64_t n, FunctionRef<void(int64_t)> fn) {
  if (n <= 0) return;
  std::atomic<int64_t> next{0};
  parallel_for(size(), [&](int64_t, int64_t) {
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
  });
}

void ThreadPool::rethrow_captured() {
  if (!error_) return;
  std::exception_ptr e = std::exchange(error_, nullptr);
  error_set_.clear(std::memory_order_relaxed);
  std::rethrow_exception(e);
}

}  // namespace cedar
