// The scalar reference-mode kernels (cedar::kernels::ref), exact to docs/NUMERICS.md. They back
// KernelTable "ref"; see kernel_table.h for the contract of each. Also exact dequantizers for the
// packed formats the state stores.
#pragma once

#include <cstdint>

namespace cedar::kernels::ref {

// NUMERICS §Q fast_round_scale: 2^ceil(log2(f32(amax * inv))) via the fp32 bit pattern.
float fast_round_scale(float amax, float inv);

// fp32 -> E4M3 code, saturating RNE (bit-identical to numerics f32_to_e4m3, without libm).
uint8_t e4m3_rne(float x);

void act_quant(const float* x, int n, uint8_t* codes, uint8_t* scales);
void fp4_act_quant_e4m3(const float* x, int n, uint8_t* packed, uint8_t* scales);
void fp4_act_quant_ue8m0(const float* x, int n, uint8_t* packed, uint8_t* scales);

// Exact decoders: out[i] = value (a bf16 value in every case).
void dequant_fp8(const uint8_t* codes, const uint8_t* ue8m0_scales, int n, float* out);
void dequant_fp4_e4m3(const uint8_t* packed, const uint8_t* e4m3_scales, int n, float* out);
void dequant_fp4_ue8m0(const uint8_t* packed, const uint8_t* ue8m0_scales, int n, float* out);

void fp8_gemm(const float* xq, const float* xs, int M, int K, const uint8_t* w, const uint8_t* ws,
              int n0, int n1, float* out, int ldo);
void fp4_gemm(const float* xq, const float* xs, int M, int K, const uint8_t* w, const uint8_t* ws,
              int n0, int n1, float* out, int ldo);
void gemm_bf16w(const float* x, int M, int K, const uint16_t* w, int n0, int n1, float* out,
                int ldo);
void gemm_f32w(const float* x, int M, int K, const float* w, int n0, int n1, float* out, int ldo);

void rms_norm(const float* x, int n, const uint16_t* w, float eps, float* out);
void rope(float* x, int rd, const float* cos, const float* sin, bool inverse);
void sparse_attn(const float* q, int hd, const float* const* keys, int n_keys, float sink,
                 float scale, float* out);
void hc_split_sinkhorn(const float* mixes, const float* scale, const float* base, int hc, int iters,
                       float eps, float* pre, float* post, float* comb);
void topk(const float* v, int n, int k, int* out);

// Exact-in-practice dot products (double accumulation, fixed order): the building blocks above.
double dot_f32(const float* a, const float* b, int n);          // products exact (bf16 x bf16)
double dot_f32_bf16(const float* a, const uint16_t* b, int n);  // b raw bf16 bits

}  // namespace cedar::kernels::ref
