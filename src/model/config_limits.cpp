// ModelConfig::check_limits(): the range checks every configuration passes before anything
// allocates or loops by its counts (a config.json, a GGUF file's keys, a preset). A hostile file
// claims what it likes -- 2^31 layers, 10^9 experts, 10^9 Sinkhorn iterations, rope_theta = inf --
// and each claim becomes a loop bound, an allocation or a factor of a product further on. So every
// count and dimension has a sane upper bound here: a generous multiple of the release's value
// (spec v41-architecture.md §2.1; the release in brackets), small enough that the products the
// engine forms (shapes, byte sizes, per-layer tables) stay far inside 64 bits and that no loop
// over them runs long. Every float the math divides by, exponentiates or iterates with must be
// finite. Errors name the key and the bound: "config.json: text_config.<key>: <v> exceeds the
// limit of <max>".
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "model/config.h"

namespace cedar {

namespace {

[[noreturn]] void fail(const std::string& key, const std::string& what) {
  throw std::runtime_error("config.json: " + key + ": " + what);
}

std::string tk(const char* k) { return std::string("text_config.") + k; }

void in_range(const std::string& key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo)
    fail(key, lo == 1 ? "must be positive, got " + std::to_string(v)
                      : "must be at least " + std::to_string(lo) + ", got " + std::to_string(v));
  if (v > hi) fail(key, std::to_string(v) + " exceeds the limit of " + std::to_string(hi));
}

// A float the math needs finite and positive (or, min_zero, >= 0).
void finite(const std::string& key, double v, bool min_zero = false) {
  if (!std::isfinite(v)) fail(key, "must be finite, got " + std::to_string(v));
  if (min_zero ? v < 0 : v <= 0)
    fail(key, std::string(min_zero ? "must be >= 0" : "must be positive") + ", got " +
                  std::to_string(v));
}

// Bounds (the release's value in brackets).
constexpr int64_t kMaxLayers = 1024;               // backbone layers [40]
constexpr int64_t kMaxStages = 64;                 // DSpark stages [3]
constexpr int64_t kMaxHeads = 1024;                // attention / indexer heads [64 / 32]
constexpr int64_t kMaxWidth = int64_t(1) << 16;    // hidden_size, LoRA ranks [5120, 1280, 1024]
constexpr int64_t kMaxHeadDim = int64_t(1) << 14;  // head_dim, index_head_dim [512, 128]
constexpr int64_t kMaxFfn = int64_t(1) << 17;      // moe_intermediate_size [2304]
constexpr int64_t kMaxExperts = int64_t(1) << 14;  // routed experts per layer [384]
// layers x experts, DSpark stages included [40 x 384 + 3 x 128]: the routed experts' tensors
// are six per expert, and the tensor inventory lists each of them
constexpr int64_t kMaxRoutedExperts = int64_t(1) << 18;
constexpr int64_t kMaxVocab = int64_t(1) << 24;      // [129280]
constexpr int64_t kMaxPositions = int64_t(1) << 27;  // max_position_embeddings [1048576]
constexpr int64_t kMaxWindow = int64_t(1) << 16;     // sliding_window [128]
constexpr int64_t kMaxTopK = int64_t(1) << 20;  // index_topk, candidate_topk_blocks [512, 2048]
constexpr int64_t kMaxSinkhorn = 1000;          // hc_sinkhorn_iters [20]: a loop per token
// Engram: every hash head's bucket count is a prime searched for at load (a walk over the primes
// already taken per order), so their number is bounded [2 layers x 3 orders x 8 heads = 48]
constexpr int64_t kMaxEngramHeads = 1024;
constexpr int64_t kMaxEngramVocab = int64_t(1) << 36;  // engram_vocab_size [16,000,000]
constexpr int64_t kMaxEngramRows = int64_t(1) << 46;   // a table's rows [384,016,682]

void check_vision(const VisionConfig& v) {
  const std::string p = "vision_config.";
  in_range(p + "num_hidden_layers", v.num_hidden_layers, 1, kMaxLayers);
  in_range(p + "hidden_size", v.hidden_size, 1, kMaxHeadDim);
  in_range(p + "num_attention_heads", v.num_attention_heads, 1, kMaxHeads);
  in_range(p + "intermediate_size", v.intermediate_size, 1, kMaxFfn);
  in_range(p + "patch_size", v.patch_size, 1, 1024);
  in_range(p + "downsample_ratio", v.downsample_ratio, 1, 64);
  // one token, its newline and the two delimiters at least
  in_range(p + "max_image_tokens", v.max_image_tokens, 4, kMaxTopK);
  in_range(p + "min_pixels", v.min_pixels, 0, int64_t(1) << 34);
  finite(p + "rope_theta", v.rope_theta);
  finite(p + "max_wh_ratio", v.max_wh_ratio, /*min_zero=*/true);  // 0: null (no cap)
  if (v.hidden_size % v.num_attention_heads != 0 || v.head_dim() % 4 != 0)
    fail(p + "num_attention_heads",
         "hidden_size / num_attention_heads must be a multiple of 4 (2D RoPE rotates half of "
         "each head by row and half by column), got " +
             std::to_string(v.hidden_size) + " / " + std::to_string(v.num_attention_heads));
}

}  // namespace

