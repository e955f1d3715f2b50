// Bicubic resampling of 8-bit RGB exactly as PIL's `Image.resize(size, BICUBIC)` computes it
// (Pillow's Resample.c, which the reference processor's `ImageOps.pad` calls): separable, the
// horizontal pass first, each output sample a sum over the input samples within the filter's
// support (2 input pixels, widened by the scale when shrinking) with coefficients from the
// a = -0.5 cubic, normalised to sum 1, then fixed to 22 fractional bits; the sum is rounded by
// adding half and the intermediate image is clamped to 8 bits between the passes.
#pragma once

#include "vision/image.h"

namespace cedar::vision {

// Throws std::invalid_argument on a non-positive size.
RgbImage resize_bicubic(const RgbImage& in, int width, int height);

}  // namespace cedar::vision
