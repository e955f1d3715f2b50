// libFuzzer: an image file's bytes -> the decoders (PNG, JPEG, WebP, GIF) and, when one decodes,
// the image processor. Corrupt, truncated and oversized images must be an ImageError, never a
// crash, a hang or a read out of bounds.
#include <cstddef>
#include <cstdint>
#include <span>

#include "vision/image_decode.h"
#include "vision/image_processor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cedar::vision::ImageLimits lim;
  lim.max_pixels = 1 << 20;  // keeps an iteration short; the limit check itself is exercised
  lim.max_side = 4096;
  try {
    const cedar::vision::RgbImage img = cedar::vision::decode_image({data, size}, lim);
    (void)cedar::vision::preprocess_image(img);
  } catch (const cedar::vision::ImageError&) {
  }
  return 0;
}
