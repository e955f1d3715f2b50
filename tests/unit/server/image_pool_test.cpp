// The server's image decoding under its pixel budget (server/pixel_budget.h, image_pool.h):
// arrival order, the bounded wait (one budget's worth may wait; time; the client; shutdown),
// refusals that name the numbers, patches that hold their pixels until freed, a decode stopped
// by its deadline -- measured on an injected clock, so as work, never as wall time -- and by a
// client that leaves while its image decodes.
#include "server/image_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "server/api_error.h"
#include "server/pixel_budget.h"

namespace cedar::server {
namespace {

using namespace std::chrono_literals;
using Refusal = PixelBudget::Refusal;

std::string corpus(const std::string& name) {
  std::ifstream f(std::string(CEDAR_SOURCE_DIR) + "/tests/fuzz/corpus/image/" + name,
                  std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Polls `cond` (another thread's progress) for up to ~10 s; the test fails if it never holds.
bool eventually(const std::function<bool()>& cond) {
  for (int i = 0; i < 10000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return cond();
}

TEST(PixelBudget, GrantsInArrivalOrderAndBoundsTheWait) {
  auto b = std::make_shared<PixelBudget>(100);
  auto first = b->acquire(60, 0ms, {});
  ASSERT_TRUE(first.lease);
  EXPECT_EQ(b->in_flight(), 60);
  EXPECT_EQ(b->acquire(101, 10s, {}).refusal, Refusal::kTooLarge);  // could never fit
  EXPECT_EQ(b->acquire(50, 0ms, {}).refusal, Refusal::kTimeout);    // no wait allowed
  PixelBudget::Result second;
  std::thread waiter([&] { second = b->acquire(60, 60s, {}); });
  ASSERT_TRUE(eventually([&] { return b->waiting() == 1; }));
  EXPECT_EQ(b->waiting_pixels(), 60);
  // one budget's worth already waits: refused at once, not queued
  EXPECT_EQ(b->acquire(50, 60s, {}).refusal, Refusal::kBusy);
  // 40 would fit now, but it arrived after the waiter: it may wait behind it, not overtake
  PixelBudget::Result third;
  std::thread small([&] { third = b->acquire(40, 60s, {}); });
  ASSERT_TRUE(eventually([&] { return b->waiting() == 2; }));
  EXPECT_EQ(b->in_flight(), 60);
  first.lease->shrink_to(10);  // 10 + 60 fits: the first waiter goes, then 10 + 60 + 40 is 110
  waiter.join();
  ASSERT_TRUE(second.lease);
  EXPECT_EQ(b->in_flight(), 70);
  EXPECT_EQ(b->waiting(), 1);
  first.lease.reset();
  small.join();
  ASSERT_TRUE(third.lease);
  EXPECT_EQ(b->in_flight(), 100);
  second.lease.reset();
  third.lease.reset();
  EXPECT_EQ(b->in_flight(), 0);
}

TEST(PixelBudget, AWaiterLeavesWithItsClientOrAtShutdown) {
  auto b = std::make_shared<PixelBudget>(10);
  auto held = b->acquire(10, 0ms, {});
  std::atomic<bool> left{false};
  PixelBudget::Result gone;
  std::thread t([&] { gone = b->acquire(5, 60s, [&] { return left.load(); }); });
  ASSERT_TRUE(eventually([&] { return b->waiting() == 1; }));
  left = true;
  t.join();
  EXPECT_EQ(gone.refusal, Refusal::kGone);
  EXPECT_EQ(b->waiting(), 0);
  PixelBudget::Result stopped;
  std::thread s([&] { stopped = b->acquire(5, 60s, {}); });
  ASSERT_TRUE(eventually([&] { return b->waiting() == 1; }));
  b->stop();
  s.join();
  EXPECT_EQ(stopped.refusal, Refusal::kStopping);
  EXPECT_EQ(b->acquire(1, 0ms, {}).refusal, Refusal::kStopping);
}

vision::VisionGeometry geometry() { return {}; }  // the release's processor

int64_t status_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const ApiError& e) {
    if (message) *message = e.what();
    return e.status();
  }
  return 200;
}

TEST(ImagePool, PatchesHoldTheirPixelsUntilFreed) {
  ImagePool pool({});
  auto patches = pool.preprocess(geometry(), {corpus("rgb.png"), corpus("still.gif")}, {});
  ASSERT_EQ(patches.size(), 2u);
  const int64_t both =
      vision::patch_pixels(patches[0]->plan) + vision::patch_pixels(patches[1]->plan);
  EXPECT_EQ(pool.stats().pixels_in_flight, both);
  std::weak_ptr<const vision::ImagePatches> watch = patches[0];
  patches[0].reset();  // the request's patches are freed together
  EXPECT_EQ(pool.stats().pixels_in_flight, both);
  patches.clear();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(pool.stats().pixels_in_flight, 0);
}

TEST(ImagePool, RefusalsNameTheImageAndTheLimit) {
  ImagePoolOptions o;
  o.max_images = 2;
  ImagePool pool(o);
  std::string why;
  EXPECT_EQ(status_of([&] { pool.preprocess(geometry(), {"a", "b", "c"}, {}); }, &why), 400);
  EXPECT_NE(why.find("holds 3 images; at most 2"), std::string::npos) << why;
  EXPECT_EQ(status_of(
                [&] {
                  pool.preprocess(geometry(), {corpus("rgb.png"), "junk"}, {});
                },
                &why),
            400);
  EXPECT_NE(why.find("bad image: image 1: image: not a PNG"), std::string::npos) << why;
  auto cut = corpus("rgb.png");
  cut.resize(cut.size() - 20);  // the header is whole, the pixels are not
  EXPECT_EQ(status_of([&] { pool.preprocess(geometry(), {cut}, {}); }, &why), 400);
  EXPECT_NE(why.find("bad image: image 0: png:"), std::string::npos) << why;
  EXPECT_EQ(pool.stats().pixels_in_flight, 0);

  ImagePoolOptions tiny;
  tiny.pixel_budget = 1000;  // less than any image's patches
  ImagePool small(tiny);
  EXPECT_EQ(status_of([&] { small.preprocess(geometry(), {corpus("rgb.png")}, {}); }, &why), 400);
  EXPECT_NE(why.find("more than this server's image budget"), std::string::npos) << why;
  small.stop();
  EXPECT_EQ(status_of([&] { small.preprocess(geometry(), {corpus("rgb.png")}, {}); }), 503);
}

TEST(ImagePool, ASpentBudgetIsA503ThatSaysSo) {
  const std::string png = corpus("rgb.png");
  const auto bytes = std::span(reinterpret_cast<const uint8_t*>(png.data()), png.size());
  const vision::ImagePlan plan = vision::plan_image(8, 8, geometry());
  const int64_t work = vision::probe_image(bytes).decode_pixels + vision::preprocess_pixels(plan);
  ImagePoolOptions o;
  o.max_wait = 0ms;
  o.pixel_budget = work;  // one image being decoded, or its patches and a bit more
  ImagePool pool(o);
  auto held = pool.preprocess(geometry(), {png}, {});
  EXPECT_EQ(pool.stats().pixels_in_flight, vision::patch_pixels(plan));
  std::string why;
  EXPECT_EQ(status_of([&] { pool.preprocess(geometry(), {png}, {}); }, &why), 503);
  EXPECT_NE(why.find("busy with other requests' images"), std::string::npos) << why;
  EXPECT_EQ(pool.stats().refused, 1);
  held.clear();  // the tower has read them: the next request gets in
  EXPECT_EQ(pool.preprocess(geometry(), {png}, {}).size(), 1u);
}

// The deadline on a clock that advances one second each time it is read: the decode is stopped
// after the reads of five seconds, whatever the machine's speed.
TEST(ImagePool, DeadlineStopsADecodeByWorkDone) {
  std::atomic<int64_t> ticks{0};
  ImagePoolOptions o;
  o.deadline = 5000ms;
  o.clock = [&] { return std::chrono::steady_clock::time_point(std::chrono::seconds(++ticks)); };
  ImagePool pool(o);
  std::string why;
  EXPECT_EQ(status_of([&] { pool.preprocess(geometry(), {corpus("rgb.png")}, {}); }, &why), 400);
  EXPECT_NE(why.find("bad image: image 0: png: decoding took longer than 5 s"), std::string::npos)
      << why;
  EXPECT_EQ(pool.stats().stopped_deadline, 1);
  EXPECT_EQ(ticks.load(), 6);  // the start, then one read a row until the sixth second
  EXPECT_EQ(pool.stats().pixels_in_flight, 0);
  o.deadline = 60000ms;  // the same image within a longer deadline
  ImagePool patient(o);
  EXPECT_EQ(patient.preprocess(geometry(), {corpus("rgb.png")}, {}).size(), 1u);
}

// A client that leaves while its image decodes: the HTTP thread answers at once (499) and the
// worker stops at its next row, giving the pixels back. The worker is held inside the decode
// (its clock blocks) until the HTTP thread has left, so the order is fixed without timing.
TEST(ImagePool, AClientThatLeavesStopsItsDecode) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> reads{0};
  ImagePoolOptions o;
  o.clock = [&] {
    if (++reads == 3) {  // the worker, inside the decode (a row's poll)
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return release; });
    }
    return std::chrono::steady_clock::now();
  };
  ImagePool pool(o);
  std::atomic<bool> left{false};
  std::string why;
  std::thread client([&] {
    EXPECT_EQ(
        status_of(
            [&] { pool.preprocess(geometry(), {corpus("rgb.png")}, [&] { return left.load(); }); },
            &why),
        499);
  });
  ASSERT_TRUE(eventually([&] { return reads.load() >= 3; }));  // decoding, held
  EXPECT_GT(pool.stats().pixels_in_flight, 0);
  left = true;
  client.join();  // answered while the worker is still inside the decode
  EXPECT_NE(why.find("closed the connection"), std::string::npos) << why;
  EXPECT_GT(pool.stats().pixels_in_flight, 0);  // the worker still holds its image
  {
    std::lock_guard<std::mutex> lk(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(eventually([&] { return pool.stats().pixels_in_flight == 0; }));
  EXPECT_EQ(pool.stats().stopped_client, 1);
}

}  // namespace
}  // namespace cedar::server
