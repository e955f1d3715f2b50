// Image decoding: PNG, JPEG, WebP and GIF (first frame) bytes -> RgbImage, with Debian's libpng,
// libjpeg-turbo, libwebp and giflib, giving the pixels PIL gives for `Image.open(...)
// .convert("RGB")` (the reference processor's first step): alpha dropped (not composited),
// palettes and grey expanded, 16-bit samples cut to their high byte, no gamma, no EXIF rotation.
// Every input is hostile: the format is sniffed from the magic bytes, the dimensions are checked
// against the limits before any pixel buffer is allocated, and a corrupt or truncated file is an
// ImageError (the server answers 400), never a crash.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "vision/image.h"

namespace cedar::vision {

class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ImageLimits {
  int64_t max_bytes = int64_t(64) << 20;   // encoded size
  int64_t max_pixels = int64_t(64) << 20;  // width * height of the decoded image (64 Mpx)
  int max_side = 32768;
};

enum class ImageFormat { kUnknown, kPng, kJpeg, kWebp, kGif };

ImageFormat sniff_image_format(std::span<const uint8_t> bytes);
const char* image_format_name(ImageFormat f);  // "png", "jpeg", "webp", "gif", "unknown"

// Throws ImageError naming the format and what is wrong.
RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

}  // namespace cedar::vision
