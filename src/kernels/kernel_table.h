// KernelTable: the kernel socket of the forward pass (DESIGN.md, EXAMPLES.md §7.3 and §10). One
// table per instruction set -- "ref" (the scalar reference-mode kernels, the oracle of
// docs/NUMERICS.md), "avx2", "avx512", "avx512bf16" -- chosen once at start-up (select.cpp) and
// passed by reference to every module. Names match the reference kernel.py where one exists. Every
// kernel is single-threaded over the range it is given; the modules split work across threads, so a
// kernel never sees the thread count. Activations are carried as fp32 arrays holding bf16 values.
//
// Fidelity (docs/NUMERICS.md "Fast kernels"): the quantizers, rope and top-k of every table are
// bit-exact; the products and reductions of the fast tables sum in fp32 vector lanes and are
// checked against "ref" with stated tolerances. Every table computes each output of a row from
// that row alone, in an order that does not depend on how many rows or threads share the call,
// so a row's result is the same alone, in a batch and in a chunk (batch invariance).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cedar {

// The weight formats of linear() (NUMERICS §G), as stored by the checkpoint.
enum class WeightFormat : int {
  kFP8 = 0,   // E4M3 [N, K] + UE8M0 scale [ceil(N/32), K/32]
  kFP4 = 1,   // packed E2M1 [N, K/2] (element 2j in the low nibble) + UE8M0 [N, K/32]
  kBF16 = 2,  // bf16 [N, K]
  kF32 = 3,   // fp32 [N, K]
  // E4M3 + UE8M0 stored like kFP8, in a product that does not quantize its activations: the
  // reference holds such a weight dequantized to bf16 (wo_a, convert.py), so its values are the
  // exact decoded E4M3 x scale rounded through bf16 (exact for any scale above 2^-124), and the
  // product is the bf16-weight one (fp32 out). Read in FP8: half the bytes of a bf16 copy.
  kFP8W = 4,
  // An FP8- or FP4-role weight that a GGUF file stores as ggml blocks, computed in place
  // (kernels/ggml_blocks.h; docs/NUMERICS.md "GGUF weights in place"): [N, K] as N rows of K /
  // block_elems blocks, no separate scale. The product keeps the FP8/FP4 semantics: act_quant'ed
  // activations, 32-wide K blocks summed and accumulated in fp32, a bf16 result.
  kQ8_0 = 5,
  kQ4_0 = 6,
  kQ5_0 = 7,
  kQ2_K = 8,
  kQ3_K = 9,
  kQ4_K = 10,
  kQ5_K = 11,
  kQ6_K = 12,
  kIQ2_XXS = 13,
  kIQ1_S = 14,
  kIQ1_M = 15,
  // An FP4-role (or FP8-role) weight stored as ggml MXFP4 blocks (17 bytes: the UE8M0 scale, then
  // element j < 16 in the low nibble of byte j + 1, j + 16 in its high nibble): the release's FP4
  // codes and scales in another order, computed in place by each table's FP4 family reading this
  // layout -- the same values in the same order, so the same bits as kFP4. No separate scale.
  kMXFP4 = 16,
  // A bf16-role weight requantized at load (the head under `--head-type q8`, forward/
  // vocab_product.h): sign-magnitude int8 codes [N, K] (bit 7 the sign, bits 0-6 |q| <= 127) and
  // one bf16 scale per 32-value block [N, K/32]; element value q x s, exact in fp32. The product
  // is the bf16-weight one over these values: plain activation rows (bf16 values), fp32 out.
  kQ8B = 17,
};
constexpr int kWeightFormats = 18;
// the ggml block formats: [kQ8_0, kBlockFormatsEnd)
constexpr int kBlockFormatsEnd = int(WeightFormat::kMXFP4) + 1;
// The block formats' ggml type ids (model/gguf.h), in WeightFormat order from kQ8_0.
// block_format: the WeightFormat of a ggml type; false when no family computes it.
bool block_format(uint32_t ggml_type, WeightFormat* f);
uint32_t ggml_type_of(WeightFormat f);  // a block format's ggml type (0 otherwise)

