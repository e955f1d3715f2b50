#include "server/image_pool.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <span>

#include "server/api_error.h"

namespace cedar::server {

namespace {

// How often the HTTP thread looks at its client while a worker decodes.
constexpr std::chrono::milliseconds kPoll{20};

std::string mpx(int64_t pixels) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f Mpx", double(pixels) / double(1 << 20));
  return s;
}

ApiError bad_image(size_t k, const std::string& what) {
  return ApiError(400, "bad image: image " + std::to_string(k) + ": " + what, "messages");
}

ApiError client_gone() {
  return ApiError(499, "the client closed the connection while its images waited or decoded");
}

ApiError shutting_down() { return ApiError(503, "the server is shutting down"); }

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

// One image's decode and preprocessing, shared by the HTTP thread that waits for it and the
// worker that runs it (either may let go first: a client that left does not wait for the worker).
struct ImagePool::Task {
  std::shared_ptr<const std::vector<std::string>> files;
  size_t index = 0;
  vision::VisionGeometry geometry;
  std::shared_ptr<PixelBudget::Lease> lease;  // the worker's share: counted until it lets go
  std::atomic<bool> cancel{false};
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // guarded by mu, as the results
  std::shared_ptr<vision::ImagePatches> patches;
  std::string error;
  bool internal = false;  // the error is not the image's fault (out of memory)
  Stop stopped = Stop::kNone;
};

// What the headers say an image will cost.
struct ImagePool::Plan {
  int64_t work = 0;     // decoding and preprocessing it, its patches included
  int64_t patches = 0;  // what stays once it is preprocessed
};

ImagePool::ImagePool(ImagePoolOptions opt)
    : opt_(std::move(opt)),
      budget_(std::make_shared<PixelBudget>(opt_.pixel_budget)),
      threads_(std::max(1, opt_.threads)) {}

ImagePool::~ImagePool() { stop(); }

void ImagePool::stop() {
  stopping_ = true;
  budget_->stop();
}

std::chrono::steady_clock::time_point ImagePool::now() const {
  return opt_.clock ? opt_.clock() : std::chrono::steady_clock::now();
}

ImageStats ImagePool::stats() const {
  ImageStats s;
  s.pixels_in_flight = budget_->in_flight();
  s.pixels_waiting = budget_->waiting_pixels();
  s.pixel_budget = budget_->capacity();
  s.refused = refused_;
  s.stopped_client = stopped_client_;
  s.stopped_deadline = stopped_deadline_;
  s.stopped_shutdown = stopped_shutdown_;
  return s;
}

std::vector<ImagePool::Plan> ImagePool::plan(const vision::VisionGeometry& g,
                                             const std::vector<std::string>& encoded) const {
  std::vector<Plan> plans;
  for (size_t k = 0; k < encoded.size(); ++k) {
    try {
      const vision::ImageInfo info = vision::probe_image(bytes_of(encoded[k]), opt_.limits);
      const vision::ImagePlan p = vision::plan_image(info.width, info.height, g);
      plans.push_back({info.decode_pixels + vision::preprocess_pixels(p), vision::patch_pixels(p)});
    } catch (const vision::ImageError& e) {
      throw bad_image(k, e.what());
    }
  }
  return plans;
}

std::shared_ptr<PixelBudget::Lease> ImagePool::take(int64_t pixels,
                                                    const std::function<bool()>& gone) {
  using R = PixelBudget::Refusal;
  PixelBudget::Result r = budget_->acquire(pixels, opt_.max_wait, gone);
  switch (r.refusal) {
    case R::kNone:
      return std::move(r.lease);
    case R::kTooLarge:
      throw ApiError(400,
                     "the request's images need " + mpx(pixels) +
                         " of image memory at once (decoded and preprocessed), more than this "
                         "server's image budget of " +
                         mpx(budget_->capacity()) +
                         " (--image-budget); send fewer or smaller images",
                     "messages");
    case R::kBusy:
    case R::kTimeout:
      ++refused_;
      throw ApiError(
          503,
          "the server is busy with other requests' images (" + mpx(budget_->in_flight()) +
              " of its " + mpx(budget_->capacity()) + " image budget in use, " +
              mpx(budget_->waiting_pixels()) + " waiting" +
              (r.refusal == R::kTimeout ? ", and this request waited " +
                                              std::to_string(opt_.max_wait.count() / 1000) + " s"
                                        : std::string()) +
              "); retry later");
    case R::kGone:
      ++stopped_client_;
      throw client_gone();
    case R::kStopping:
      break;
  }
  throw shutting_down();
}

std::vector<std::shared_ptr<const vision::ImagePatches>> ImagePool::preprocess(
    const vision::VisionGeometry& g, std::vector<std::string> encoded,
    const std::function<bool()>& gone) {
  if (encoded.empty()) return {};
  if (int64_t(encoded.size()) > opt_.max_images)
    throw ApiError(400,
                   "the request holds " + std::to_string(encoded.size()) + " images; at most " +
                       std::to_string(opt_.max_images) + " are accepted per request",
                   "messages");
  if (stopping_) throw shutting_down();
  // One after another: while image k is decoded, the patches of the ones before it are held.
  const std::vector<Plan> plans = plan(g, encoded);
  int64_t need = 0, held = 0;
  for (const Plan& p : plans) {
    need = std::max(need, held + p.work);
    held += p.patches;
  }
  std::shared_ptr<PixelBudget::Lease> lease = take(need, gone);

  const auto files = std::make_shared<const std::vector<std::string>>(std::move(encoded));
  struct Held {  // the request's patches and their pixels in the budget: freed together
    std::shared_ptr<PixelBudget::Lease> lease;
    std::vector<std::shared_ptr<vision::ImagePatches>> patches;
  };
  auto out = std::make_shared<Held>();
  for (size_t k = 0; k < files->size(); ++k) {
    auto t = std::make_shared<Task>();
    t->files = files;
    t->index = k;
    t->geometry = g;
    t->lease = lease;
    out->patches.push_back(run_one(std::move(t), gone));
  }
  lease->shrink_to(held);
  out->lease = std::move(lease);
  std::vector<std::shared_ptr<const vision::ImagePatches>> result;
  for (const auto& p : out->patches)
    result.push_back(std::shared_ptr<const vision::ImagePatches>(out, p.get()));
  return result;
}

// Queues one image and waits for it, watching the client.
std::shared_ptr<vision::ImagePatches> ImagePool::run_one(std::shared_ptr<Task> t,
                                                         const std::function<bool()>& gone) {
  threads_.submit([this, t] { work(*t); });
  std::unique_lock<std::mutex> lk(t->mu);
  while (!t->done) {
    if (t->cv.wait_for(lk, kPoll, [&] { return t->done; })) break;
    lk.unlock();
    const bool left = gone && gone();
    if (left || stopping_) {
      t->cancel = true;  // the worker stops at its next row and gives back the pixels
      if (left) throw client_gone();
      throw shutting_down();
    }
    lk.lock();
  }
  switch (t->stopped) {
    case Stop::kNone:
      break;
    case Stop::kClient:  // only this thread cancels, and it threw then
      throw client_gone();
    case Stop::kShutdown:
      throw shutting_down();
    case Stop::kDeadline:
      throw bad_image(t->index, t->error);
  }
  if (t->internal)
    throw ApiError(500, "image " + std::to_string(t->index) + ": " + t->error, "messages");
  if (!t->patches) throw bad_image(t->index, t->error);
  return std::move(t->patches);
}

void ImagePool::work(Task& t) {
  Stop why = Stop::kNone;
  const auto deadline = now() + opt_.deadline;
  const std::string limit = "decoding took longer than " +
                            std::to_string(opt_.deadline.count() / 1000) +
                            " s, the limit for one image";
  // Polled by the decoders between rows and scans.
  auto interrupt = [&]() -> const char* {
    if (t.cancel)
      why = Stop::kClient;
    else if (stopping_)
      why = Stop::kShutdown;
    else if (now() >= deadline)
      why = Stop::kDeadline;
    else
      return nullptr;
    return why == Stop::kDeadline ? limit.c_str() : "stopped";
  };
  std::shared_ptr<vision::ImagePatches> patches;
  std::string error;
  bool internal = false;
  try {
    if (const char* m = interrupt()) throw vision::ImageError(m);
    vision::ImageLimits lim = opt_.limits;
    lim.interrupt = interrupt;
    const vision::RgbImage img = vision::decode_image(bytes_of((*t.files)[t.index]), lim);
    if (const char* m = interrupt()) throw vision::ImageError(m);
    patches = std::make_shared<vision::ImagePatches>(vision::preprocess_image(img, t.geometry));
  } catch (const vision::ImageError& e) {
    error = e.what();
  } catch (const std::exception& e) {  // nothing may escape a pool thread
    error = e.what();
    internal = true;
  }
  if (why == Stop::kClient) ++stopped_client_;
  if (why == Stop::kDeadline) ++stopped_deadline_;
  if (why == Stop::kShutdown) ++stopped_shutdown_;
  t.lease.reset();  // the decoded image is gone: the request's share (if any) still counts
  {
    std::lock_guard<std::mutex> lk(t.mu);
    t.patches = why == Stop::kNone ? std::move(patches) : nullptr;
    t.error = std::move(error);
    t.internal = internal;
    t.stopped = why;
    t.done = true;
  }
  t.cv.notify_all();
}

}  // namespace cedar::server
