// Scratch<T>: vector semantics over this thread's buffer cache, and the cache's reuse.
#include "base/scratch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace cedar {
namespace {

TEST(Scratch, BehavesLikeAVectorOfPlainData) {
  Scratch<float> a(5);
  ASSERT_EQ(a.size(), 5u);
  for (float v : a) EXPECT_EQ(v, 0.0f);  // value-initialised, like std::vector
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i + 1);
  a.resize(3000);  // grows past the first buffer: the contents move, the tail is zero
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(a[4], 5.0f);
  EXPECT_EQ(a[5], 0.0f);
  EXPECT_EQ(a[2999], 0.0f);
  a.resize(2);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1], 2.0f);
  Scratch<int> b;
  EXPECT_TRUE(b.empty());
  for (int i = 0; i < 1000; ++i) b.push_back(i);
  ASSERT_EQ(b.size(), 1000u);
  EXPECT_EQ(b[999], 999);
  EXPECT_EQ(b.back(), 999);
  b.assign(7, -1);
  EXPECT_EQ(b.size(), 7u);
  EXPECT_EQ(b[6], -1);
  Scratch<int> c(std::move(b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(c.size(), 7u);
  b = std::move(c);
  EXPECT_EQ(b[0], -1);
  const Scratch<uint8_t> d{1, 2, 3};
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2], 3);
}

TEST(Scratch, BuffersAreAlignedForVectorLoads) {
  for (size_t n : {1, 3, 17, 1000, 100000}) {
    Scratch<float> a(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u) << n;
  }
}

TEST(Scratch, AFreedBufferIsReusedWithoutTheHeap) {
  { Scratch<float> warm(1000), warm2(300); }
  const size_t before = scratch::heap_acquires();
  for (int i = 0; i < 100; ++i) {
    Scratch<float> a(1000), b(300);  // the same size classes again
    a[999] = b[299] = 1.0f;
  }
  EXPECT_EQ(scratch::heap_acquires(), before);
  Scratch<float> big(size_t(1) << 22);  // a new class: from the heap
  EXPECT_EQ(scratch::heap_acquires(), before + 1);
}

TEST(Scratch, ABufferMayDieOnAnotherThread) {
  Scratch<double> a(4096, 2.5);
  std::thread t([moved = std::move(a)]() mutable { EXPECT_EQ(moved[4095], 2.5); });
  t.join();
  EXPECT_TRUE(a.empty());
}

TEST(Scratch, HugeBuffersBypassTheCache) {
  const size_t before = scratch::heap_acquires();
  for (int i = 0; i < 2; ++i) {
    Scratch<uint8_t> huge((size_t(1) << 28) + 64);  // above the largest cached class
    huge[huge.size() - 1] = 1;
  }
  EXPECT_EQ(scratch::heap_acquires(), before + 2);  // not kept: each one from the heap
}

}  // namespace
}  // namespace cedar
