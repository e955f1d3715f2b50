#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace cedar {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// The ranges handed out by one parallel_for, sorted by begin.
Ranges ranges_of(ThreadPool& pool, int64_t n, int64_t grain) {
  Ranges got;
  std::mutex mu;
  pool.parallel_for(
      n,
      [&](int64_t a, int64_t b) {
        std::lock_guard<std::mutex> lock(mu);
        got.emplace_back(a, b);
      },
      grain);
  std::sort(got.begin(), got.end());
  return got;
}

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

// parallel_for_each: every index exactly once, the work balanced across threads when one item
// is slow (the others take the rest), exceptions passed on, nested calls inline.
TEST(ThreadPool, ForEachRunsEveryIndexOnceAndBalances) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 500}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for_each(n, [&](int64_t i) {
        hits[size_t(i)]++;
        pool.parallel_for_each(2, [](int64_t) {});  // nested: runs inline
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
  // item 0 blocks until all the others are done: a static split would deadlock
  ThreadPool pool(2);
  const int64_t n = 40;
  std::atomic<int64_t> done{0};
  pool.parallel_for_each(n, [&](int64_t i) {
    if (i == 0) {
      while (done.load() < n - 1) std::this_thread::yield();
    } else {
      done++;
    }
  });
  EXPECT_EQ(done.load(), n - 1);
  EXPECT_THROW(pool.parallel_for_each(9,
                                      [](int64_t i) {
                                        if (i == 4) throw std::runtime_error("item 4");
                                      }),
               std::runtime_error);
}

TEST(ThreadPool, ChunksAreContiguousAtLeastGrainAndAtMostSize) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 13, 64, 1001}) {
      for (int64_t grain : {0, 1, 2, 3, 5, 16, 2000}) {
        const Ranges r = ranges_of(pool, n, grain);
        ASSERT_FALSE(r.empty());
        EXPECT_LE(r.size(), size_t(threads));
        EXPECT_EQ(r.front().first, 0);
        EXPECT_EQ(r.back().second, n);
        for (size_t i = 0; i < r.size(); ++i) {
          if (i > 0) {
            EXPECT_EQ(r[i].first, r[i - 1].second) << "n=" << n << " grain=" << grain;
          }
          if (r.size() > 1) {
            EXPECT_GE(r[i].second - r[i].first, grain) << "n=" << n << " grain=" << grain;
          }
        }
      }
    }
  }
}

TEST(ThreadPool, NoCallForEmptyRanges) {
  ThreadPool pool(4);
  for (int64_t n : {0, -1, -100}) {
    bool called = false;
    pool.parallel_for(n, [&](int64_t, int64_t) { called = true; });
    EXPECT_FALSE(called);
  }
  EXPECT_EQ(ranges_of(pool, 2, 1).size(), 2u);  // n < threads: one chunk per index
}

TEST(ThreadPool, ChunkCGoesToThreadC) {
  ThreadPool pool(3);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> owner(3);
  pool.parallel_for(3, [&](int64_t a, int64_t) { owner[size_t(a)] = std::this_thread::get_id(); });
  EXPECT_EQ(owner[0], caller);
  EXPECT_NE(owner[1], caller);
  EXPECT_NE(owner[2], caller);
  EXPECT_NE(owner[1], owner[2]);
}

