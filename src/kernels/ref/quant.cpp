// Reference quantizers and exact dequantizers. ref: kernel.py act_quant / fp4_act_quant
// (NUMERICS §Q). Inputs are bf16 values carried in fp32.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "kernels/ref/ref.h"
#include "numerics/fmath.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"

namespace cedar::kernels::ref {

namespace {

// The kernels multiply by the reciprocal held as an fp32 constant (kernel.py fp8_max_inv).
const float kFp8MaxInv = float(1.0 / 448.0);
const float kFp4MaxInv = float(1.0 / 6.0);

float block_amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

uint8_t pow2_code(float s) { return uint8_t(std::bit_cast<uint32_t>(s) >> 23); }

}  // namespace

uint8_t e4m3_rne(float x) {
  // Same result as numerics f32_to_e4m3 for every non-NaN input (tested exhaustively over the
  // binades), without libm: RNE of the fp32 mantissa to 3 bits, subnormals by the 2^14 trick.
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  float a = std::bit_cast<float>(u & 0x7fffffffu);
  if (!(a < 448.0f)) return std::isnan(x) ? 0x7f : uint8_t(sign | 0x7e);  // saturate
  if (a < 0.015625f) {  // below 2^-6: multiples of 2^-9 (the fp32 add rounds to nearest even)
    const float v = (a + 16384.0f) - 16384.0f;
    return uint8_t(sign | uint8_t(int(v * 512.0f)));  // 8 (= 2^-6) is also the first normal code
  }
  uint32_t b = std::bit_cast<uint32_t>(a);
  b += 0x7ffffu + ((b >> 20) & 1u);  // round the 23-bit mantissa to 3 bits, ties to even
  b &= ~0xfffffu;
  const float v = std::bit_cast<float>(b);
  if (v >= 448.0f) return uint8_t(sign | 0x7e);
  const int E = int(b >> 23) - 127;  // in [-6, 8]
  return uint8_t(sign | uint8_t(((E + 7) << 3) | ((b >> 20) & 7u)));
}

float fast_round_scale(float amax, float inv) {
  const float t = amax * inv;  // fp32 multiply
  const uint32_t bits = std::bit_cast<uint32_t>(t);
  const uint32_t e = (bits >> 23) & 0xffu, m = bits & 0x7fffffu;
  return std::bit_cast<float>((e + (m != 0 ? 1u : 0u)) << 23);
}

void act_quant(const float* x, int n, uint8_t* codes, uint8_t* scales) {
  for (int b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    // amax floor 1e-4 (fp32): an all-zero block still gets a finite scale (kernel.py clamp_min).
    const float amax = std::max(block_amax(xb, 32), 1e-4f);
    const float s = fast_round_scale(amax, kFp8MaxInv);
    scales[b] = pow2_code(s);
    for (int i = 0; i < 32; ++i) {
      float v = std::clamp(xb[i] / s, -448.0f, 448.0f);
      codes[b * 32 + i] = e4m3_rne(v);
    }
  }
}

void fp4_act_quant_e4m3(const float* x, int n, uint8_t* packed, uint8_t* scales) {
  const float floor_amax = float(6.0 * std::ldexp(1.0, -9));
  for (int b = 0; b < n / 16; ++b) {
    const float* xb = x + b * 16;
    const float amax = std::max(block_amax(xb, 16), floor_amax);
    const uint8_t sc = e4m3_rne(amax / 6.0f);  // fp32 division, then RNE to E4M3 (saturating)
    const float s = e4m3_to_f32(sc);
    scales[b] = sc;
    for (int i = 0; i < 16; i += 2) {
      uint8_t c0 = f32_to_e2m1(std::clamp(xb[i] / s, -6.0f, 6.0f));
      uint8_t c1 = f32_to_e2m1(std::clamp(xb[i + 1] / s, -6.0f, 6.0f));
      packed[(b * 16 + i) / 2] = fp4_pack(c0, c1);
    }
  }
}

void fp4_act_quant_ue8m0(const float* x, int n, uint8_t* packed, uint8_t* scales) {
  const float floor_amax = float(6.0 * std::ldexp(1.0, -126));
  for (int b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    const float amax = std::max(block_amax(xb, 32), floor_amax);
    const float s = fast_round_scale(amax, kFp4MaxInv);
    scales[b] = pow2_code(s);
    for (int i = 0; i < 32; i += 2) {
      uint8_t c0 = f32_to_e2m1(std::clamp(xb[i] / s, -6.0f, 6.0f));
      uint8_t c1 = f32_to_e2m1(std::clamp(xb[i + 1] / s, -6.0f, 6.0f));
      packed[(b * 32 + i) / 2] = fp4_pack(c0, c1);
    }
  }
}

void dequant_fp8(const uint8_t* codes, const uint8_t* ue8m0_scales, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = fmath::e4m3(codes[i]) * fmath::ue8m0(ue8m0_scales[i / 32]);
}

void dequant_fp4_e4m3(const uint8_t* packed, const uint8_t* e4m3_scales, int n, float* out) {
  for (int i = 0; i < n; i += 2) {
    const float s = e4m3_to_f32(e4m3_scales[i / 16]);
    out[i] = e2m1_to_f32(fp4_lo(packed[i / 2])) * s;
    out[i + 1] = e2m1_to_f32(fp4_hi(packed[i / 2])) * s;
  }
}

void dequant_fp4_ue8m0(const uint8_t* packed, const uint8_t* ue8m0_scales, int n, float* out) {
  for (int i = 0; i < n; i += 2) {
    const float s = ue8m0_to_f32(ue8m0_scales[i / 32]);
    out[i] = e2m1_to_f32(fp4_lo(packed[i / 2])) * s;
    out[i + 1] = e2m1_to_f32(fp4_hi(packed[i / 2])) * s;
  }
}

}  // namespace cedar::kernels::ref
