// Image decoding: PNG, JPEG, WebP and GIF (first frame) bytes -> RgbImage, with Debian's libpng,
// libjpeg-turbo, libwebp and giflib, giving the pixels PIL gives for `Image.open(...)
// .convert("RGB")` (the reference processor's first step): alpha dropped (not composited),
// palettes and grey expanded, 16-bit samples cut to their high byte, no gamma, no EXIF rotation.
// Every input is hostile: the format is sniffed from the magic bytes, the dimensions are checked
// against the limits before any pixel buffer is allocated, and a corrupt or truncated file is an
// ImageError (the server answers 400), never a crash. A decode can be stopped from outside
// (ImageLimits::interrupt, polled between rows and scans) and a JPEG's scans are capped, so that
// neither a client that left nor a file of thousands of scans keeps a thread busy.
#pragma once

#include <cstdint>
#include <functional>
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
  // JPEG scans. Each one is a pass over the whole image, and libjpeg accepts any number of them
  // (repeats only warn), so a small file of thousands of scans decodes for a minute; encoders
  // write 1 (baseline) to about 20 (progressive).
  int max_scans = 100;
  // Polled between rows (PNG, GIF, JPEG) and scans (JPEG): a non-null message stops the decode
  // with an ImageError that carries it. WebP, decoded by one library call, is polled only before
  // it starts (its time is linear in the pixels, which the limits bound).
  std::function<const char*()> interrupt;
};

enum class ImageFormat { kUnknown, kPng, kJpeg, kWebp, kGif };

// What a file's header declares, read without decoding its pixels.
struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0, height = 0;
  // The memory decoding it needs at its peak, in RGB pixels (3 bytes): the decoded image plus
  // what the decoder holds beside it -- a GIF's index plane, a progressive JPEG's coefficients,
  // a lossless WebP's ARGB plane, an animation's canvases.
  int64_t decode_pixels = 0;
};

ImageFormat sniff_image_format(std::span<const uint8_t> bytes);
const char* image_format_name(ImageFormat f);  // "png", "jpeg", "webp", "gif", "unknown"

// The header alone, through the same code as decode_image (so the size it reports is the one
// decode_image will see), checked against the limits. Throws ImageError as decode_image does
// for a bad header; a file whose header passes may still fail to decode.
ImageInfo probe_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

// Throws ImageError naming the format and what is wrong.
RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

}  // namespace cedar::vision
