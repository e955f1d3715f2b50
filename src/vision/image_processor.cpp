#include "vision/image_processor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "numerics/bf16.h"
#include "vision/resample.h"

namespace cedar::vision {

namespace {

// ref: llm_grid -- ceil((best // patch) / downsample) per side
std::pair<int, int> llm_grid(int best_h, int best_w, const VisionGeometry& g) {
  auto cells = [&](int px) { return (px / g.patch + g.downsample - 1) / g.downsample; };
  return {cells(best_h), cells(best_w)};
}

int tokens_of(std::pair<int, int> grid) { return grid.first * (grid.second + 1) + 2; }

// ref: solve_resize_ratio -- the largest aspect-preserving size within max_tokens
std::pair<int, int> solve_resize(int64_t h, int64_t w, const VisionGeometry& g) {
  const double r = double(h) / double(w);
  const double max_w = std::sqrt(double(g.max_tokens - 2) / r + 0.25) - 0.5;
  const double max_h = max_w * r;
  const int64_t cell = int64_t(g.patch) * g.downsample;
  if (max_w < 1.0) return {int((g.max_tokens - 2) / 2 * cell), int(cell)};  // very tall
  if (max_h < 1.0) return {int(cell), int((g.max_tokens - 3) * cell)};      // very wide
  const double beta = std::min(double(int64_t(std::floor(max_w)) * cell) / double(w),
                               double(int64_t(std::floor(max_h)) * cell) / double(h));
  return {int(std::floor(double(h) * beta / double(g.patch))) * g.patch,
          int(std::floor(double(w) * beta / double(g.patch))) * g.patch};
}

}  // namespace

VisionGeometry geometry_of(const VisionConfig& v) {
  VisionGeometry g;
  g.patch = v.patch_size;
  g.downsample = v.downsample_ratio;
  g.max_tokens = v.max_image_tokens;
  g.min_pixels = v.min_pixels;
  g.max_wh_ratio = v.max_wh_ratio;
  return g;
}

ImagePlan plan_image(int width, int height, const VisionGeometry& g) {
  if (width <= 0 || height <= 0) throw std::invalid_argument("plan_image: an empty image");
  ImagePlan p;
  p.width = width;
  p.height = height;
  int64_t w = width, h = height;
  if (g.max_wh_ratio > 0 && double(w) > double(h) * g.max_wh_ratio)
    w = int64_t(double(h) * g.max_wh_ratio);
  if (w * h < g.min_pixels) {
    const double ratio = std::pow(double(g.min_pixels) / double(w * h), 0.5);  // Python's ** 0.5
    w = int64_t(double(w) * ratio);
    h = int64_t(double(h) * ratio);
  }
  int best_w = int((w + g.patch - 1) / g.patch) * g.patch;
  int best_h = int((h + g.patch - 1) / g.patch) * g.patch;
  auto grid = llm_grid(best_h, best_w, g);
  if (tokens_of(grid) > g.max_tokens) {
    std::tie(best_h, best_w) = solve_resize(h, w, g);
    grid = llm_grid(best_h, best_w, g);
    if (tokens_of(grid) > g.max_tokens)
      throw std::logic_error("plan_image: the solved size still exceeds max_tokens");
  }
  p.best_width = best_w;
  p.best_height = best_h;
  p.n_vit_h = best_h / g.patch;
  p.n_vit_w = best_w / g.patch;
  p.n_llm_h = grid.first;
  p.n_llm_w = grid.second;
  return p;
}

int64_t patch_pixels(const ImagePlan& p) { return 2 * int64_t(p.best_width) * p.best_height; }

int64_t preprocess_pixels(const ImagePlan& p) {
  const int64_t best = int64_t(p.best_width) * p.best_height;
  return int64_t(p.best_width) * std::max(p.height, p.best_height) + 2 * best + patch_pixels(p);
}

// ref: PIL ImageOps.contain + pad
RgbImage letterbox(const RgbImage& img, int width, int height) {
  const double im_ratio = double(img.width) / double(img.height);
  const double dest_ratio = double(width) / double(height);
  int rw = width, rh = height;
  if (im_ratio != dest_ratio) {
    // Python's round() is half-to-even, as nearbyint in the default rounding mode
    if (im_ratio > dest_ratio)
      rh = int(std::nearbyint(double(img.height) / double(img.width) * double(width)));
    else
      rw = int(std::nearbyint(double(img.width) / double(img.height) * double(height)));
  }
  RgbImage resized = resize_bicubic(img, rw, rh);
  if (rw == width && rh == height) return resized;
  RgbImage out(width, height);
  std::fill(out.rgb.begin(), out.rgb.end(), uint8_t(127));
  const int x0 = rw != width ? int(std::nearbyint((width - rw) * 0.5)) : 0;
  const int y0 = rw != width ? 0 : int(std::nearbyint((height - rh) * 0.5));
  for (int y = 0; y < rh; ++y)
    std::memcpy(out.row(y0 + y) + size_t(x0) * 3, resized.row(y), size_t(rw) * 3);
  return out;
}

ImagePatches preprocess_image(const RgbImage& img, const VisionGeometry& g) {
  ImagePatches out;
  out.plan = plan_image(img.width, img.height, g);
  const ImagePlan& p = out.plan;
  const bool plain = g.max_wh_ratio > 0 && double(img.width) >= g.max_wh_ratio * img.height;
  const RgbImage px = plain ? resize_bicubic(img, p.best_width, p.best_height)
                            : letterbox(img, p.best_width, p.best_height);
  // x / 255, then (x - 0.5) / 0.5, in fp32 as the reference's tensors, then bf16: 256 values
  uint16_t lut[256];
  for (int v = 0; v < 256; ++v) {
    const float x = float(v) / 255.0f;
    lut[v] = f32_to_bf16_bits((x - 0.5f) / 0.5f);
  }
  const int P = g.patch;
  out.patch_dim = 3 * P * P;
  out.bf16.resize(size_t(p.n_vit_h) * size_t(p.n_vit_w) * size_t(out.patch_dim));
  uint16_t* dst = out.bf16.data();
  for (int ph = 0; ph < p.n_vit_h; ++ph)
    for (int pw = 0; pw < p.n_vit_w; ++pw)
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < P; ++y) {
          const uint8_t* row = px.row(ph * P + y) + size_t(pw) * P * 3 + c;
          for (int x = 0; x < P; ++x) *dst++ = lut[row[3 * x]];
        }
  return out;
}

std::vector<int8_t> image_token_types(int n_llm_h, int n_llm_w) {
  std::vector<int8_t> t;
  t.reserve(size_t(n_llm_h) * size_t(n_llm_w + 1) + 2);
  t.push_back(kImageStart);
  for (int y = 0; y < n_llm_h; ++y) {
    t.insert(t.end(), size_t(n_llm_w), int8_t(kImage));
    t.push_back(kImageNewline);
  }
  t.push_back(kImageEnd);
  return t;
}

}  // namespace cedar::vision
