#include "base/io_queue.h"

#include <algorithm>
#include <chrono>

namespace cedar {

IoQueue::IoQueue(std::mutex& mu, int threads, Take take, Done done)
    : mu_(mu), take_(std::move(take)), done_(std::move(done)) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { loop(); });
}

IoQueue::~IoQueue() { stop(); }

void IoQueue::push_locked(int64_t item) {
  queue_.push_back(item);
  cv_.notify_one();
}

void IoQueue::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void IoQueue::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const int64_t item = queue_.front();
    queue_.pop_front();
    const Read read = take_(item);
    lk.unlock();
    std::exception_ptr err;
    int64_t bytes = 0;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      bytes = read();
    } catch (...) {
      err = std::current_exception();
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lk.lock();
    done_(item, err, bytes, secs);
  }
}

}  // namespace cedar
