#include "base/io_queue.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using cedar::IoQueue;

// Every queued item is taken under the owner's lock, read without it, and reported back under
// it with its bytes, or with the exception its read threw.
TEST(IoQueue, RunsEveryReadAndReportsBytesAndErrors) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> bytes(64, -1);
  std::vector<std::string> errors(64);
  int done = 0;
  {
    IoQueue q(
        mu, 4,
        [&](int64_t item) -> IoQueue::Read {
          return [item] {
            if (item % 7 == 3) throw std::runtime_error("bad " + std::to_string(item));
            return item * 10;
          };
        },
        [&](int64_t item, std::exception_ptr err, int64_t b, double seconds) {
          EXPECT_GE(seconds, 0.0);
          bytes[size_t(item)] = b;
          if (err) try {
              std::rethrow_exception(err);
            } catch (const std::exception& e) {
              errors[size_t(item)] = e.what();
            }
          ++done;
          cv.notify_all();
        });
    {
      std::lock_guard<std::mutex> lk(mu);
      for (int64_t i = 0; i < 64; ++i) q.push_locked(i);
    }
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return done == 64; });
  }
  for (int64_t i = 0; i < 64; ++i) {
    if (i % 7 == 3) {
      EXPECT_EQ(bytes[size_t(i)], 0);
      EXPECT_EQ(errors[size_t(i)], "bad " + std::to_string(i));
    } else {
      EXPECT_EQ(bytes[size_t(i)], i * 10);
      EXPECT_TRUE(errors[size_t(i)].empty());
    }
  }
}

TEST(IoQueue, StopIsIdempotentAndDropsWhatIsQueued) {
  std::mutex mu;
  int taken = 0;
  IoQueue q(
      mu, 1,
      [&](int64_t) -> IoQueue::Read {
        ++taken;
        return [] { return int64_t(1); };
      },
      [](int64_t, std::exception_ptr, int64_t, double) {});
  q.stop();
  {
    std::lock_guard<std::mutex> lk(mu);
    q.push_locked(1);  // after stop: never taken
  }
  q.stop();
  EXPECT_EQ(taken, 0);
}

}  // namespace
