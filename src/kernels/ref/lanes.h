// Fixed-lane double accumulation for the reference kernels. GCC vector extensions: every lane is
// an independent IEEE accumulator and the final reduction order is fixed, so the result is the
// same on every ISA the code is compiled for (no reassociation, no FMA: -ffp-contract=off).
#pragma once

#include <cstring>

namespace cedar::simd {

typedef float v4sf __attribute__((vector_size(16)));
typedef double v4df __attribute__((vector_size(32)));

inline v4sf load4(const float* p) {
  v4sf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// sum over i of double(f32(a[i] * b[i])): eight double lanes, reduced in a fixed order.
inline double dot_lanes(const float* a, const float* b, int n) {
  v4df acc0 = {0, 0, 0, 0}, acc1 = {0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const v4sf p0 = load4(a + i) * load4(b + i);  // fp32 products
    const v4sf p1 = load4(a + i + 4) * load4(b + i + 4);
    acc0 += __builtin_convertvector(p0, v4df);
    acc1 += __builtin_convertvector(p1, v4df);
  }
  double tail = 0;
  for (; i < n; ++i) tail += double(a[i] * b[i]);
  const v4df s = acc0 + acc1;
  return ((s[0] + s[1]) + (s[2] + s[3])) + tail;
}

// sum over i of double(a[i]) * double(b[i]): the exact products of two fp32 values (48 bits fit
// a double), summed in the same fixed lanes (canonical rule 1 for an fp32 weight).
inline double dot_lanes_exact(const float* a, const float* b, int n) {
  v4df acc0 = {0, 0, 0, 0}, acc1 = {0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 +=
        __builtin_convertvector(load4(a + i), v4df) * __builtin_convertvector(load4(b + i), v4df);
    acc1 += __builtin_convertvector(load4(a + i + 4), v4df) *
            __builtin_convertvector(load4(b + i + 4), v4df);
  }
  double tail = 0;
  for (; i < n; ++i) tail += double(a[i]) * double(b[i]);
  const v4df s = acc0 + acc1;
  return ((s[0] + s[1]) + (s[2] + s[3])) + tail;
}

}  // namespace cedar::simd

// Hot kernels are also compiled for AVX2 and picked at load time (ifunc); same arithmetic.
#define CEDAR_MULTIVERSION __attribute__((target_clones("avx2", "default")))
