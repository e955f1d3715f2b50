#include "vision/resample.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace cedar::vision {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // fixed-point coefficient bits (PIL's PRECISION_BITS)

// ref: Pillow bicubic_filter (a = -0.5)
double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// For each output index: the first input index, how many follow, and their fixed-point weights.
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int> k;  // [out, ksize]
};

// ref: Pillow precompute_coeffs + normalize_coeffs_8bpc, for the box [0, in_size)
Taps taps_for(int in_size, int out_size) {
  const double scale = double(in_size) / double(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 2.0 * filterscale;
  Taps t;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.k.assign(size_t(out_size) * size_t(t.ksize), 0);
  std::vector<double> w(size_t(t.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);  // truncation, as C's (int) cast
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[size_t(x)] = bicubic((x + xmin - center + 0.5) * ss);
      ww += w[size_t(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[size_t(x)] / ww : w[size_t(x)];
      const double f = v * double(1 << kPrecisionBits);
      t.k[size_t(xx) * size_t(t.ksize) + size_t(x)] = v < 0 ? int(-0.5 + f) : int(0.5 + f);
    }
    t.first[size_t(xx)] = xmin;
    t.count[size_t(xx)] = xmax;
  }
  return t;
}

inline uint8_t clip8(int v) {
  return uint8_t(std::clamp(v >> kPrecisionBits, 0, 255));  // arithmetic shift, as PIL's table
}

RgbImage horizontal(const RgbImage& in, int out_w) {
  const Taps t = taps_for(in.width, out_w);
  RgbImage out(out_w, in.height);
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* src = in.row(y);
    uint8_t* dst = out.row(y);
    for (int xx = 0; xx < out_w; ++xx) {
      const int* k = &t.k[size_t(xx) * size_t(t.ksize)];
      const uint8_t* s = src + size_t(t.first[size_t(xx)]) * 3;
      int s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < t.count[size_t(xx)]; ++x) {
        s0 += s[3 * x] * k[x];
        s1 += s[3 * x + 1] * k[x];
        s2 += s[3 * x + 2] * k[x];
      }
      dst[3 * xx] = clip8(s0);
      dst[3 * xx + 1] = clip8(s1);
      dst[3 * xx + 2] = clip8(s2);
    }
  }
  return out;
}

RgbImage vertical(const RgbImage& in, int out_h) {
  const Taps t = taps_for(in.height, out_h);
  RgbImage out(in.width, out_h);
  const size_t row = size_t(in.width) * 3;
  for (int yy = 0; yy < out_h; ++yy) {
    const int* k = &t.k[size_t(yy) * size_t(t.ksize)];
    const uint8_t* s = in.row(t.first[size_t(yy)]);
    uint8_t* dst = out.row(yy);
    for (size_t i = 0; i < row; ++i) {
      int acc = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < t.count[size_t(yy)]; ++y) acc += s[size_t(y) * row + i] * k[y];
      dst[i] = clip8(acc);
    }
  }
  return out;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& in, int width, int height) {
  if (width <= 0 || height <= 0 || in.width <= 0 || in.height <= 0)
    throw std::invalid_argument("resize_bicubic: empty image or size");
  if (width == in.width && height == in.height) return in;  // PIL copies
  // ref: Pillow ImagingResampleInner -- a pass runs only when its side changes
  if (width == in.width) return vertical(in, height);
  RgbImage h = horizontal(in, width);
  return height == in.height ? h : vertical(h, height);
}

}  // namespace cedar::vision
