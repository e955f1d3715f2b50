// TaskPool: a fixed set of threads running queued tasks in order of arrival, for the HTTP front
// end (a request handler may block for a whole generation, so these are plain blocking threads,
// unlike base/thread_pool.h's spin-then-sleep workers for the forward's parallel regions).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cedar::server {

class TaskPool {
 public:
  explicit TaskPool(int threads);
  ~TaskPool();  // runs what is queued, then joins
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  void submit(std::function<void()> task);
  size_t queued() const;

 private:
  void work();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace cedar::server
