// Reference GEMM kernels (NUMERICS §G, §R). Block-scaled GEMMs follow kernel.py's loop: per 32-wide
// K block an exact block dot product, times the activation scale then the weight scale, added to
// an fp32 accumulator in K order. Non-block-scaled products accumulate in double (exact in
// practice) in a fixed order, so the result never depends on batching or threading.
// Speed without changing a bit: each weight row is decoded once per block of activation rows,
// and the double accumulation runs in fixed lanes (GCC vector extensions: lane-wise adds, a
// fixed final reduction order), never reassociated by the compiler.
#include <cstring>
#include <vector>

#include "forward/fmath.h"
#include "forward/kernels_ref.h"
#include "forward/simd.h"
#include "numerics/bf16.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"

namespace cedar::kernels::ref {

namespace {

using simd::dot_lanes;

struct Luts {
  float e4m3[256];
  float e2m1_lo[256], e2m1_hi[256];
  float ue8m0[256];
  Luts() {
    for (int c = 0; c < 256; ++c) {
      e4m3[c] = e4m3_to_f32(uint8_t(c));
      e2m1_lo[c] = e2m1_to_f32(fp4_lo(uint8_t(c)));
      e2m1_hi[c] = e2m1_to_f32(fp4_hi(uint8_t(c)));
      ue8m0[c] = ue8m0_to_f32(uint8_t(c));
    }
  }
};
const Luts& luts() {
  static const Luts l;
  return l;
}

// Exact dot of one 32-block of E4M3 (or E2M1 x E4M3) values: every product is exact in fp32 and
// every partial sum is exact in double (multiples of 2^-18 below 2^42), so the lane order
// changes nothing; the block result is rounded once to fp32.
inline float block_dot32(const float* a, const float* b) { return float(dot_lanes(a, b, 32)); }

constexpr int kRowBlock = 16;  // activation rows sharing one decoded weight row

}  // namespace

double dot_f32(const float* a, const float* b, int n) { return dot_lanes(a, b, n); }

double dot_f32_bf16(const float* a, const uint16_t* b, int n) {
  float wf[256];
  double s = 0;
  for (int i0 = 0; i0 < n; i0 += 256) {
    const int c = n - i0 < 256 ? n - i0 : 256;
    for (int i = 0; i < c; ++i) wf[i] = bf16_to_f32(b[i0 + i]);
    s += dot_lanes(a + i0, wf, c);
  }
  return s;
}

CEDAR_MULTIVERSION
void fp8_gemm(const float* xq, const float* xs, int M, int K, const uint8_t* w, const uint8_t* ws,
              int n0, int n1, float* out, int ldo) {
  const Luts& L = luts();
  const int kb = K / 32;
  float wrow[32];
  float acc[kRowBlock];
  for (int m0 = 0; m0 < M; m0 += kRowBlock) {
    const int mb = M - m0 < kRowBlock ? M - m0 : kRowBlock;
    for (int n = n0; n < n1; ++n) {
      const uint8_t* wr = w + size_t(n) * size_t(K);
      const uint8_t* sr = ws + size_t(n / 32) * size_t(kb);
      for (int m = 0; m < mb; ++m) acc[m] = 0.0f;
      for (int k = 0; k < kb; ++k) {
        for (int i = 0; i < 32; ++i) wrow[i] = L.e4m3[wr[k * 32 + i]];
        const float sw = L.ue8m0[sr[k]];
        for (int m = 0; m < mb; ++m) {
          const float* xr = xq + size_t(m0 + m) * size_t(K);
          const float p = block_dot32(xr + k * 32, wrow);
          // three fp32 steps, in this order (kernel.py: acc += partial * a_s * b_s)
          acc[m] = acc[m] + (p * xs[size_t(m0 + m) * size_t(kb) + size_t(k)]) * sw;
        }
      }
      for (int m = 0; m < mb; ++m)
        out[size_t(m0 + m) * size_t(ldo) + size_t(n - n0)] = round_bf16(acc[m]);
    }
  }
}

CEDAR_MULTIVERSION
void fp4_gemm(const float* xq, const float* xs, int M, int K, const uint8_t* w, const uint8_t* ws,
              int n0, int n1, float* out, int ldo) {
  const Luts& L = luts();
  const int kb = K / 32;
  float wrow[32];
  float acc[kRowBlock];
  for (int m0 = 0; m0 < M; m0 += kRowBlock) {
    const int mb = M - m0 < kRowBlock ? M - m0 : kRowBlock;
    for (int n = n0; n < n1; ++n) {
      const uint8_t* wr = w + size_t(n) * size_t(K / 2);
      const uint8_t* sr = ws + size_t(n) * size_t(kb);
      for (int m = 0; m < mb; ++m) acc[m] = 0.0f;
      for (int k = 0; k < kb; ++k) {
        for (int i = 0; i < 16; ++i) {
          const uint8_t byte = wr[k * 16 + i];
          wrow[2 * i] = L.e2m1_lo[byte];
          wrow[2 * i + 1] = L.e2m1_hi[byte];
        }
        const float sw = L.ue8m0[sr[k]];
        for (int m = 0; m < mb; ++m) {
          const float* xr = xq + size_t(m0 + m) * size_t(K);
          const float p = block_dot32(xr + k * 32, wrow);
          acc[m] = acc[m] + (p * xs[size_t(m0 + m) * size_t(kb) + size_t(k)]) * sw;
        }
      }
      for (int m = 0; m < mb; ++m)
        out[size_t(m0 + m) * size_t(ldo) + size_t(n - n0)] = round_bf16(acc[m]);
    }
  }
}

CEDAR_MULTIVERSION
void gemm_bf16w(const float* x, int M, int K, const uint16_t* w, int n0, int n1, float* out,
                int ldo) {
  std::vector<float> wf(static_cast<size_t>(K));
  for (int n = n0; n < n1; ++n) {
    const uint16_t* wr = w + size_t(n) * size_t(K);
    for (int i = 0; i < K; ++i) wf[size_t(i)] = bf16_to_f32(wr[i]);
    // products of bf16 values are exact in fp32; the double sum is exact in practice
    for (int m = 0; m < M; ++m)
      out[size_t(m) * size_t(ldo) + size_t(n - n0)] =
          fmath::round_sum(dot_lanes(x + size_t(m) * size_t(K), wf.data(), K));
  }
}

CEDAR_MULTIVERSION
void gemm_f32w(const float* x, int M, int K, const float* w, int n0, int n1, float* out, int ldo) {
  for (int n = n0; n < n1; ++n)
    for (int m = 0; m < M; ++m)  // exact products (canonical rule 1), summed exactly
      out[size_t(m) * size_t(ldo) + size_t(n - n0)] = fmath::round_sum(
          simd::dot_lanes_exact(x + size_t(m) * size_t(K), w + size_t(n) * size_t(K), K));
}

}  // namespace cedar::kernels::ref
