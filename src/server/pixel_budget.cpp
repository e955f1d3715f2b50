#include "server/pixel_budget.h"

#include <algorithm>

namespace cedar::server {

namespace {
// How often a waiter looks at its client (a peek at the socket) while nothing else wakes it.
constexpr std::chrono::milliseconds kPoll{20};
}  // namespace

PixelBudget::PixelBudget(int64_t capacity) : capacity_(std::max<int64_t>(1, capacity)) {}

PixelBudget::Lease::~Lease() { budget_->give(pixels_); }

void PixelBudget::Lease::shrink_to(int64_t pixels) {
  if (pixels >= pixels_) return;
  budget_->give(pixels_ - std::max<int64_t>(0, pixels));
  pixels_ = std::max<int64_t>(0, pixels);
}

void PixelBudget::give(int64_t pixels) {
  if (pixels <= 0) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    used_ -= pixels;
  }
  cv_.notify_all();
}

PixelBudget::Result PixelBudget::acquire(int64_t pixels, std::chrono::milliseconds max_wait,
                                         const std::function<bool()>& gone) {
  pixels = std::max<int64_t>(0, pixels);
  if (pixels > capacity_) return {nullptr, Refusal::kTooLarge};
  std::unique_lock<std::mutex> lk(mu_);
  if (stopping_) return {nullptr, Refusal::kStopping};
  auto granted = [&] {
    used_ += pixels;
    return Result{std::shared_ptr<Lease>(new Lease(shared_from_this(), pixels)), Refusal::kNone};
  };
  if (queue_.empty() && used_ + pixels <= capacity_) return granted();
  // Waiting: at most one budget's worth may, so that a queue drains in about the time two
  // budgets' worth of images take (a request alone may always wait its turn).
  if (!queue_.empty() && waiting_pixels_ + pixels > capacity_) return {nullptr, Refusal::kBusy};
  const Waiter me{pixels};
  queue_.push_back(&me);
  waiting_pixels_ += pixels;
  auto leave = [&](Refusal why) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), &me));
    waiting_pixels_ -= pixels;
    cv_.notify_all();  // the next one may be at the front now
    return Result{nullptr, why};
  };
  const auto until = std::chrono::steady_clock::now() + max_wait;
  for (;;) {
    if (stopping_) return leave(Refusal::kStopping);
    if (queue_.front() == &me && used_ + pixels <= capacity_) {
      leave(Refusal::kNone);
      return granted();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return leave(Refusal::kTimeout);
    cv_.wait_for(lk, std::min<std::chrono::steady_clock::duration>(kPoll, until - now));
    if (gone) {  // a peek at a socket: not under the lock
      lk.unlock();
      const bool left = gone();
      lk.lock();
      if (left) return leave(Refusal::kGone);
    }
  }
}

void PixelBudget::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

int64_t PixelBudget::in_flight() const {
  std::lock_guard<std::mutex> lk(mu_);
  return used_;
}

int64_t PixelBudget::waiting_pixels() const {
  std::lock_guard<std::mutex> lk(mu_);
  return waiting_pixels_;
}

int PixelBudget::waiting() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(queue_.size());
}

}  // namespace cedar::server
