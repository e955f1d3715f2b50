#include "base/scratch.h"

#include <atomic>
#include <bit>
#include <cstdlib>
#include <new>

namespace cedar::scratch {

namespace {

constexpr int kMinClass = 6;   // 64 bytes: one cache line, the alignment
constexpr int kMaxClass = 28;  // 256 MiB: larger buffers (rare, long-running work) use the heap
constexpr int kPerClass = 64;  // freed buffers kept per class and thread
constexpr size_t kAlign = 64;

std::atomic<size_t> g_heap_acquires{0};

// Set once this thread's cache is destroyed (thread exit): a buffer released later goes back to
// the heap. A plain flag: it stays readable after the thread's other locals are gone.
thread_local bool t_cache_gone = false;

// One thread's freed buffers. Fixed arrays, so the cache itself never allocates.
struct Cache {
  void* free[kMaxClass + 1][kPerClass] = {};
  int count[kMaxClass + 1] = {};
  ~Cache() {
    t_cache_gone = true;
    for (int c = kMinClass; c <= kMaxClass; ++c)
      for (int i = 0; i < count[c]; ++i) std::free(free[c][i]);
  }
};

Cache& local() {
  thread_local Cache cache;
  return cache;
}

void* heap(size_t bytes) {
  void* p = std::aligned_alloc(kAlign, bytes);
  if (!p) throw std::bad_alloc();
  g_heap_acquires.fetch_add(1, std::memory_order_relaxed);
  return p;
}

}  // namespace

void* acquire(size_t bytes, size_t* capacity) {
  const size_t want = std::max<size_t>(bytes, size_t(1) << kMinClass);
  const int c = int(std::bit_width(want - 1));  // smallest class holding `want`
  if (c > kMaxClass) {
    *capacity = (bytes + kAlign - 1) / kAlign * kAlign;
    return heap(*capacity);
  }
  *capacity = size_t(1) << c;
  if (t_cache_gone) return heap(*capacity);
  Cache& cache = local();
  if (cache.count[c] > 0) return cache.free[c][--cache.count[c]];
  return heap(*capacity);
}

void release(void* p, size_t capacity) noexcept {
  if (!p) return;
  const int c = int(std::bit_width(capacity - 1));
  if (t_cache_gone) {
    std::free(p);
    return;
  }
  Cache& cache = local();
  if (c > kMaxClass || (size_t(1) << c) != capacity || cache.count[c] == kPerClass) {
    std::free(p);
    return;
  }
  cache.free[c][cache.count[c]++] = p;
}

size_t heap_acquires() noexcept { return g_heap_acquires.load(std::memory_order_relaxed); }

}  // namespace cedar::scratch