// One weight format's kernel family (the llama.cpp "type traits" idea): how an activation row is
// prepared -- once per row, in the encoding the family's product wants -- and the product itself.
struct GemmKernels {
  // floats per prepared row of width K
  int (*act_floats)(int K);
  // x [rows, K] -> act [rows, act_floats(K)]. FP8/FP4: act_quant(x, 32) (bit-exact) and its
  // decoded values; BF16/F32: the row itself, possibly reordered.
  void (*prepare)(const float* x, int rows, int K, float* act);
  // out[m * ldo + (n - n0)] for rows m in [0, M) and columns n in [n0, n1) of W [N, K]:
  // FP8/FP4 the bf16-rounded block-scaled product (kernel.py fp8_gemm / fp4_gemm); BF16/F32 the
  // fp32 sum (the caller rounds where the reference holds bf16).
  void (*gemm)(const float* act, int M, int K, const uint8_t* w, const uint8_t* scale, int n0,
               int n1, float* out, int ldo);
  int n_align;  // column ranges given to gemm start at multiples of this (scale groups, panels)
};

// One key row of sparse attention, read packed (never widened in the state).
struct KeyRow {
  const uint8_t* codes;   // window: E4M3 [hd]; compressed: packed E2M1 [hd/2]
  const uint8_t* scales;  // window: UE8M0 [hd/32]; compressed: E4M3 [hd/16]
};
// The compact key list of one query (canonical-arithmetic.md): window rows oldest first, then
// the selected compressed rows in ascending row order; K = V.
struct AttnKeys {
  const KeyRow* win = nullptr;
  int n_win = 0;
  const KeyRow* comp = nullptr;
  int n_comp = 0;
};

struct KernelTable {
  std::string_view name;

  // ref: kernel.py act_quant(x, 32, "ue8m0"). x [n] (n % 32 == 0) -> E4M3 codes [n] and UE8M0
  // scale codes [n/32].
  void (*act_quant)(const float* x, int n, uint8_t* codes, uint8_t* scales);
  // ref: kernel.py fp4_act_quant(x, 16, scale_dtype=e4m3): packed E2M1 [n/2], E4M3 scales [n/16].
  void (*fp4_act_quant_e4m3)(const float* x, int n, uint8_t* packed, uint8_t* scales);
  // ref: kernel.py fp4_act_quant(x, 32) with UE8M0 scales: packed E2M1 [n/2], UE8M0 [n/32].
  void (*fp4_act_quant_ue8m0)(const float* x, int n, uint8_t* packed, uint8_t* scales);

  // linear() by weight format (index: WeightFormat).
  GemmKernels gemm[kWeightFormats];

  // ref: model.py RMSNorm.forward. x [n] bf16 values, w [n] bf16 -> out [n] bf16 values.
  void (*rms_norm)(const float* x, int n, const uint16_t* w, float eps, float* out);
  // ref: model.py apply_rotary_emb on one vector's last rd channels; cos/sin [rd/2]; the result is
  // rounded to bf16. inverse conjugates the rotation.
  void (*rope)(float* x, int rd, const float* cos, const float* sin, bool inverse);

  // ref: kernel.py sparse_attn for one query, all H heads (K = V is shared by the heads): q [H,
  // hd] bf16 values, sink [H], out [H, hd] bf16 values. scratch: sparse_attn_scratch(H, hd)
  // floats.
  void (*sparse_attn)(const float* q, int H, int hd, const AttnKeys& keys, const float* sink,
                      float scale, float* out, float* scratch);
  size_t (*sparse_attn_scratch)(int H, int hd);

  // The vision tower's attention for one head (vision.py Attention through SDPA; docs/VISION.md
  // "Arithmetic"): every query sees all n keys. q [nq, hd], k and v [n, hd] with rows `ld` floats
  // apart (the fused wqkv output), bf16 values; out [nq, hd] bf16 values, rows `ldo` apart.
  // scratch: dense_attn_scratch(n, hd) floats.
  void (*dense_attn)(const float* q, int nq, const float* k, const float* v, int n, int hd, int ld,
                     float scale, float* out, int ldo, float* scratch);
  size_t (*dense_attn_scratch)(int n, int hd);

