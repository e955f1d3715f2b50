// ModelConfig: the V4.1 text configuration read from a checkpoint's config.json (the HF layout:
// the text keys nested under "text_config", quantization under "quantization_config"), and the
// per-layer role plan derived from it (spec §2.2). Anything the engine does not implement is
// refused by validate() with a message naming the key.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cedar {

// config.json is read whole: a larger file is refused before it is read (the release's is 2 KiB).
inline constexpr uint64_t kMaxConfigJsonBytes = uint64_t(16) << 20;

enum class LayerRole { SWA, Full, Reindex, Reuse };
const char* layer_role_name(LayerRole r);

struct LayerPlan {
  int layer = 0;
  int ratio = 0;  // compress ratio: 0, 1 or 2
  LayerRole role = LayerRole::SWA;
  int kv_source = -1;     // nearest kv-source layer at or below (same ratio); -1 for SWA
  int index_source = -1;  // nearest index-source layer at or below; -1 for SWA
  bool is_kv_source = false;
  bool is_index_source = false;
  bool is_candidate_source = false;
  bool uses_candidates = false;  // index source above the candidate source
  bool has_engram = false;
  int engram_index = -1;    // position in engram_layer_ids
  bool is_decoder = false;  // layer >= candidate source (CED decoder); false if no candidates
};

// vision_config (v41-extras.md §3): the ViT, the aligner and the image processor's geometry.
// The defaults are the release's; a config.json must name the shape keys.
struct VisionConfig {
  int num_hidden_layers = 32;
  int hidden_size = 1024;
  int num_attention_heads = 16;
  int intermediate_size = 2816;  // SwiGLU; mlp.w1 fuses gate and up (2x)
  int patch_size = 14;
  double rope_theta = 10000.0;  // 2D RoPE over (row, column)
  int downsample_ratio = 3;     // the aligner's pixel unshuffle
  int max_image_tokens = 1024;  // LLM tokens of one image, delimiters and newlines included
  int64_t min_pixels = 295936;
  double max_wh_ratio = 0;     // 0: null (no cap), as the release
  double rms_norm_eps = 1e-6;  // ref: vision.py RMSNorm (not a config key)
  int head_dim() const { return hidden_size / num_attention_heads; }
  int patch_dim() const { return 3 * patch_size * patch_size; }
};

struct ModelConfig {
  // text_config
  int64_t vocab_size = 0;
  int hidden_size = 0;  // D
  int num_hidden_layers = 0;
  int num_attention_heads = 0;  // H
  int num_key_value_heads = 1;
  int head_dim = 0;          // hd
  int qk_rope_head_dim = 0;  // rd
  int q_lora_rank = 0;
  int o_lora_rank = 0;
  int o_groups = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  std::string scoring_func = "sqrtsoftplus";
  std::string topk_method = "noaux_tc";
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double gate_temp = 1.0;
  double swiglu_limit = 0.0;
  double rms_norm_eps = 1e-20;
  int sliding_window = 128;
  std::vector<int> compress_ratios;  // may hold extra entries for DSpark stages
  std::vector<int> kv_source_layer_ids;
  std::vector<int> index_source_layer_ids;
  int candidate_source_layer_id = -1;
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  // rope_scaling (YaRN); original_max_position_embeddings == 0 disables it
  double rope_factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position_embeddings = 0;
  int64_t max_position_embeddings = 0;
  std::vector<int> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;
  int engram_max_ngram_size = 0;
  int64_t engram_vocab_size = 0;
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_token_id = 2;
  int64_t engram_compressed_vocab_size = 0;
  int num_nextn_predict_layers = 0;
  int dspark_block_size = 0;
  int dspark_n_routed_experts = 0;
  int dspark_num_experts_per_tok = 0;
  int dspark_markov_rank = 0;
  std::vector<int> dspark_target_layer_ids;
  int64_t dspark_noise_token_id = 0;
  bool tie_word_embeddings = false;
  // top level
  int64_t bos_token_id = 0, eos_token_id = 1, pad_token_id = 2;
  int64_t image_token_id = 129264;
  bool has_vision = false;  // a "vision_config" is present
  VisionConfig vision;      // meaningful when has_vision
  // quantization_config
  std::string quant_method;            // "fp8"
  std::vector<int> weight_block_size;  // must be [32, 32]
  std::string scale_fmt;               // "ue8m0"
  std::string expert_dtype;            // "fp4"

  std::vector<LayerPlan> layers;  // one per backbone layer, filled by validate()

  // Parse config.json (nested or flat) and validate(). Throws std::runtime_error naming the key
  // on a missing/ill-typed key. from_text parses the text first (errors name `label`); from_file
  // reads a regular file of at most kMaxConfigJsonBytes (base/regular_file.h) and parses it.
  static ModelConfig from_json(const nlohmann::json& j);
  static ModelConfig from_text(std::string_view text, const std::string& label);
  static ModelConfig from_file(const std::string& path);
  nlohmann::json to_json() const;  // the HF nested layout, as make-model writes it

  // Checks everything the engine relies on and fills `layers`. Throws std::runtime_error with a
  // message naming the offending key when the configuration is not the V4.1 graph.
  void validate();
  // The range checks validate() starts with (config_limits.cpp): every count and dimension
  // positive and under a sane upper bound, every float the math needs finite. The GGUF readers
  // run them before they loop over the layers a file claims or derive its Engram constants.
  // Errors name the key and the bound ("config.json: text_config.<key>: <v> exceeds the limit of
  // <max>").
  void check_limits() const;

  int n_layers() const { return num_hidden_layers; }
  const LayerPlan& plan(int l) const { return layers.at(size_t(l)); }
  // Routed experts and experts per token of backbone layer l or of DSpark stage l - L (l >= L).
  // ref: model.py ModelArgs.get_moe_config
  int experts_of(int l) const {
    return l < num_hidden_layers || dspark_n_routed_experts == 0 ? n_routed_experts
                                                                 : dspark_n_routed_experts;
  }
  int experts_per_tok_of(int l) const {
    return l < num_hidden_layers || dspark_num_experts_per_tok == 0 ? num_experts_per_tok
                                                                    : dspark_num_experts_per_tok;
  }
};

}  // namespace cedar
