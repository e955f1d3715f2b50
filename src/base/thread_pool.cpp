#include "base/thread_pool.h"

#include <algorithm>

namespace cedar {

namespace {
// Set while a thread runs a task: a nested parallel_for then runs inline (same results).
thread_local bool t_in_task = false;
struct TaskScope {
  bool prev;
  TaskScope() : prev(t_in_task) { t_in_task = true; }
  ~TaskScope() { t_in_task = prev; }
};
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int id) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_work_.wait(lk, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    auto range = ranges_[size_t(id)];
    auto* job = job_;
    lk.unlock();
    if (range.first < range.second) {
      TaskScope scope;
      try {
        (*job)(range.first, range.second);
      } catch (...) {
        std::lock_guard<std::mutex> g(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    lk.lock();
    if (--pending_ == 0) cv_done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  const int64_t nt = size();
  int64_t chunks = std::min<int64_t>(nt, std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (chunks <= 1 || workers_.empty() || t_in_task) {
    TaskScope scope;
    fn(0, n);
    return;
  }
  std::vector<std::pair<int64_t, int64_t>> ranges(size_t(nt), {0, 0});
  for (int64_t c = 0; c < chunks; ++c) ranges[size_t(c)] = {n * c / chunks, n * (c + 1) / chunks};
  {
    std::lock_guard<std::mutex> lk(mu_);
    ranges_ = ranges;
    job_ = &fn;
    pending_ = int(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  cv_work_.notify_all();
  std::exception_ptr mine;
  try {
    TaskScope scope;
    fn(ranges[0].first, ranges[0].second);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace cedar
