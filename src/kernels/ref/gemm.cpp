// Reference GEMM kernels (NUMERICS §G, §R). Block-scaled GEMMs follow kernel.py's loop: per 32-wide
// K block an exact block dot product, times the activation scale then the weight scale, added to
// an fp32 accumulator in K order. Non-block-scaled products accumulate in double (exact in
// practice) in a fixed order, so the result never depends on batching or threading.
// Speed without changing a bit: each weight row is decoded once per block of activation rows,
// and the double accumulation runs in fixed lanes (GCC vector extensions: lane-wise adds, a
// fixed final reduction order), never reassociated by the compiler.
#include <cstring>
#include <vector>

#include "kernels/ref/lanes.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"
#include "numerics/q8b.h"

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

int act_floats_quant(int K) { return K + K / 32; }
int act_floats_plain(int K) { return K; }

// act_quant every row once: the decoded E4M3 values, then the per-32 power-of-two scales
void prepare_quant(const float* x, int rows, int K, float* act) {
  std::vector<uint8_t> codes(static_cast<size_t>(K)), sc(static_cast<size_t>(K / 32));
  const Luts& L = luts();
  for (int m = 0; m < rows; ++m) {
    act_quant(x + size_t(m) * K, K, codes.data(), sc.data());
    float* a = act + size_t(m) * size_t(act_floats_quant(K));
    for (int i = 0; i < K; ++i) a[i] = L.e4m3[codes[size_t(i)]];
    for (int b = 0; b < K / 32; ++b) a[K + b] = L.ue8m0[sc[size_t(b)]];
  }
}

void prepare_plain(const float* x, int rows, int K, float* act) {
  std::memcpy(act, x, sizeof(float) * size_t(rows) * size_t(K));
}

CEDAR_MULTIVERSION
void fp8_gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
              float* out, int ldo) {
  const Luts& L = luts();
  const int kb = K / 32;
  const size_t ld = size_t(act_floats_quant(K));
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
          const float* xr = act + size_t(m0 + m) * ld;
          const float p = block_dot32(xr + k * 32, wrow);
          // three fp32 steps, in this order (kernel.py: acc += partial * a_s * b_s)
          acc[m] = acc[m] + (p * xr[K + k]) * sw;
        }
      }
      for (int m = 0; m < mb; ++m)
        out[size_t(m0 + m) * size_t(ldo) + size_t(n - n0)] = round_bf16(acc[m]);
    }
  }
}

namespace {

// Where an FP4 weight's 32-block k of row n is: its E2M1 values decoded into wrow, its UE8M0
// scale code returned. The release's layout: packed pairs [N, K/2] (element 2i in the low nibble
// of byte i) and scales [N, K/32].
struct Fp4Pairs {
  static uint8_t block(const Luts& L, const uint8_t* w, const uint8_t* ws, int K, int n, int k,
                       float* wrow) {
    const uint8_t* wr = w + size_t(n) * size_t(K / 2) + size_t(k) * 16;
    for (int i = 0; i < 16; ++i) {
      wrow[2 * i] = L.e2m1_lo[wr[i]];
      wrow[2 * i + 1] = L.e2m1_hi[wr[i]];
    }
    return ws[size_t(n) * size_t(K / 32) + size_t(k)];
  }
};
// ggml's MXFP4 blocks (WeightFormat::kMXFP4): 17 bytes per 32-block, the scale code first, then
// element i < 16 in the low nibble of byte i, i + 16 in its high nibble
struct Fp4Mxfp4 {
  static uint8_t block(const Luts& L, const uint8_t* w, const uint8_t*, int K, int n, int k,
                       float* wrow) {
    const uint8_t* b = w + (size_t(n) * size_t(K / 32) + size_t(k)) * 17;
    for (int i = 0; i < 16; ++i) {
      wrow[i] = L.e2m1_lo[b[1 + i]];
      wrow[16 + i] = L.e2m1_hi[b[1 + i]];
    }
    return b[0];
  }
};

// ref: kernel.py fp4_gemm, for either layout (the same values, so the same bits). Inlined into
// the multiversioned entry points below (clang does not clone templates).
template <class Layout>
inline __attribute__((always_inline)) void fp4_rows(const float* act, int M, int K,
                                                    const uint8_t* w, const uint8_t* ws, int n0,
                                                    int n1, float* out, int ldo) {
  const Luts& L = luts();
  const int kb = K / 32;
  const size_t ld = size_t(act_floats_quant(K));
  float wrow[32];
  float acc[kRowBlock];
  for (int m0 = 0; m0 < M; m0 += kRowBlock) {
    const int mb = M - m0 < kRowBlock ? M - m0 : kRowBlock;
    for (int n = n0; n < n1; ++n) {
      for (int m = 0; m < mb; ++m) acc[m] = 0.0f;
      for (int k = 0; k < kb; ++k) {
        const float sw = L.ue8m0[Layout::block(L, w, ws, K, n, k, wrow)];
        for (int m = 0; m < mb; ++m) {
          const float* xr = act + size_t(m0 + m) * ld;
          const float p = block_dot32(xr + k * 32, wrow);
          acc[m] = acc[m] + (p * xr[K + k]) * sw;
        }
      }
      for (int m = 0; m < mb; ++m)
        out[size_t(m0 + m) * size_t(ldo) + size_t(n - n0)] = round_bf16(acc[m]);
    }
  }
}

}  // namespace