  // ref: model.py Indexer.forward scores of one query against n index keys (NUMERICS §C):
  // qc [IH, ihd] = 2 * E2M1 value of the query codes (integers in [-12, 12]), qe [IH, ihd/32]
  // its UE8M0 scale codes, w [IH] the per-head weights; keys packed E2M1 [*, ihd/2] and their
  // UE8M0 scales [*, ihd/32]; rows (nullptr: 0..n-1) the key rows to score. score [n] bf16.
  void (*index_scores)(const int8_t* qc, const uint8_t* qe, const float* w, int IH, int ihd,
                       const uint8_t* keys, const uint8_t* key_scales, const int32_t* rows,
                       int64_t n, float* score);

  // ref: kernel.py hc_split_sinkhorn for one token: mixes [(2+hc)*hc] -> pre [hc], post [hc],
  // comb [hc*hc] (row i = input copy, column j = output copy).
  void (*hc_split_sinkhorn)(const float* mixes, const float* scale, const float* base, int hc,
                            int iters, float eps, float* pre, float* post, float* comb);
  // ref: model.py Block.hc_pre for one token: x[d] = bf16(sum_c f32(mix[c] * h[c][d])).
  void (*hc_pre)(const float* h, const float* mix, int hc, int D, float* x);
  // ref: model.py Block.hc_post for one token:
  // out[j][d] = bf16(f32(post[j] * y[d]) + sum_i f32(comb[i][j] * h[i][d])).
  void (*hc_post)(const float* y, const float* h, const float* post, const float* comb, int hc,
                  int D, float* out);
  // ref: model.py Expert.forward between the GEMMs, for one row: u = clamp(u, -L, L), g = min(g,
  // L) (limit L > 0 only), a = silu(g) * u, times `weight` when weighted; out = bf16(a).
  void (*swiglu)(const float* g, const float* u, int n, float limit, bool weighted, float weight,
                 float* out);

  // torch.topk on CUDA: the k largest of v[0..n) in radix order, ties -> lower index first.
  // Writes the chosen indices sorted ascending. Bit-exact in every table.
  void (*topk)(const float* v, int n, int k, int* out);

  // The DSpark draft's Markov step (forward/dspark.cpp): out[i] = a[i] + b[i] in fp32 for i < n
  // (n < 2^31), and the index of its first maximum -- the sequential scan that moves to i when
  // out[i] > out[best], best starting at 0 (NaN never moves it). Bit-exact in every table.
  int64_t (*add_argmax)(const float* a, const float* b, int64_t n, float* out);

  // The bf16 product with lanes over outputs, for a short-K weight kept in pack_bf16_lanes'
  // layout (forward/vocab_product.cpp keeps a vocabulary head's distinct rows so): out[i * ldo +
  // n] for rows i < m of x (bf16 values, rows ldx apart, K even) and the outputs n of groups
  // [g0, g1), 16 per group. Each output is the fp32 sum of its row's products pair by pair in
  // order (fast/gemm_lanes.h), so it depends on its row alone (batch invariance); the tolerance
  // against "ref" is that of the bf16 GEMMs. nullptr in "ref": such a product runs through
  // linear().
  void (*bf16_lanes)(const uint32_t* packed, int K, int g0, int g1, const float* x, int m, int ldx,
                     float* out, int ldo);
};

// bf16_lanes' layout of a bf16 weight w [N, K] (K even): ceil(N / 16) groups of 16 outputs, each
// [K / 2][16] dwords -- output l's words 2j (low half) and 2j + 1 -- rows past N zero.
// out: lanes_packed_words(N, K) dwords.
size_t lanes_packed_words(int N, int K);
void pack_bf16_lanes(const uint16_t* w, int N, int K, uint32_t* out);

// The table named `name` ("ref", "avx2", "avx512", "avx512bf16"); empty: CEDAR_KERNELS if set, else
// the best table this CPU supports. Throws std::runtime_error naming the value for an unknown name
// or a table the CPU cannot run.
const KernelTable& choose_kernels(std::string_view name = {});
// Every table compiled in that this CPU can run, ref first (the tests iterate these).
std::vector<const KernelTable*> supported_kernel_tables();
// Every table compiled in (whether or not this CPU runs it).
std::vector<std::string> kernel_table_names();
// One line for `run`, `serve` and `bench`: the table in use and the CPU features it was chosen
// from, e.g. "kernels avx2 (cpu: avx2 fma f16c; avx512 no)".
std::string describe_kernels(const KernelTable& k);

}  // namespace cedar
