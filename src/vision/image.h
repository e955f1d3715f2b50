// RgbImage: 8-bit RGB pixels, row-major, 3 bytes a pixel -- what every decoder produces and the
// image processor consumes (PIL's `convert("RGB")`, which the reference processor starts from).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cedar::vision {

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]

  RgbImage() = default;
  RgbImage(int w, int h) : width(w), height(h), rgb(size_t(w) * size_t(h) * 3) {}
  uint8_t* row(int y) { return rgb.data() + size_t(y) * size_t(width) * 3; }
  const uint8_t* row(int y) const { return rgb.data() + size_t(y) * size_t(width) * 3; }
};

}  // namespace cedar::vision
