// KernelTable: the numeric kernels of the forward pass, chosen once at startup (EXAMPLES.md §7.3)
// and passed by reference to every module. Names match the reference kernel.py. Every kernel is
// single-threaded over the range it is given; the modules split work across threads, so a kernel
// never sees the thread count. Activations are carried as fp32 arrays holding bf16 values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cedar {

struct KernelTable {
  std::string_view name;

  // ref: kernel.py act_quant(x, 32, "ue8m0"). x [n] (n % 32 == 0) -> E4M3 codes [n] and UE8M0
  // scale codes [n/32].
  void (*act_quant)(const float* x, int n, uint8_t* codes, uint8_t* scales);
  // ref: kernel.py fp4_act_quant(x, 16, scale_dtype=e4m3): packed E2M1 [n/2], E4M3 scales [n/16].
  void (*fp4_act_quant_e4m3)(const float* x, int n, uint8_t* packed, uint8_t* scales);
  // ref: kernel.py fp4_act_quant(x, 32) with UE8M0 scales: packed E2M1 [n/2], UE8M0 [n/32].
  void (*fp4_act_quant_ue8m0)(const float* x, int n, uint8_t* packed, uint8_t* scales);

  // ref: kernel.py fp8_gemm. M activation rows, already act_quant'ed and decoded: xq [M, K]
  // (E4M3 values), xs [M, K/32] (scales). Weight E4M3 [N, K] + UE8M0 [ceil(N/32), K/32]. Writes
  // the bf16 outputs of columns [n0, n1): out[m * ldo + (n - n0)].
  void (*fp8_gemm)(const float* xq, const float* xs, int M, int K, const uint8_t* w,
                   const uint8_t* ws, int n0, int n1, float* out, int ldo);
  // ref: kernel.py fp4_gemm. Weight packed E2M1 [N, K/2] + UE8M0 [N, K/32]; same contract.
  void (*fp4_gemm)(const float* xq, const float* xs, int M, int K, const uint8_t* w,
                   const uint8_t* ws, int n0, int n1, float* out, int ldo);
  // F.linear with a BF16 weight [N, K] on M bf16-valued rows x [M, K]:
  // out[m * ldo + (n - n0)] = xsum(x[m, i] * w[n, i]) in fp32 (the caller rounds to bf16 where
  // the reference holds bf16).
  void (*gemm_bf16w)(const float* x, int M, int K, const uint16_t* w, int n0, int n1, float* out,
                     int ldo);
  // F.linear with an FP32 weight: the exact products summed exactly (canonical rule 1); same
  // layout.
  void (*gemm_f32w)(const float* x, int M, int K, const float* w, int n0, int n1, float* out,
                    int ldo);

  // ref: model.py RMSNorm.forward. x [n] bf16 values, w [n] bf16 -> out [n] bf16 values.
  void (*rms_norm)(const float* x, int n, const uint16_t* w, float eps, float* out);
  // ref: model.py apply_rotary_emb on one vector's last rd channels; cos/sin [rd/2]; the result is
  // rounded to bf16. inverse conjugates the rotation.
  void (*rope)(float* x, int rd, const float* cos, const float* sin, bool inverse);
  // ref: kernel.py sparse_attn for one query head over a compact key list (K = V). keys[j] points
  // at a [hd] row of bf16 values. out [hd] bf16 values.
  void (*sparse_attn)(const float* q, int hd, const float* const* keys, int n_keys, float sink,
                      float scale, float* out);
  // ref: kernel.py hc_split_sinkhorn for one token: mixes [(2+hc)*hc] -> pre [hc], post [hc],
  // comb [hc*hc] (row i = input copy, column j = output copy).
  void (*hc_split_sinkhorn)(const float* mixes, const float* scale, const float* base, int hc,
                            int iters, float eps, float* pre, float* post, float* comb);
  // torch.topk on CUDA: the k largest of v[0..n) in radix order, ties -> lower index first.
  // Writes the chosen indices sorted ascending.
  void (*topk)(const float* v, int n, int k, int* out);
};

// "ref" (the scalar reference-mode kernels) is the only table for now; it is also the default
// (empty name). Throws std::runtime_error naming the value for an unknown name.
const KernelTable& choose_kernels(std::string_view name = {});
std::vector<std::string> kernel_table_names();

}  // namespace cedar
