// PixelBudget: the server-wide bound on image memory in flight, counted in RGB pixels (3 bytes):
// images being decoded and preprocessed, and the patches of preprocessed ones until the vision
// tower has read them (server/image_pool.h charges both). A request takes what its images need
// as one Lease before any of them is decoded, so it never holds part of the budget while it
// waits for more. Requests wait in arrival order -- a large one is not overtaken forever by small
// ones -- and the wait is bounded three ways: the pixels already waiting (at most one budget's
// worth, beyond which a request is refused at once), a time limit, and the client (a waiter
// whose client left, or a server that stops, gives up its place at once).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace cedar::server {

// Held by shared_ptr: a Lease keeps its budget alive (patches may outlive the server's parts).
class PixelBudget : public std::enable_shared_from_this<PixelBudget> {
 public:
  explicit PixelBudget(int64_t capacity);
  PixelBudget(const PixelBudget&) = delete;
  PixelBudget& operator=(const PixelBudget&) = delete;

  // Pixels taken from the budget, given back when the last owner lets go (the request, the
  // decode still running for it, the patches waiting for the tower).
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    int64_t pixels() const { return pixels_; }
    // Gives back all but `pixels` (no-op when it holds no more).
    void shrink_to(int64_t pixels);

   private:
    friend class PixelBudget;
    Lease(std::shared_ptr<PixelBudget> b, int64_t pixels)
        : budget_(std::move(b)), pixels_(pixels) {}
    std::shared_ptr<PixelBudget> budget_;
    int64_t pixels_;
  };

  enum class Refusal { kNone, kTooLarge, kBusy, kTimeout, kGone, kStopping };
  struct Result {
    std::shared_ptr<Lease> lease;  // null when refused
    Refusal refusal = Refusal::kNone;
  };

  // Takes `pixels`, waiting up to `max_wait` behind earlier requests; `gone` (may be empty) is
  // polled while it waits. Refused: kTooLarge when more than the capacity is asked (it could
  // never fit), kBusy when one budget's worth already waits, kTimeout, kGone, kStopping.
  Result acquire(int64_t pixels, std::chrono::milliseconds max_wait,
                 const std::function<bool()>& gone);

  // Wakes every waiter, which gives up (kStopping); later calls are refused at once.
  void stop();

  int64_t capacity() const { return capacity_; }
  int64_t in_flight() const;
  int64_t waiting_pixels() const;
  int waiting() const;

 private:
  struct Waiter {
    int64_t pixels;
  };
  void give(int64_t pixels);

  const int64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t used_ = 0;
  int64_t waiting_pixels_ = 0;
  std::deque<const Waiter*> queue_;  // arrival order; the front is served first
  bool stopping_ = false;
};

}  // namespace cedar::server
