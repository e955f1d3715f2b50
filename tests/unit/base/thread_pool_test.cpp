#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace cedar {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceAndNestsInline) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 5, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) {
          hits[size_t(i)]++;
          pool.parallel_for(3, [](int64_t, int64_t) {});  // nested: runs inline
        }
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, RethrowsTaskExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](int64_t a, int64_t) {
                                   if (a > 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  int64_t total = 0;
  pool.parallel_for(10, [&](int64_t a, int64_t b) {
    if (a == 0) total = b;  // the pool still works afterwards
  });
  EXPECT_GT(total, 0);
}

}  // namespace
}  // namespace cedar
