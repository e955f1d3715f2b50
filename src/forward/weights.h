// ModelWeights: typed views of every checkpoint tensor the forward pass reads, bound once at load
// (pointers into the memory-mapped shards; misaligned bf16/fp32 tensors are copied). Immutable
// after construction; safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "model/config.h"

namespace cedar {

// One projection weight [out, in] in whichever format the checkpoint stores it.
struct Linear {
  // in WeightFormat order; Q8_0 .. MXFP4: ggml blocks from a GGUF file, computed in place
  enum class Kind {
    FP8,
    FP4,
    BF16,
    F32,
    FP8W,
    Q8_0,
    Q4_0,
    Q5_0,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    IQ2_XXS,
    IQ1_S,
    IQ1_M,
    MXFP4,
    Q8B  // a bf16 weight requantized at load (kernel_table.h WeightFormat::kQ8B)
  };
  Kind kind = Kind::BF16;
  int out = 0, in = 0;
  // FP8 codes [out, in] | packed E2M1 [out, in/2] | bf16 | f32 | out rows of ggml blocks
  const uint8_t* w = nullptr;
  const uint8_t* scale = nullptr;  // UE8M0 [ceil(out/32), in/32] (FP8) | [out, in/32] (FP4)
  std::string name;

  WeightFormat format() const { return static_cast<WeightFormat>(int(kind)); }
  const uint16_t* bf16() const { return reinterpret_cast<const uint16_t*>(w); }
  const float* f32() const { return reinterpret_cast<const float*>(w); }
};

static_assert(int(Linear::Kind::FP8) == int(WeightFormat::kFP8) &&
              int(Linear::Kind::FP4) == int(WeightFormat::kFP4) &&
              int(Linear::Kind::BF16) == int(WeightFormat::kBF16) &&
              int(Linear::Kind::F32) == int(WeightFormat::kF32) &&
              int(Linear::Kind::FP8W) == int(WeightFormat::kFP8W) &&
              int(Linear::Kind::Q8_0) == int(WeightFormat::kQ8_0) &&
              int(Linear::Kind::Q6_K) == int(WeightFormat::kQ6_K) &&
              int(Linear::Kind::IQ1_M) == int(WeightFormat::kIQ1_M) &&
              int(Linear::Kind::MXFP4) == int(WeightFormat::kMXFP4) &&
              int(Linear::Kind::Q8B) == int(WeightFormat::kQ8B) &&
              int(Linear::Kind::Q8B) + 1 == kWeightFormats);

struct ExpertWeights {
  Linear w1, w2, w3;  // gate [inter, D], down [D, inter], up [inter, D]
};

struct LayerWeights {
  const uint16_t* attn_norm = nullptr;  // [D] bf16
  const uint16_t* ffn_norm = nullptr;
  // mHC sites (fp32): fn [(2+hc)*hc, hc*D], base [(2+hc)*hc], scale [3]
  const float *hc_attn_fn = nullptr, *hc_attn_base = nullptr, *hc_attn_scale = nullptr;
  const float *hc_ffn_fn = nullptr, *hc_ffn_base = nullptr, *hc_ffn_scale = nullptr;
  // attention
  const float* attn_sink = nullptr;   // [H]
  const uint16_t* q_norm = nullptr;   // [q_lora_rank]
  const uint16_t* kv_norm = nullptr;  // [head_dim]
  Linear wq_a, wq_b, wkv, wo_b;
  // [o_groups * o_lora_rank, H * head_dim / o_groups]: FP8W when stored FP8 (the bf16-weight
  // product over the FP8 bytes), else bf16
  Linear wo_a;
  // compressor + index keys (KV sources)
  Linear comp_wkv, comp_wgate;           // comp_wgate only for ratio > 1
  const uint16_t* comp_norm = nullptr;   // [head_dim]
  Linear idx_wk;                         // [index_head_dim, head_dim] bf16
  const uint16_t* idx_k_norm = nullptr;  // [index_head_dim]
  // indexer query (index sources)
  Linear idx_wq_b, idx_weights_proj;
  // MoE
  Linear gate;                          // [n_routed_experts, D] bf16
  const float* gate_bias = nullptr;     // [n_routed_experts]
  const float* gate_bias_vl = nullptr;  // [n_routed_experts] for image-span rows (vision models)
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;
  // Engram
  const uint8_t* engram_table = nullptr;        // E4M3 [rows, engram_head_dim]
  const uint8_t* engram_table_scale = nullptr;  // UE8M0 [rows, engram_head_dim / 32]
  // bytes from one row to the next (a directory: dense; ds4's native rows: codes and scales of a
  // row together, so both strides are head_dim + head_dim / 32)
  size_t engram_stride = 0, engram_scale_stride = 0;
  // A GGUF table stored as ggml blocks (its type id; 0: the release's E4M3 + UE8M0): engram_table
  // is then its rows of engram_stride bytes, each decoded as it is gathered, and no scale tensor.
  uint32_t engram_type = 0;
  bool engram_native = false;  // ds4's native rows: a row is checked for NaN when it is read
  int64_t engram_rows = 0;
  Linear engram_wkv;                          // [D * (hc+1), n_cols * engram_head_dim]
  const uint16_t* engram_q_weight = nullptr;  // [hc, D]
  const uint16_t* engram_k_weight = nullptr;
};

// The DSpark drafter (mtp.*): its stages (blocks without compressor, indexer or Engram), stage
// 0's context projection over the taps and the last stage's norm, Markov and confidence heads.
// The embedding and the LM head are the target's.
struct DSparkWeights {
  std::vector<LayerWeights> stages;        // empty: the model has no drafter
  Linear main_proj;                        // [D, n_taps * D]
  const uint16_t* main_norm = nullptr;     // [D]
  const uint16_t* norm = nullptr;          // [D]
  const uint16_t* markov_embed = nullptr;  // E_markov [vocab, rank] bf16
  Linear markov_head;                      // M_head [vocab, rank] bf16
  Linear confidence;                       // [1, D + rank] bf16 (used as fp32)
};

// The vision tower and the aligner (vision.*, aligner.*; v41-extras §3.2-3.3) and the image
// span's delimiter rows. ref: vision.py ViT, Block, Aligner
struct VisionBlockWeights {
  const uint16_t *norm1 = nullptr, *norm2 = nullptr;  // [V] bf16
  Linear wqkv, wo, w1, w2;                            // bf16; w1 fuses gate | up
  const uint16_t *wqkv_bias = nullptr, *wo_bias = nullptr;
};
struct VisionWeights {
  Linear patch_embed;  // [V, 3 * patch^2]
  const uint16_t* patch_embed_bias = nullptr;
  std::vector<VisionBlockWeights> blocks;  // empty: the model has no vision tower
  const uint16_t* norm = nullptr;          // [V]
  Linear aligner_w1, aligner_w2;           // [D, V * r^2], [D, D]
  const uint16_t *aligner_b1 = nullptr, *aligner_b2 = nullptr;
  const uint16_t *image_start = nullptr, *image_end = nullptr, *image_newline = nullptr;  // [D]
};

struct ModelWeights {
  const uint16_t* embed = nullptr;  // [vocab, D]
  const uint16_t* head = nullptr;   // [vocab, D]
  const uint16_t* norm = nullptr;   // [D]
  Linear lm_head;                   // `head` as a bf16 [vocab, D] projection (fp32 logits)
  std::vector<LayerWeights> layers;
  DSparkWeights dspark;
  VisionWeights vision;

  // Binds every tensor; throws std::runtime_error naming the tensor on a missing tensor or an
  // unexpected dtype/shape. bf16/fp32 tensors the mapping leaves misaligned are copied into
  // aligned memory these weights own.
  static ModelWeights bind(const Checkpoint& ckpt);

  // A 64-byte-aligned copy of n bytes, owned by these weights (shared by their copies).
  const uint8_t* own_copy(const uint8_t* p, size_t n);

 private:
  std::vector<std::shared_ptr<uint8_t>> owned_;
};

}  // namespace cedar
