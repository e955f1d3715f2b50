// libFuzzer: an image file's bytes -> the header probe and the decoders (PNG, JPEG, WebP, GIF)
// and, when one decodes, the image processor. Corrupt, truncated and oversized images must be an
// ImageError, never a crash, a hang or a read out of bounds; and the probe, which the server
// budgets memory by before it decodes, must accept every file that decodes and report its size.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "vision/image_decode.h"
#include "vision/image_processor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cedar::vision::ImageLimits lim;
  lim.max_pixels = 1 << 20;  // keeps an iteration short; the limit check itself is exercised
  lim.max_side = 4096;
  cedar::vision::ImageInfo info;
  bool probed = false;
  try {
    info = cedar::vision::probe_image({data, size}, lim);
    probed = true;
  } catch (const cedar::vision::ImageError&) {
  }
  try {
    const cedar::vision::RgbImage img = cedar::vision::decode_image({data, size}, lim);
    if (!probed || info.width != img.width || info.height != img.height ||
        info.decode_pixels < int64_t(img.width) * img.height)
      std::abort();  // the budget would not have counted this image
    (void)cedar::vision::preprocess_image(img);
  } catch (const cedar::vision::ImageError&) {
  }
  return 0;
}
