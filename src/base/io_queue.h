// IoQueue: threads that run the reads a cache queues (forward/expert_cache.h, engram_store.h).
// A cache keeps its state under its own mutex; the queue's threads wait on that mutex's
// condition, take an item, turn it into a read while the lock is held (`take`), run the read
// without the lock (pread blocks in the kernel, so an I/O thread costs no compute and several
// reads are in flight at once: an SSD's queue depth), and report back under the lock (`done`),
// with the read's error and duration. Reads that throw never escape the thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cedar {

class IoQueue {
 public:
  using Read = std::function<int64_t()>;  // the read; returns the bytes it read
  using Take = std::function<Read(int64_t item)>;
  using Done =
      std::function<void(int64_t item, std::exception_ptr error, int64_t bytes, double seconds)>;

  // `mu` is the owner's mutex: take() and done() run with it held.
  IoQueue(std::mutex& mu, int threads, Take take, Done done);
  ~IoQueue();  // stop()
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  void push_locked(int64_t item);  // the caller holds `mu`
  // Finishes the reads in flight, drops the queued ones, joins the threads. Idempotent; must be
  // called before the state take/done touch goes away (an owner calls it first in its dtor).
  void stop();

 private:
  void loop();

  std::mutex& mu_;
  Take take_;
  Done done_;
  std::condition_variable cv_;
  std::deque<int64_t> queue_;  // guarded by mu_
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace cedar
