// The scalar reference-mode kernels (cedar::kernels::ref), exact to docs/NUMERICS.md. They back
// KernelTable "ref"; see kernel_table.h for the contract of each. Also exact dequantizers for the
// packed formats the state stores.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_table.h"

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

// The GEMM families (kernel_table.h GemmKernels). FP8/FP4 prepared rows: [K decoded E4M3 values
// | K/32 power-of-two scales]; BF16/F32 prepared rows: the row itself.
int act_floats_quant(int K);
int act_floats_plain(int K);
void prepare_quant(const float* x, int rows, int K, float* act);
void prepare_plain(const float* x, int rows, int K, float* act);
void fp8_gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
              float* out, int ldo);
void fp4_gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
              float* out, int ldo);
// fp4_gemm over ggml MXFP4 blocks (WeightFormat::kMXFP4; ws unused: the scales are in the blocks)
void mxfp4_gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
                float* out, int ldo);
void gemm_bf16w(const float* x, int M, int K, const uint8_t* w, const uint8_t* unused, int n0,
                int n1, float* out, int ldo);
void gemm_f32w(const float* x, int M, int K, const uint8_t* w, const uint8_t* unused, int n0,
               int n1, float* out, int ldo);
// The bf16-weight product over FP8 storage (WeightFormat::kFP8W): each row decoded to the bf16
// values the reference's dequantization makes, then gemm_bf16w's sum.
void gemm_fp8w(const float* x, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
               float* out, int ldo);
// The bf16-weight product over Q8B storage (WeightFormat::kQ8B, numerics/q8b.h): each row's
// exact values q x s, then gemm_bf16w's sum.
void gemm_q8b(const float* x, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
              float* out, int ldo);
// The family of a ggml block format (WeightFormat kQ8_0 .. kIQ1_M; gemm_blocks.cpp): prepared as
// FP8 rows, the weight decoded by its format's definition.
GemmKernels block_family(WeightFormat f);

void rms_norm(const float* x, int n, const uint16_t* w, float eps, float* out);
void rope(float* x, int rd, const float* cos, const float* sin, bool inverse);
void sparse_attn(const float* q, int H, int hd, const AttnKeys& keys, const float* sink,
                 float scale, float* out, float* scratch);
size_t sparse_attn_scratch(int H, int hd);
void dense_attn(const float* q, int nq, const float* k, const float* v, int n, int hd, int ld,
                float scale, float* out, int ldo, float* scratch);
size_t dense_attn_scratch(int n, int hd);
void index_scores(const int8_t* qc, const uint8_t* qe, const float* w, int IH, int ihd,
                  const uint8_t* keys, const uint8_t* key_scales, const int32_t* rows, int64_t n,
                  float* score);
void hc_split_sinkhorn(const float* mixes, const float* scale, const float* base, int hc, int iters,
                       float eps, float* pre, float* post, float* comb);
void hc_pre(const float* h, const float* mix, int hc, int D, float* x);
void hc_post(const float* y, const float* h, const float* post, const float* comb, int hc, int D,
             float* out);
void swiglu(const float* g, const float* u, int n, float limit, bool weighted, float weight,
            float* out);
void topk(const float* v, int n, int k, int* out);
int64_t add_argmax(const float* a, const float* b, int64_t n, float* out);

// The "ref" table (kernels/ref/table.cpp).
const KernelTable& table();

}  // namespace cedar::kernels::ref