// A sum whose rounding depends on how [0, n) is cut: equal across pools only if the ranges are.
double chunked_sum(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<double> partial(size_t(n), 0.0);
  pool.parallel_for(
      n,
      [&](int64_t a, int64_t b) {
        double s = 0;
        for (int64_t i = a; i < b; ++i) s += 1.0 / double(i + 1);
        partial[size_t(a)] = s;
      },
      grain);
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

TEST(ThreadPool, PerIndexResultsIdenticalAcrossThreadCounts) {
  auto compute = [](int threads, int64_t n, int64_t grain) {
    ThreadPool pool(threads);
    std::vector<double> out(static_cast<size_t>(n));
    pool.parallel_for(
        n,
        [&](int64_t a, int64_t b) {
          for (int64_t i = a; i < b; ++i) out[size_t(i)] = std::sin(double(i)) / double(i + 1);
        },
        grain);
    return out;
  };
  for (int64_t n : {1, 3, 17, 1000}) {
    for (int64_t grain : {1, 7, 100}) {
      const std::vector<double> one = compute(1, n, grain);
      for (int threads = 2; threads <= 4; ++threads) EXPECT_EQ(compute(threads, n, grain), one);
    }
  }
}

TEST(ThreadPool, ResultsDependOnlyOnNGrainAndSize) {
  for (int threads = 1; threads <= 4; ++threads) {
    ThreadPool a(threads), b(threads);
    for (int64_t n : {1, 3, 17, 1000, 12345}) {
      for (int64_t grain : {1, 7, 100}) {
        EXPECT_EQ(ranges_of(a, n, grain), ranges_of(b, n, grain));
        const double first = chunked_sum(a, n, grain);
        for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(chunked_sum(b, n, grain), first);
      }
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

int64_t sum_of_indices(ThreadPool& pool, int64_t n) {
  std::atomic<int64_t> sum{0};
  pool.parallel_for(n, [&](int64_t a, int64_t b) {
    int64_t s = 0;
    for (int64_t i = a; i < b; ++i) s += i;
    sum += s;
  });
  return sum.load();
}

TEST(ThreadPool, RethrowsFromCallerAndWorkerChunksThenStaysUsable) {
  ThreadPool pool(4);
  for (int64_t bad : {0, 1, 3}) {  // chunk 0 runs on the caller, the others on workers
    for (int rep = 0; rep < 20; ++rep) {
      EXPECT_THROW(pool.parallel_for(4,
                                     [&](int64_t a, int64_t) {
                                       if (a == bad) throw std::logic_error("chunk");
                                     }),
                   std::logic_error);
      EXPECT_EQ(sum_of_indices(pool, 100), 4950);
    }
  }
  // every chunk throws: exactly one exception comes out
  EXPECT_THROW(pool.parallel_for(4, [](int64_t, int64_t) { throw std::out_of_range("all"); }),
               std::out_of_range);
  EXPECT_EQ(sum_of_indices(pool, 100), 4950);
}

TEST(ThreadPool, NestedCallsRunInlineOnTheSameThread) {
  ThreadPool pool(3);
  std::atomic<int> mismatches{0}, inner_calls{0};
  pool.parallel_for(3, [&](int64_t, int64_t) {
    const auto me = std::this_thread::get_id();
    pool.parallel_for(100, [&](int64_t a, int64_t b) {
      inner_calls++;
      if (a != 0 || b != 100 || std::this_thread::get_id() != me) mismatches++;
    });
  });
  EXPECT_EQ(inner_calls.load(), 3);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ThreadPool, ManyTinyBackToBackCalls) {
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    int64_t total = 0;
    for (int i = 0; i < 100000; ++i) total += sum_of_indices(pool, 1 + i % 7);
    int64_t expect = 0;
    for (int i = 0; i < 100000; ++i) expect += int64_t(i % 7) * (i % 7 + 1) / 2;
    EXPECT_EQ(total, expect);
  }
}

TEST(ThreadPool, WorksAfterWorkersFallAsleep) {
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(sum_of_indices(pool, 1000), 499500);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // far past the spin budget
  }
  EXPECT_EQ(sum_of_indices(pool, 1000), 499500);
}

TEST(ThreadPool, DestroysWhileWorkersSleepOrSpin) {
  for (int threads : {1, 2, 4}) {
    ThreadPool idle(threads);  // never used: workers sleep from the start
    ThreadPool used(threads);
    EXPECT_EQ(sum_of_indices(used, 10), 45);  // destroyed right away: workers still spinning
  }
  ThreadPool slept(3);
  EXPECT_EQ(sum_of_indices(slept, 10), 45);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

TEST(ThreadPool, ConcurrentOutsideCallersAreSerialised) {
  ThreadPool pool(2);
  std::atomic<int> bad{0};
  auto hammer = [&] {
    for (int i = 0; i < 2000; ++i)
      if (sum_of_indices(pool, 64) != 2016) bad++;
  };
  std::thread other(hammer);
  hammer();
  other.join();
  EXPECT_EQ(bad.load(), 0);
}

// FunctionRef takes any callable object without copying it: named, mutable, large captures.
TEST(ThreadPool, AcceptsNamedMutableAndLargeCallables) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  const auto named = [&](int64_t a, int64_t b) { sum += b - a; };
  pool.parallel_for(10, named);
  int calls = 0;
  auto counting = [&calls, &sum](int64_t a, int64_t b) mutable {
    if (a == 0) ++calls;  // only the caller's chunk touches `calls`
    sum += b - a;
  };
  pool.parallel_for(10, counting);
  std::array<int64_t, 64> big{};
  big[7] = 3;
  pool.parallel_for(10, [&sum, big](int64_t a, int64_t b) { sum += (b - a) * big[7]; });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(sum.load(), 10 + 10 + 30);
}

TEST(ThreadPool, DefaultSizeIsAtLeastOne) {
  ThreadPool pool(0);
  EXPECT_GE(pool.size(), 1);
  EXPECT_EQ(sum_of_indices(pool, 1000), 499500);
}

// Per-call overhead of an empty two-chunk parallel_for; a measurement, not a check. Run with
//   ./build/cedar_base_tests --gtest_also_run_disabled_tests --gtest_filter='*Overhead*'
TEST(ThreadPool, DISABLED_OverheadOfEmptyCalls) {
  ThreadPool pool(2);
  constexpr int kCalls = 100000;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) pool.parallel_for(2, [](int64_t, int64_t) {});
    const std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now() - t0;
    std::printf("%d empty calls, 2 threads: %.3f us per call\n", kCalls, us.count() / kCalls);
  }
}

}  // namespace
}  // namespace cedar
