// ImagePool: where the server decodes and preprocesses the images of requests -- a few threads of
// their own under a server-wide pixel budget (server/pixel_budget.h), before admission.
//
// Why before admission, on a pool, rather than on the generation side: the prompt's length (each
// image's span) must be known when the scheduler reserves the job's KV and checks its context,
// and a slot that decoded would stall the batched passes of every other request. Why a pool
// rather than the HTTP thread: the number of decodes running at once is the pool's size, not the
// number of clients, and the HTTP thread stays free to watch its client while a worker decodes.
//
// A request's images are probed first (their headers only: format, size, the decoder's memory),
// checked against the limits, and their whole need taken from the budget at once -- at most the
// largest one's decode and preprocessing plus every image's patches, since they are decoded one
// after another. What is left once they are preprocessed (the patches) stays counted until the
// job's vision tower has read them (Job::release_image_patches). A decode stops within a row or
// a scan when the client leaves, the server stops or the image's deadline passes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/pixel_budget.h"
#include "server/task_pool.h"
#include "vision/image_decode.h"
#include "vision/image_processor.h"

namespace cedar::server {

struct ImagePoolOptions {
  int threads = 2;                            // images decoded at once
  int64_t pixel_budget = int64_t(128) << 20;  // RGB pixels in flight (128 Mpx: 384 MiB)
  int max_images = 16;                        // per request
  std::chrono::milliseconds max_wait{30000};  // for the budget, behind other requests
  std::chrono::milliseconds deadline{15000};  // to decode and preprocess one image
  vision::ImageLimits limits;                 // per image (the pool sets its interrupt)
  // The deadline's clock (tests inject one); empty: std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

struct ImageStats {
  int64_t pixels_in_flight = 0, pixels_waiting = 0, pixel_budget = 0;
  int64_t refused = 0;           // requests answered 503 because the budget stayed spent
  int64_t stopped_client = 0;    // image work dropped because its client left
  int64_t stopped_deadline = 0;  // decodes stopped at the deadline
  int64_t stopped_shutdown = 0;  // decodes stopped by stop()
};

class ImagePool {
 public:
  explicit ImagePool(ImagePoolOptions opt);
  ~ImagePool();  // stop(), then joins the threads
  ImagePool(const ImagePool&) = delete;
  ImagePool& operator=(const ImagePool&) = delete;

  // A request's images (the files' bytes, in order) decoded and preprocessed for `g`, one after
  // another on the pool's threads; each result holds its pixels in the budget until it is
  // freed. `gone` (may be empty) says whether the client left; it is polled while the request
  // waits. Throws ApiError: 400 naming the image and what is wrong with it (or too many images,
  // or more than the whole budget), 503 when the budget stays spent or the server stops, 499
  // when the client left.
  std::vector<std::shared_ptr<const vision::ImagePatches>> preprocess(
      const vision::VisionGeometry& g, std::vector<std::string> encoded,
      const std::function<bool()>& gone);

  // Refuses new work and stops what runs (within a row or a scan): for shutdown.
  void stop();

  const ImagePoolOptions& options() const { return opt_; }
  ImageStats stats() const;

 private:
  enum class Stop { kNone, kClient, kDeadline, kShutdown };
  struct Task;
  struct Plan;
  std::vector<Plan> plan(const vision::VisionGeometry& g,
                         const std::vector<std::string>& encoded) const;
  std::shared_ptr<PixelBudget::Lease> take(int64_t pixels, const std::function<bool()>& gone);
  std::shared_ptr<vision::ImagePatches> run_one(std::shared_ptr<Task> t,
                                                const std::function<bool()>& gone);
  void work(Task& t);
  std::chrono::steady_clock::time_point now() const;

  const ImagePoolOptions opt_;
  const std::shared_ptr<PixelBudget> budget_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> refused_{0}, stopped_client_{0}, stopped_deadline_{0}, stopped_shutdown_{0};
  TaskPool threads_;  // last: destroyed (joined) first, while the rest still exists
};

}  // namespace cedar::server
