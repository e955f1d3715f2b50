// libFuzzer: an image part's URL as a client sends it -> decode_data_url and, when it is a base64
// data URL, the image decoders and the processor (what prepare_chat does with it). Anything a
// client can send must end as "not a data URL" or an ImageError, never a crash, a hang or a read
// out of bounds.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "server/data_url.h"
#include "vision/image_decode.h"
#include "vision/image_processor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes =
      cedar::server::decode_data_url(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!bytes) return 0;
  cedar::vision::ImageLimits lim;
  lim.max_pixels = 1 << 20;  // keeps an iteration short
  lim.max_side = 4096;
  try {
    const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
    const cedar::vision::RgbImage img = cedar::vision::decode_image({p, bytes->size()}, lim);
    (void)cedar::vision::preprocess_image(img);
  } catch (const cedar::vision::ImageError&) {
  }
  return 0;
}
