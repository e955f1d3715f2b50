#include "server/job.h"

namespace cedar::server {

void Job::push(std::vector<CompletionEvent>* events) {
  if (events->empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& e : *events) queue_.push_back(std::move(e));
  }
  events->clear();
  cv_.notify_all();
}

void Job::done(Outcome outcome) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    outcome_ = std::move(outcome);
    finished_ = true;
    CompletionEvent e;
    e.kind = CompletionEvent::Kind::kDone;
    queue_.push_back(std::move(e));
  }
  cv_.notify_all();
}

bool Job::wait(std::vector<CompletionEvent>* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !queue_.empty(); })) return false;
  for (auto& e : queue_) out->push_back(std::move(e));
  queue_.clear();
  return true;
}

bool Job::finished() const {
  std::lock_guard<std::mutex> lk(mu_);
  return finished_;
}

Outcome Job::outcome() const {
  std::lock_guard<std::mutex> lk(mu_);
  return outcome_;
}

}  // namespace cedar::server