CEDAR_MULTIVERSION
void fp4_gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
              float* out, int ldo) {
  fp4_rows<Fp4Pairs>(act, M, K, w, ws, n0, n1, out, ldo);
}
CEDAR_MULTIVERSION
void mxfp4_gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
                float* out, int ldo) {
  fp4_rows<Fp4Mxfp4>(act, M, K, w, ws, n0, n1, out, ldo);
}

CEDAR_MULTIVERSION
void gemm_bf16w(const float* x, int M, int K, const uint8_t* wb, const uint8_t*, int n0, int n1,
                float* out, int ldo) {
  const uint16_t* w = reinterpret_cast<const uint16_t*>(wb);
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
void gemm_fp8w(const float* x, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
               float* out, int ldo) {
  const Luts& L = luts();
  const int kb = K / 32;
  std::vector<float> wf(static_cast<size_t>(K));
  for (int n = n0; n < n1; ++n) {
    const uint8_t* wr = w + size_t(n) * size_t(K);
    const uint8_t* sr = ws + size_t(n / 32) * size_t(kb);
    // ref: convert.py's dequantization to bf16 (weights.cpp dequant_fp8_to_bf16 did the same)
    for (int i = 0; i < K; ++i)
      wf[size_t(i)] = bf16_to_f32(f32_to_bf16_bits(L.e4m3[wr[i]] * L.ue8m0[sr[i / 32]]));
    for (int m = 0; m < M; ++m)
      out[size_t(m) * size_t(ldo) + size_t(n - n0)] =
          fmath::round_sum(dot_lanes(x + size_t(m) * size_t(K), wf.data(), K));
  }
}

CEDAR_MULTIVERSION
void gemm_q8b(const float* x, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
              float* out, int ldo) {
  const uint16_t* sc = reinterpret_cast<const uint16_t*>(ws);
  std::vector<float> wf(static_cast<size_t>(K));
  for (int n = n0; n < n1; ++n) {
    const uint8_t* wr = w + size_t(n) * size_t(K);
    const uint16_t* sr = sc + size_t(n) * size_t(K / kQ8bBlock);
    for (int i = 0; i < K; ++i) wf[size_t(i)] = q8b_value(wr[i], sr[i / kQ8bBlock]);
    for (int m = 0; m < M; ++m)
      out[size_t(m) * size_t(ldo) + size_t(n - n0)] =
          fmath::round_sum(dot_lanes(x + size_t(m) * size_t(K), wf.data(), K));
  }
}

CEDAR_MULTIVERSION
void gemm_f32w(const float* x, int M, int K, const uint8_t* wb, const uint8_t*, int n0, int n1,
               float* out, int ldo) {
  const float* w = reinterpret_cast<const float*>(wb);
  for (int n = n0; n < n1; ++n)
    for (int m = 0; m < M; ++m)  // exact products (canonical rule 1), summed exactly
      out[size_t(m) * size_t(ldo) + size_t(n - n0)] = fmath::round_sum(
          simd::dot_lanes_exact(x + size_t(m) * size_t(K), w + size_t(n) * size_t(K), K));
}

}  // namespace cedar::kernels::ref