void ModelConfig::check_limits() const {
  in_range(tk("vocab_size"), vocab_size, 1, kMaxVocab);
  in_range(tk("num_hidden_layers"), num_hidden_layers, 1, kMaxLayers);
  in_range(tk("hidden_size"), hidden_size, 1, kMaxWidth);
  in_range(tk("num_attention_heads"), num_attention_heads, 1, kMaxHeads);
  in_range(tk("head_dim"), head_dim, 1, kMaxHeadDim);
  in_range(tk("qk_rope_head_dim"), qk_rope_head_dim, 1, kMaxHeadDim);
  in_range(tk("q_lora_rank"), q_lora_rank, 1, kMaxWidth);
  in_range(tk("o_lora_rank"), o_lora_rank, 1, kMaxWidth);
  in_range(tk("o_groups"), o_groups, 1, kMaxHeads);
  in_range(tk("n_routed_experts"), n_routed_experts, 1, kMaxExperts);
  in_range(tk("num_experts_per_tok"), num_experts_per_tok, 1, kMaxExperts);
  in_range(tk("moe_intermediate_size"), moe_intermediate_size, 1, kMaxFfn);
  in_range(tk("sliding_window"), sliding_window, 1, kMaxWindow);
  in_range(tk("index_n_heads"), index_n_heads, 1, kMaxHeads);
  in_range(tk("index_head_dim"), index_head_dim, 1, kMaxHeadDim);
  in_range(tk("index_topk"), index_topk, 1, kMaxTopK);
  in_range(tk("hc_sinkhorn_iters"), hc_sinkhorn_iters, 1, kMaxSinkhorn);
  in_range(tk("max_position_embeddings"), max_position_embeddings, 1, kMaxPositions);
  in_range(tk("rope_scaling.original_max_position_embeddings"), original_max_position_embeddings, 0,
           kMaxPositions);
  // one ratio per backbone layer, then (optionally) one per DSpark stage
  in_range(tk("compress_ratios") + " (entries)", int64_t(compress_ratios.size()), 0,
           int64_t(num_hidden_layers) + kMaxStages);
  if (candidate_source_layer_id != -1) {
    in_range(tk("candidate_topk_blocks"), candidate_topk_blocks, 1, kMaxTopK);
    in_range(tk("candidate_block_size"), candidate_block_size, 1, kMaxWindow);
  }

  finite(tk("rms_norm_eps"), rms_norm_eps);
  finite(tk("hc_eps"), hc_eps);
  finite(tk("rope_theta"), rope_theta);
  finite(tk("compress_rope_theta"), compress_rope_theta);
  finite(tk("routed_scaling_factor"), routed_scaling_factor);
  finite(tk("gate_temp"), gate_temp);
  finite(tk("swiglu_limit"), swiglu_limit, /*min_zero=*/true);
  if (original_max_position_embeddings > 0) {
    finite(tk("rope_scaling.factor"), rope_factor);
    finite(tk("rope_scaling.beta_fast"), beta_fast);
    finite(tk("rope_scaling.beta_slow"), beta_slow);
  }

  if (!engram_layer_ids.empty()) {
    in_range(tk("engram_layer_ids") + " (entries)", int64_t(engram_layer_ids.size()), 1,
             num_hidden_layers);
    in_range(tk("engram_max_ngram_size"), engram_max_ngram_size, 2, 16);
    in_range(tk("engram_n_heads"), engram_n_heads, 1, kMaxEngramHeads);
    in_range(tk("engram_head_dim"), engram_head_dim, 1, kMaxHeadDim);
    in_range(tk("engram_vocab_size"), engram_vocab_size, 2, kMaxEngramVocab);
    in_range(tk("engram_compressed_vocab_size"), engram_compressed_vocab_size, 1, kMaxVocab);
    in_range(
        tk("engram_n_heads") + " x (engram_max_ngram_size - 1) x engram layers",
        int64_t(engram_n_heads) * (engram_max_ngram_size - 1) * int64_t(engram_layer_ids.size()), 1,
        kMaxEngramHeads);
    for (int64_t rows : engram_num_embeddings)
      in_range(tk("engram_num_embeddings"), rows, 1, kMaxEngramRows);
  }

  in_range(tk("num_nextn_predict_layers"), num_nextn_predict_layers, 0, kMaxStages);
  int64_t routed = int64_t(num_hidden_layers) * n_routed_experts;
  if (num_nextn_predict_layers > 0) {
    in_range(tk("dspark_block_size"), dspark_block_size, 1, 1024);
    in_range(tk("dspark_n_routed_experts"), dspark_n_routed_experts, 1, kMaxExperts);
    in_range(tk("dspark_num_experts_per_tok"), dspark_num_experts_per_tok, 1, kMaxExperts);
    in_range(tk("dspark_markov_rank"), dspark_markov_rank, 1, kMaxWidth);
    in_range(tk("dspark_target_layer_ids") + " (entries)", int64_t(dspark_target_layer_ids.size()),
             0, num_hidden_layers);
    routed += int64_t(num_nextn_predict_layers) * dspark_n_routed_experts;
  }
  in_range(tk("n_routed_experts") + " x num_hidden_layers (+ DSpark stages' experts)", routed, 1,
           kMaxRoutedExperts);

  if (has_vision) {
    check_vision(vision);
    if (image_token_id < 0 || image_token_id >= vocab_size)
      fail("image_token_id", std::to_string(image_token_id) + " is outside the vocabulary [0, " +
                                 std::to_string(vocab_size) + ")");
  }
}

}  // namespace cedar
