#include "model/weight_quant.h"

#include <algorithm>
#include <cmath>

#include "numerics/fp4.h"
#include "numerics/fp8.h"

namespace cedar {

namespace {

// 2^-k as a float, exact for k in [-127, 127] (2^-127 is a subnormal float). x * 2^-k rounds the
// exact product once, to nearest even, exactly as std::ldexp(x, -k) does, so the codes are the
// same bytes as with ldexp; the multiply avoids a libm call per element (make-model's hot loop).
float pow2_inverse(int k) { return std::ldexp(1.0f, -k); }

float pow2(int k) { return std::ldexp(1.0f, k); }

// One block's E4M3 codes of x[j * stride] (j < n) under the scale 2^k; counts inexact values.
int64_t encode_fp8(const float* x, int64_t n, int k, uint8_t* codes) {
  const float inv = pow2_inverse(k), s = pow2(k);
  int64_t inexact = 0;
  for (int64_t j = 0; j < n; ++j) {
    codes[j] = f32_to_e4m3(x[j] * inv);
    inexact += e4m3_to_f32(codes[j]) * s != x[j];
  }
  return inexact;
}

double amax_of(const float* x, int64_t n) {
  double a = 0.0;
  for (int64_t j = 0; j < n; ++j) a = std::max(a, double(std::fabs(x[j])));
  return a;
}

}  // namespace

int pow2_scale_exponent(double amax, double limit) {
  if (!(amax > 0.0)) return 0;
  int e;
  const double m = std::frexp(amax / limit, &e);  // amax/limit = m * 2^e, m in [0.5, 1)
  const int k = m == 0.5 ? e - 1 : e;
  return std::clamp(k, -127, 127);
}

int64_t quantize_fp8_blocks(const float* w, int64_t o, int64_t i, uint8_t* codes, uint8_t* scales) {
  const int64_t sb_cols = (i + 31) / 32;
  int64_t inexact = 0;
  for (int64_t br = 0; br < (o + 31) / 32; ++br)
    for (int64_t bc = 0; bc < sb_cols; ++bc) {
      const int64_t r0 = br * 32, r1 = std::min(o, r0 + 32), c0 = bc * 32,
                    n = std::min(i, c0 + 32) - c0;
      double amax = 0.0;
      for (int64_t r = r0; r < r1; ++r) amax = std::max(amax, amax_of(w + r * i + c0, n));
      const int k = pow2_scale_exponent(amax, kE4M3Max);
      scales[br * sb_cols + bc] = uint8_t(k + 127);
      for (int64_t r = r0; r < r1; ++r)
        inexact += encode_fp8(w + r * i + c0, n, k, codes + r * i + c0);
    }
  return inexact;
}

int64_t quantize_fp8_rows(const float* w, int64_t rows, int64_t d, uint8_t* codes,
                          uint8_t* scales) {
  int64_t inexact = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < d / 32; ++b) {
      const float* x = w + r * d + b * 32;
      const int k = pow2_scale_exponent(amax_of(x, 32), kE4M3Max);
      scales[r * (d / 32) + b] = uint8_t(k + 127);
      inexact += encode_fp8(x, 32, k, codes + r * d + b * 32);
    }
  return inexact;
}

int64_t quantize_fp4(const float* w, int64_t o, int64_t i, uint8_t* packed, uint8_t* scales) {
  int64_t inexact = 0;
  for (int64_t r = 0; r < o; ++r)
    for (int64_t b = 0; b < i / 32; ++b) {
      const float* x = w + r * i + b * 32;
      const int k = pow2_scale_exponent(amax_of(x, 32), kE2M1Max);
      scales[r * (i / 32) + b] = uint8_t(k + 127);
      const float inv = pow2_inverse(k), s = pow2(k);
      auto q = [&](float v) {
        const uint8_t c = f32_to_e2m1(std::clamp(v * inv, -kE2M1Max, kE2M1Max));
        inexact += e2m1_to_f32(c) * s != v;
        return c;
      };
      for (int j = 0; j < 32; j += 2)
        packed[r * (i / 2) + b * 16 + j / 2] = fp4_pack(q(x[j]), q(x[j + 1]));
    }
  return inexact;
}

}  // namespace cedar
