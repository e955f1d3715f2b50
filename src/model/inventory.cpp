// expected_tensors(): the full tensor inventory of a checkpoint for a config, in the release's
// names, dtypes and layouts (spec §13). Enumerating it for the released config gives exactly the
// release's 96,085 tensors / 510,286,023,000 bytes (tests/unit/model/inventory_test.cpp).
// ref: model.py Transformer.__init__, Block, Attention, Compressor, Indexer, Gate, MoE, Engram,
//      DSparkBlock; vision.py ViT, Aligner
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "model/checkpoint.h"

namespace cedar {

namespace {

constexpr int kBlock = 32;  // weight_block_size [32, 32]; FP4 scale per 32 input channels

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class Inventory {
 public:
  std::vector<ExpectedTensor> out;
  size_t max_tensors = std::numeric_limits<size_t>::max();

  void add(const std::string& name, DType dt, std::vector<int64_t> shape) {
    if (out.size() >= max_tensors)
      throw std::length_error("the config describes more than " + std::to_string(max_tensors) +
                              " tensors");
    out.push_back({name, dt, std::move(shape)});
  }
  // A quantized Linear `name` stores `name.weight` and `name.scale` (model.py Linear's two
  // parameters; spec §13 lists such modules by their module name).
  // FP8 Linear: E4M3 weight [out, in] + UE8M0 scale [ceil(out/32), ceil(in/32)].
  // ref: model.py Linear.__init__ (float8_e4m3fn branch)
  void fp8(const std::string& name, int64_t o, int64_t i) {
    add(name + ".weight", DType::F8_E4M3, {o, i});
    add(name + ".scale", DType::F8_E8M0, {ceil_div(o, kBlock), ceil_div(i, kBlock)});
  }
  // FP4 Linear (routed experts): packed E2M1 pairs as I8 [out, in/2] + UE8M0 [out, in/32].
  // ref: model.py Linear.__init__ (float4_e2m1fn_x2 branch)
  void fp4(const std::string& name, int64_t o, int64_t i) {
    add(name + ".weight", DType::I8, {o, i / 2});
    add(name + ".scale", DType::F8_E8M0, {o, i / kBlock});
  }
};

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw std::runtime_error("expected_tensors: config key " + key + " " + what);
}

struct BlockSpec {
  std::string prefix;  // "layers.7." or "mtp.0."
  int n_experts = 0;
  bool kv_source = false;
  int ratio = 0;
  bool index_source = false;
  int64_t engram_rows = 0;  // 0: no Engram at this layer
};

// ref: model.py Block.__init__ + Attention + MoE (+ Compressor, Indexer, Engram where present)
void add_block(Inventory& inv, const ModelConfig& c, const BlockSpec& b) {
  const std::string& p = b.prefix;
  const int64_t D = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim;
  const int64_t inter = c.moe_intermediate_size;
  inv.add(p + "attn_norm.weight", DType::BF16, {D});
  inv.add(p + "ffn_norm.weight", DType::BF16, {D});
  // attention (every layer, every mode)
  inv.add(p + "attn.attn_sink", DType::F32, {H});
  inv.add(p + "attn.q_norm.weight", DType::BF16, {c.q_lora_rank});
  inv.add(p + "attn.kv_norm.weight", DType::BF16, {hd});
  inv.fp8(p + "attn.wq_a", c.q_lora_rank, D);
  inv.fp8(p + "attn.wq_b", H * hd, c.q_lora_rank);
  inv.fp8(p + "attn.wkv", hd, D);
  // wo_a is stored FP8 and dequantized to bf16 at load: [groups * o_lora, heads/group * hd]
  inv.fp8(p + "attn.wo_a", int64_t(c.o_groups) * c.o_lora_rank, H * hd / c.o_groups);
  inv.fp8(p + "attn.wo_b", D, int64_t(c.o_groups) * c.o_lora_rank);
  if (b.kv_source) {  // ref: model.py Compressor.__init__, Indexer.__init__ (owns_k)
    inv.add(p + "attn.compressor.wkv.weight", DType::BF16, {hd, D});
    if (b.ratio > 1) inv.add(p + "attn.compressor.wgate.weight", DType::BF16, {hd, D});
    inv.add(p + "attn.compressor.norm.weight", DType::BF16, {hd});
    inv.add(p + "attn.indexer.wk.weight", DType::BF16, {c.index_head_dim, hd});
    inv.add(p + "attn.indexer.k_norm.weight", DType::BF16, {c.index_head_dim});
  }
  if (b.index_source) {
    inv.fp8(p + "attn.indexer.wq_b", int64_t(c.index_n_heads) * c.index_head_dim, c.q_lora_rank);
    inv.add(p + "attn.indexer.weights_proj.weight", DType::BF16, {c.index_n_heads, D});
  }
  // mHC: (2 + hc) * hc mixes from the flattened hc * D stream
  const int64_t mix = int64_t(2 + c.hc_mult) * c.hc_mult;
  for (const char* site : {"attn", "ffn"}) {
    const std::string s = site;
    inv.add(p + "hc_" + s + "_fn", DType::F32, {mix, int64_t(c.hc_mult) * D});
    inv.add(p + "hc_" + s + "_base", DType::F32, {mix});
    inv.add(p + "hc_" + s + "_scale", DType::F32, {3});
  }
  // MoE: router, routed FP4 experts, one FP8 shared expert
  inv.add(p + "ffn.gate.weight", DType::BF16, {b.n_experts, D});
  inv.add(p + "ffn.gate.bias", DType::F32, {b.n_experts});
  if (c.has_vision) inv.add(p + "ffn.gate.bias_vl", DType::F32, {b.n_experts});  // Gate: VL only
  for (int e = 0; e < b.n_experts; ++e) {
    const std::string ep = p + "ffn.experts." + std::to_string(e) + ".";
    inv.fp4(ep + "w1", inter, D);
    inv.fp4(ep + "w2", D, inter);
    inv.fp4(ep + "w3", inter, D);
  }
  inv.fp8(p + "ffn.shared_experts.w1", inter, D);
  inv.fp8(p + "ffn.shared_experts.w2", D, inter);
  inv.fp8(p + "ffn.shared_experts.w3", inter, D);
  if (b.engram_rows > 0) {  // ref: model.py Engram.__init__, ParallelEngramEmbedding
    const int64_t ehd = c.engram_head_dim;
    const int64_t n_cols = int64_t(c.engram_max_ngram_size - 1) * c.engram_n_heads;
    inv.add(p + "engram.embed.weight", DType::F8_E4M3, {b.engram_rows, ehd});
    inv.add(p + "engram.embed.scale", DType::F8_E8M0, {b.engram_rows, ehd / kBlock});
    inv.fp8(p + "engram.wkv", D * (c.hc_mult + 1), n_cols * ehd);
    inv.add(p + "engram.q_weight", DType::BF16, {c.hc_mult, D});
    inv.add(p + "engram.k_weight", DType::BF16, {c.hc_mult, D});
  }
}

void check_config(const ModelConfig& c) {
  require(c.vocab_size > 0, "vocab_size", "must be positive");
  require(c.hidden_size > 0 && c.hidden_size % kBlock == 0, "hidden_size",
          "must be a positive multiple of 32");
  require(c.num_hidden_layers > 0, "num_hidden_layers", "must be positive");
  require(c.num_attention_heads > 0, "num_attention_heads", "must be positive");
  require(c.head_dim > 0, "head_dim", "must be positive");
  require(c.q_lora_rank > 0, "q_lora_rank", "must be positive");
  require(c.o_lora_rank > 0, "o_lora_rank", "must be positive");
  require(c.o_groups > 0 && c.num_attention_heads % c.o_groups == 0, "o_groups",
          "must divide num_attention_heads");
  require(c.n_routed_experts > 0, "n_routed_experts", "must be positive");
  require(c.moe_intermediate_size > 0 && c.moe_intermediate_size % kBlock == 0,
          "moe_intermediate_size", "must be a positive multiple of 32 (FP4 scale blocks)");
  require(c.hc_mult > 0, "hc_mult", "must be positive");
  require(int(c.compress_ratios.size()) >= c.num_hidden_layers, "compress_ratios",
          "must have an entry per layer");
  require(c.engram_num_embeddings.size() == c.engram_layer_ids.size(), "engram_num_embeddings",
          "must have one entry per engram_layer_ids entry");
  if (!c.engram_layer_ids.empty()) {
    require(c.engram_head_dim > 0 && c.engram_head_dim % kBlock == 0, "engram_head_dim",
            "must be a positive multiple of 32");
    require(c.engram_max_ngram_size >= 2 && c.engram_n_heads > 0, "engram_max_ngram_size",
            "must be >= 2 with engram_n_heads > 0");
    for (auto rows : c.engram_num_embeddings)
      require(rows > 0, "engram_num_embeddings", "entries must be positive");
  }
  if (!c.index_source_layer_ids.empty())
    require(c.index_n_heads > 0 && c.index_head_dim > 0, "index_n_heads",
            "and index_head_dim must be positive");
  if (c.num_nextn_predict_layers > 0)
    require(!c.dspark_target_layer_ids.empty(), "dspark_target_layer_ids",
            "must be non-empty when num_nextn_predict_layers > 0");
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c, size_t max_tensors) {
  check_config(c);
  Inventory inv;
  inv.max_tensors = max_tensors;
  const int64_t D = c.hidden_size;
  // ref: model.py Transformer.__init__
  inv.add("embed.weight", DType::BF16, {c.vocab_size, D});
  inv.add("head.weight", DType::BF16, {c.vocab_size, D});
  inv.add("norm.weight", DType::BF16, {D});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    BlockSpec b;
    b.prefix = "layers." + std::to_string(l) + ".";
    b.n_experts = c.n_routed_experts;
    b.ratio = c.compress_ratios[size_t(l)];
    b.kv_source = contains(c.kv_source_layer_ids, l);
    b.index_source = contains(c.index_source_layer_ids, l);
    for (size_t i = 0; i < c.engram_layer_ids.size(); ++i)
      if (c.engram_layer_ids[i] == l) b.engram_rows = c.engram_num_embeddings[i];
    add_block(inv, c, b);
  }
  // DSpark stages: plain blocks (no compressor, indexer or Engram) with their own expert count.
  // ref: model.py DSparkBlock.__init__, MoE/Gate via ModelArgs.get_moe_config
  const int S = c.num_nextn_predict_layers;
  for (int s = 0; s < S; ++s) {
    BlockSpec b;
    b.prefix = "mtp." + std::to_string(s) + ".";
    b.n_experts = c.dspark_n_routed_experts > 0 ? c.dspark_n_routed_experts : c.n_routed_experts;
    add_block(inv, c, b);
    if (s == 0) {
      inv.fp8(b.prefix + "main_proj", D, D * int64_t(c.dspark_target_layer_ids.size()));
      inv.add(b.prefix + "main_norm.weight", DType::BF16, {D});
    }
    if (s == S - 1) {
      const int64_t rank = c.dspark_markov_rank;
      inv.add(b.prefix + "norm.weight", DType::BF16, {D});
      inv.add(b.prefix + "markov_head.embed.weight", DType::BF16, {c.vocab_size, rank});
      inv.add(b.prefix + "markov_head.head.weight", DType::BF16, {c.vocab_size, rank});
      inv.add(b.prefix + "confidence_head.proj.weight", DType::BF16, {1, D + rank});
    }
  }
  if (c.has_vision) {  // ref: model.py Transformer.__init__ (vision_enabled); vision.py
    inv.add("image_start", DType::BF16, {D});
    inv.add("image_end", DType::BF16, {D});
    inv.add("image_newline", DType::BF16, {D});
    // the release: 32 blocks of width 1024, MLP 2816 (w1 fuses gate and up), 14x14x3 patches,
    // 3x3 pixel unshuffle into the aligner
    const VisionConfig& vc = c.vision;
    const int64_t V = vc.hidden_size, I = vc.intermediate_size;
    inv.add("vision.patch_embed.proj.weight", DType::BF16, {V, vc.patch_dim()});
    inv.add("vision.patch_embed.proj.bias", DType::BF16, {V});
    for (int b = 0; b < vc.num_hidden_layers; ++b) {
      const std::string p = "vision.blocks." + std::to_string(b) + ".";
      inv.add(p + "norm1.weight", DType::BF16, {V});
      inv.add(p + "attn.wqkv.weight", DType::BF16, {3 * V, V});
      inv.add(p + "attn.wqkv.bias", DType::BF16, {3 * V});
      inv.add(p + "attn.wo.weight", DType::BF16, {V, V});
      inv.add(p + "attn.wo.bias", DType::BF16, {V});
      inv.add(p + "norm2.weight", DType::BF16, {V});
      inv.add(p + "mlp.w1.weight", DType::BF16, {2 * I, V});
      inv.add(p + "mlp.w2.weight", DType::BF16, {V, I});
    }
    inv.add("vision.norm.weight", DType::BF16, {V});
    const int64_t aligner_in = V * vc.downsample_ratio * vc.downsample_ratio;
    inv.add("aligner.w1.weight", DType::BF16, {D, aligner_in});
    inv.add("aligner.w1.bias", DType::BF16, {D});
    inv.add("aligner.w2.weight", DType::BF16, {D, D});
    inv.add("aligner.w2.bias", DType::BF16, {D});
  }
  return std::move(inv.out);
}

}  // namespace cedar
