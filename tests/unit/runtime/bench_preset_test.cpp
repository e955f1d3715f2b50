// The `bench` preset of make-model (src/model/presets.cpp): the release's 40-layer schedule at a
// width where one decoded token reads 0.8-1.5 GB of weights, in a checkpoint of at most 12 GB.
// Checked from the config and the tensor inventory only: the checkpoint is far too big to
// generate in the test suite.
#include <gtest/gtest.h>

#include <cstdio>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/param_count.h"
#include "model/presets.h"
#include "runtime/bench_accounting.h"

namespace cedar {
namespace {

ModelConfig validated(const std::string& name) {
  ModelConfig c = preset_config(name);
  c.validate();
  return c;
}

uint64_t checkpoint_bytes(const ModelConfig& c) {
  uint64_t n = 0;
  for (const ExpectedTensor& t : expected_tensors(c)) {
    uint64_t e = dtype_size(t.dtype);
    for (int64_t d : t.shape) e *= uint64_t(d);
    n += e;
  }
  return n;
}

TEST(BenchPreset, ReleaseScheduleLikeSmall) {
  const ModelConfig b = validated("bench"), s = validated("small");
  EXPECT_EQ(b.num_hidden_layers, 40);
  EXPECT_EQ(b.vocab_size, 129280);
  EXPECT_EQ(b.compress_ratios, s.compress_ratios);
  EXPECT_EQ(b.kv_source_layer_ids, s.kv_source_layer_ids);
  EXPECT_EQ(b.index_source_layer_ids, s.index_source_layer_ids);
  EXPECT_EQ(b.candidate_source_layer_id, 20);
  EXPECT_EQ(b.engram_layer_ids, (std::vector<int>{1, 14}));
  EXPECT_EQ(b.num_nextn_predict_layers, 3);  // DSpark stages like the release
  EXPECT_EQ(b.dspark_target_layer_ids, (std::vector<int>{37, 38, 39}));
  EXPECT_TRUE(b.has_vision);  // a small tower like small's (the processor is the release's)
  EXPECT_TRUE(bench::has_ced_split(b));
  ASSERT_EQ(b.layers.size(), s.layers.size());
  for (size_t l = 0; l < b.layers.size(); ++l) {
    const LayerPlan &x = b.layers[l], &y = s.layers[l];
    EXPECT_EQ(x.role, y.role) << l;
    EXPECT_EQ(x.ratio, y.ratio) << l;
    EXPECT_EQ(x.kv_source, y.kv_source) << l;
    EXPECT_EQ(x.index_source, y.index_source) << l;
    EXPECT_EQ(x.is_candidate_source, y.is_candidate_source) << l;
    EXPECT_EQ(x.uses_candidates, y.uses_candidates) << l;
    EXPECT_EQ(x.has_engram, y.has_engram) << l;
    EXPECT_EQ(x.is_decoder, y.is_decoder) << l;
  }
}

TEST(BenchPreset, EveryGemmReductionIsWholeBlocks) {
  const ModelConfig c = validated("bench");
  EXPECT_EQ(c.head_dim % 32, 0);
  for (const ExpectedTensor& t : expected_tensors(c)) {
    if (t.shape.size() != 2 || t.dtype == DType::F8_E8M0) continue;
    if (t.name.rfind("vision.", 0) == 0) continue;  // bf16 GEMMs; K = 588 in the release too
    const int64_t k = t.dtype == DType::I8 ? 2 * t.shape[1] : t.shape[1];  // FP4: 2 per byte
    EXPECT_EQ(k % 32, 0) << t.name;
  }
}

TEST(BenchPreset, BytesPerTokenAndCheckpointSize) {
  const ModelConfig c = validated("bench");
  const bench::DecodeTraffic d = bench::decode_traffic(c, 0);
  const double per_token = double(d.weights()), ckpt = double(checkpoint_bytes(c));
  std::printf("bench preset: %.3f GB of weights per decoded token, checkpoint %.2f GB\n",
              per_token / 1e9, ckpt / 1e9);
  EXPECT_GE(per_token, 0.8e9);
  EXPECT_LE(per_token, 1.5e9);
  EXPECT_LE(ckpt, 12e9);
  // the counted weights are inspect's "activated per generated token"
  EXPECT_EQ(d.weight_params, count_params(c, expected_tensors(c)).active_generated);
}

// The `anchor` preset: the shapes of the V4-Flash-shaped GGUF the llama.cpp engines run in
// tools/anchor (1,025,882,108 weight bytes per decoded token there), the V4.1 roles in 12 layers.
TEST(AnchorPreset, TheGgufShapesAndTheReleaseRoles) {
  const ModelConfig c = validated("anchor");
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 512);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.o_lora_rank, 512);
  EXPECT_EQ(c.n_routed_experts, 64);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_intermediate_size, 1024);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.index_n_heads, 32);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_TRUE(bench::has_ced_split(c));
  // every role of the release's schedule occurs: SWA, r=2 and r=1 full, reuse, reindex, Engram
  int swa = 0, own_kv = 0, reuse = 0, candidates = 0, engram = 0, decoder = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {  // the backbone (DSpark stages follow it)
    const LayerPlan& p = c.layers[size_t(l)];
    swa += p.ratio == 0;
    own_kv += p.ratio > 0 && p.is_kv_source;
    reuse += p.ratio > 0 && !p.is_kv_source;
    candidates += p.uses_candidates;
    engram += p.has_engram;
    decoder += p.is_decoder;
  }
  EXPECT_EQ(decoder, 5);  // the CED decoder: the r=1 layers from the candidate source on
  EXPECT_EQ(swa, 2);
  EXPECT_EQ(own_kv, 3);
  EXPECT_EQ(reuse, 7);
  EXPECT_GT(candidates, 0);
  EXPECT_EQ(engram, 2);
  for (const ExpectedTensor& t : expected_tensors(c)) {
    if (t.shape.size() != 2 || t.dtype == DType::F8_E8M0) continue;
    if (t.name.rfind("vision.", 0) == 0) continue;
    const int64_t k = t.dtype == DType::I8 ? 2 * t.shape[1] : t.shape[1];
    EXPECT_EQ(k % 32, 0) << t.name;
  }
}

TEST(AnchorPreset, BytesPerTokenMatchTheGguf) {
  const ModelConfig c = validated("anchor");
  const double per_token = double(bench::decode_traffic(c, 0).weights());
  const double ckpt = double(checkpoint_bytes(c));
  std::printf("anchor preset: %.3f GB of weights per decoded token, checkpoint %.2f GB\n",
              per_token / 1e9, ckpt / 1e9);
  // The release's head is bf16 where the GGUF's is Q8_0 (34 bytes per 32 values): apart from
  // that one format choice, a decoded token reads what the GGUF's does.
  const double head = double(c.vocab_size) * c.hidden_size;
  const double as_gguf = per_token - 2.0 * head + head * 34.0 / 32.0;
  EXPECT_NEAR(as_gguf / 1.025882108e9, 1.0, 0.05);
  EXPECT_LE(ckpt, 8e9);  // fits the page cache of a 24 GB machine beside the GGUF
}

}  // namespace
}  // namespace cedar
