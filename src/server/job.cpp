#include "server/job.h"

namespace cedar::server {

void Job::push(std::vector<CompletionEvent>* events) {
  if (events->empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& e : *events) {
      using K = CompletionEvent::Kind;
      if (!first_token_ && e.kind != K::kStarted && e.kind != K::kLogprob)
        first_token_ = Clock::now();
      queue_.push_back(std::move(e));
    }
  }
  events->clear();
  cv_.notify_all();
}

void Job::done(Outcome outcome) {
  std::function<void(const Outcome&)> f;
  {
    std::lock_guard<std::mutex> lk(mu_);
    outcome_ = std::move(outcome);
    finished_ = true;
    done_at_ = Clock::now();
    CompletionEvent e;
    e.kind = CompletionEvent::Kind::kDone;
    queue_.push_back(std::move(e));
    f = std::move(when_done_);
  }
  cv_.notify_all();
  if (f) f(outcome_);  // (outcome_ no longer changes)
}

void Job::when_done(std::function<void(const Outcome&)> f) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!finished_) {
      when_done_ = std::move(f);
      return;
    }
  }
  f(outcome_);
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

double Job::seconds_to_first_token() const {
  std::lock_guard<std::mutex> lk(mu_);
  return first_token_ ? std::chrono::duration<double>(*first_token_ - created_).count() : -1.0;
}

double Job::seconds_to_done() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_at_ ? std::chrono::duration<double>(*done_at_ - created_).count() : -1.0;
}

Outcome Job::outcome() const {
  std::lock_guard<std::mutex> lk(mu_);
  return outcome_;
}

}  // namespace cedar::server
