// `cedar bench` accounting (src/runtime/bench_accounting): the bytes one decoded token reads and
// the FLOPs of a prompt under exact and CED prefill, checked against closed forms written here
// from the layer shapes (spec §2.4, §10, NUMERICS presets) -- an independent derivation of what
// the inventory walk computes -- and against `cedar inspect`'s activated-parameter counts.
// The machine probes are smoke-tested in bench_probes_test.cpp.
#include "runtime/bench_accounting.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/param_count.h"
#include "model/presets.h"

namespace cedar::bench {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
// FP8 linear [o, i]: E4M3 weight + UE8M0 scale per 32x32 block
int64_t fp8(int64_t o, int64_t i) { return o * i + cdiv(o, 32) * cdiv(i, 32); }
// FP4 expert linear [o, i]: packed E2M1 + UE8M0 per (row, 32 inputs)
int64_t fp4(int64_t o, int64_t i) { return o * i / 2 + o * (i / 32); }

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Closed-form decode weight bytes of a text model from its shapes.
struct Expected {
  int64_t attention = 0, compressor = 0, indexer = 0, router = 0, routed = 0, shared = 0, mhc = 0,
          norms = 0, engram = 0, embedding_row = 0, head = 0, wo_a_extra = 0, one_expert = 0;
};

Expected expected_weights(const ModelConfig& c) {
  const int64_t D = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim, ql = c.q_lora_rank,
                G = c.o_groups, ol = c.o_lora_rank, inter = c.moe_intermediate_size,
                E = c.n_routed_experts, IH = c.index_n_heads, ihd = c.index_head_dim,
                hc = c.hc_mult;
  Expected e;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    e.attention += fp8(ql, D) + fp8(H * hd, ql) + fp8(hd, D) + fp8(G * ol, H * hd / G) +
                   fp8(D, G * ol) + 4 * H /*sink f32*/ + 2 * ql + 2 * hd /*q_norm, kv_norm*/;
    if (ol % 32 != 0) e.wo_a_extra += 2 * (G * ol) * (H * hd / G) - fp8(G * ol, H * hd / G);
    if (contains(c.kv_source_layer_ids, l)) {
      const int r = c.compress_ratios[size_t(l)];
      e.compressor += 2 * hd * D * (r > 1 ? 2 : 1) + 2 * hd + 2 * ihd * hd + 2 * ihd;
    }
    if (contains(c.index_source_layer_ids, l)) e.indexer += fp8(IH * ihd, ql) + 2 * IH * D;
    e.router += 2 * E * D + 4 * E;
    e.one_expert = 2 * fp4(inter, D) + fp4(D, inter);
    e.routed += c.num_experts_per_tok * e.one_expert;
    e.shared += 2 * fp8(inter, D) + fp8(D, inter);
    const int64_t mix = (2 + hc) * hc;
    e.mhc += 2 * (4 * mix * hc * D + 4 * mix + 4 * 3);
    e.norms += 2 * 2 * D;
  }
  e.norms += 2 * D;  // final norm
  const int64_t cols = int64_t(c.engram_max_ngram_size - 1) * c.engram_n_heads;
  for (size_t i = 0; i < c.engram_layer_ids.size(); ++i)
    e.engram += fp8(D * (hc + 1), cols * c.engram_head_dim) + 2 * 2 * hc * D +
                cols * (c.engram_head_dim + c.engram_head_dim / 32);
  e.embedding_row = 2 * D;
  e.head = 2 * c.vocab_size * D;
  return e;
}

void expect_weights(const DecodeTraffic& d, const Expected& e) {
  EXPECT_EQ(d.attention, e.attention);
  EXPECT_EQ(d.compressor, e.compressor);
  EXPECT_EQ(d.indexer, e.indexer);
  EXPECT_EQ(d.router, e.router);
  EXPECT_EQ(d.routed_experts, e.routed);
  EXPECT_EQ(d.routed_expert_bytes, e.one_expert);
  // a pass that ran k experts in every layer reads what a single stream reads
  EXPECT_EQ(d.weights_of_pass(double(e.routed) / double(e.one_expert)), d.weights());
  EXPECT_EQ(d.weights_of_pass(0.0), d.weights() - d.routed_experts);
  EXPECT_EQ(d.mhc, e.mhc);
  EXPECT_EQ(d.norms, e.norms);
  EXPECT_EQ(d.engram, e.engram);
  EXPECT_EQ(d.embedding_row, e.embedding_row);
  EXPECT_EQ(d.head, e.head);
  EXPECT_EQ(d.wo_a_engine_extra, e.wo_a_extra);
}

ModelConfig validated(ModelConfig c) {
  c.validate();
  return c;
}

TEST(BenchAccounting, TinyDecodeWeightsMatchClosedForm) {
  const ModelConfig c = preset_config("tiny");
  for (int64_t L : {0, 1, 127, 300}) {  // weights do not depend on the context
    const DecodeTraffic d = decode_traffic(c, L);
    expect_weights(d, expected_weights(c));
  }
  // a concrete anchor for the tiny preset (D 128, 7 layers, 2 of 8 experts of width 64):
  // the bf16 head dominates, 129280 x 128 x 2 bytes
  EXPECT_EQ(decode_traffic(c, 0).head, 33095680);
}

TEST(BenchAccounting, TinyDecodeKvMatchesClosedForm) {
  const ModelConfig c = preset_config("tiny");
  // tiny: ratios [0,0,2,2,1,1,1], top-k 16, index sources 2 (r2), 4 (r1, candidate source),
  // 5 (r1, uses the pool of 4 blocks of 8); rows: window 132 B, main 72 B, index key 68 B.
  for (int64_t L : {0, 1, 5, 31, 32, 33, 100, 127, 128, 300, 1000}) {
    const int64_t v = L + 1;
    const int64_t window = 7 * std::min<int64_t>(v, 128) * (128 + 4);
    const int64_t comp = (2 * std::min<int64_t>(16, v / 2) + 3 * std::min<int64_t>(16, v)) * 72;
    const int64_t nblk = cdiv(v, 8);
    const int64_t pool = nblk <= 4 ? v : 3 * 8 + (v - (nblk - 1) * 8);
    const int64_t idx = (v / 2 + v + pool) * 68;
    const DecodeTraffic d = decode_traffic(c, L);
    EXPECT_EQ(d.kv_window, window) << "L=" << L;
    EXPECT_EQ(d.kv_compressed, comp) << "L=" << L;
    EXPECT_EQ(d.kv_index_keys, idx) << "L=" << L;
    EXPECT_EQ(d.kv(), window + comp + idx);
    EXPECT_EQ(d.total(), d.weights() + d.kv());
  }
  // the pool caps layer 5's keys at 4 blocks: 32 rows when block-aligned
  EXPECT_EQ(decode_traffic(c, 1023).kv_index_keys, (512 + 1024 + 32) * 68);
}

TEST(BenchAccounting, ParamsMatchInspectActivatedPerGeneratedToken) {
  for (const char* name : {"tiny", "small"}) {
    const ModelConfig c = validated(preset_config(name));
    const ParamCounts p = count_params(c, expected_tensors(c));
    EXPECT_EQ(decode_traffic(c, 0).weight_params, p.active_generated) << name;
  }
}

TEST(BenchAccounting, ReleasedDecodeBytes) {
  const ModelConfig c = validated(ModelConfig::from_file(std::string(CEDAR_SOURCE_DIR) +
                                                         "/tests/fixtures/released-config.json"));
  const DecodeTraffic d = decode_traffic(c, 0);
  expect_weights(d, expected_weights(c));
  // `cedar inspect`: 15.816B activated per generated token (the routers' vision-language bias,
  // which a text decode step does not read, is counted with the vision parameters)
  const ParamCounts p = count_params(c, expected_tensors(c));
  EXPECT_EQ(d.weight_params, p.active_generated);
  EXPECT_NEAR(double(d.weight_params) / 1e9, 15.816, 0.001);
  // Storage dtypes: FP8 attention 5.06 GB + shared expert 1.42 GB (~1 B/param), FP4 routed
  // experts 4.51 GB (0.53 B/param), bf16 head 1.32 GB, fp32 mHC + bf16 router 0.31 GB, Engram
  // projections 0.31 GB, compressors/indexers 0.09 GB -> ~13.0 GB per token for 15.8B params.
  const double gb = double(d.weights()) / 1e9;
  EXPECT_GT(gb, 12.9);
  EXPECT_LT(gb, 13.1);
  EXPECT_NEAR(double(d.attention) / 1e9, 5.06, 0.01);
  EXPECT_NEAR(double(d.routed_experts) / 1e9, 4.51, 0.01);
  EXPECT_EQ(d.head, int64_t(2) * 129280 * 5120);
  EXPECT_EQ(d.routed_experts, int64_t(40) * 6 * 3 * fp4(2304, 5120));
  // wo_a: o_lora_rank 1024 is a multiple of 32, so the engine reads its FP8 bytes (kFP8W)
  EXPECT_EQ(d.wo_a_engine_extra, 0);

  // KV at 1M context: rings 40 x 128 x 528; every compressed layer reads its 512 Top-K rows of
  // 288 B; indexers 2/8/14 score every ratio-2 key, 20 every ratio-1 key, 24..36 the 16,384-row
  // pool (68 B each).
  const int64_t L = 1048575, v = L + 1;
  const DecodeTraffic k = decode_traffic(c, L);
  EXPECT_EQ(k.kv_window, int64_t(40) * 128 * 528);
  EXPECT_EQ(k.kv_compressed, int64_t(38) * 512 * 288);
  EXPECT_EQ(k.kv_index_keys, (3 * (v / 2) + v + 4 * 16384) * int64_t(68));
}

TEST(BenchAccounting, PrefillTinyOneTokenClosedForm) {
  const ModelConfig c = preset_config("tiny");
  // one row through every layer: MACs = logical weight elements of every matrix it multiplies
  const int64_t D = 128, H = 4, hd = 128, ql = 64, G = 2, ol = 64, inter = 64, hc = 4;
  int64_t macs = 0;
  for (int l = 0; l < 7; ++l) {
    macs += ql * D + H * hd * ql + hd * D + G * ol * (H * hd / G) + D * G * ol;  // attention
    macs += 2 * (24 * hc * D);                                                   // hc_fn x 2
    macs += 8 * D;                                                               // router
    macs += 3 * (2 * inter * D + D * inter);  // 2 routed + shared
  }
  macs += 2 * hd * D + hd * D;         // compressor wkv+wgate (layer 2, r2), wkv (layer 4)
  macs += 128 * hd;                    // indexer wk of layer 4 (r=1: one row completed)
  macs += 3 * (4 * 128 * ql + 4 * D);  // indexer wq_b + weights_proj (layers 2, 4, 5)
  macs += 2 * (5 * D * 6 * 32);        // Engram wkv (layers 1, 2)
  macs += int64_t(129280) * D;         // head, last row
  for (auto plan : {PrefillPlan::kExact, PrefillPlan::kCed}) {
    const PrefillFlops f = prefill_flops(c, 1, plan);
    EXPECT_DOUBLE_EQ(f.weight_gemm, 2.0 * double(macs));
    // keys: 1 window row everywhere + 1 Top-K row in the r=1 layers 4, 5, 6
    EXPECT_DOUBLE_EQ(f.attention, 4.0 * 4 * 128 * (7 + 3));
    // scored keys: layer 2 none yet (r=2), layers 4 and 5 one each
    EXPECT_DOUBLE_EQ(f.indexer, 2.0 * 4 * 128 * 2);
    EXPECT_EQ(f.layer_rows, 7);
  }
}

TEST(BenchAccounting, CedEqualsExactUpToOneWindow) {
  for (const char* name : {"tiny", "small"}) {
    const ModelConfig c = preset_config(name);
    ASSERT_TRUE(has_ced_split(c)) << name;
    // the decoder replays the last min(128, N) rows from position N - 128: for N <= 128 that is
    // every row with no truncation, i.e. exactly the exact plan
    for (int64_t n : {1, 2, 64, 127, 128}) {
      const PrefillFlops a = prefill_flops(c, n, PrefillPlan::kExact);
      const PrefillFlops b = prefill_flops(c, n, PrefillPlan::kCed);
      EXPECT_DOUBLE_EQ(a.total(), b.total()) << name << " n=" << n;
      EXPECT_EQ(a.layer_rows, b.layer_rows);
    }
    // beyond one window CED does strictly less of every kind of work
    for (int64_t n : {129, 512, 2048}) {
      const PrefillFlops a = prefill_flops(c, n, PrefillPlan::kExact);
      const PrefillFlops b = prefill_flops(c, n, PrefillPlan::kCed);
      EXPECT_LT(b.weight_gemm, a.weight_gemm) << name << " n=" << n;
      EXPECT_LT(b.attention, a.attention) << name << " n=" << n;
      EXPECT_LE(b.indexer, a.indexer) << name << " n=" << n;
      EXPECT_EQ(a.layer_rows, n * c.num_hidden_layers);
      EXPECT_EQ(b.layer_rows, n * c.candidate_source_layer_id +
                                  128 * (c.num_hidden_layers - c.candidate_source_layer_id));
    }
  }
}

TEST(BenchAccounting, ReleasedPrefillGemmMatchesActivatedParams) {
  const ModelConfig c = validated(ModelConfig::from_file(std::string(CEDAR_SOURCE_DIR) +
                                                         "/tests/fixtures/released-config.json"));
  const ParamCounts p = count_params(c, expected_tensors(c));
  const int64_t n = 65536;
  const PrefillFlops ex = prefill_flops(c, n, PrefillPlan::kExact);
  const PrefillFlops ced = prefill_flops(c, n, PrefillPlan::kCed);
  // GEMM MACs per row = the activated matrices: inspect's counts minus the head (once per
  // prompt here), plus Engram wkv; vectors (norms, biases, sinks) are not GEMMs: < 0.1%.
  const double ex_macs = ex.gemm_per_row() / 2;
  const double ex_want = double(p.active_generated - p.head + p.engram_active_generated);
  EXPECT_NEAR(ex_macs / ex_want, 1.0, 1e-3);
  // CED: the encoder per row + the decoder once per window of 128 rows (spec §9.2: ~8B/token)
  const double ced_macs = ced.gemm_per_row() / 2;
  const double ced_want = double(p.active_prompt + p.engram_active_prompt) +
                          double(p.active_generated - p.head - p.active_prompt) * 128.0 / double(n);
  EXPECT_NEAR(ced_macs / ced_want, 1.0, 1e-3);
  EXPECT_NEAR(ced_macs / 1e9, 7.9, 0.1);
  // at a 2K prompt the GEMM work halves (ratio ~1.9, spec "8B instead of 16B")
  const double r2k = prefill_flops(c, 2048, PrefillPlan::kExact).weight_gemm /
                     prefill_flops(c, 2048, PrefillPlan::kCed).weight_gemm;
  EXPECT_GT(r2k, 1.7);
  EXPECT_LT(r2k, 2.1);
}

TEST(BenchAccounting, DecodeFlopsIsOneMoreExactRow) {
  for (const char* name : {"tiny", "small"}) {
    const ModelConfig c = preset_config(name);
    const double head = 2.0 * double(c.vocab_size) * c.hidden_size;
    // position 0: a one-token exact prompt (which computes the head once too)
    EXPECT_DOUBLE_EQ(decode_flops(c, 0).total(), prefill_flops(c, 1, PrefillPlan::kExact).total());
    for (int64_t p : {1, 2, 63, 128, 200, 777}) {
      const PrefillFlops a = prefill_flops(c, p, PrefillPlan::kExact);
      const PrefillFlops b = prefill_flops(c, p + 1, PrefillPlan::kExact);
      const PrefillFlops d = decode_flops(c, p);
      EXPECT_DOUBLE_EQ(d.weight_gemm, b.weight_gemm - a.weight_gemm + head) << name << " " << p;
      EXPECT_DOUBLE_EQ(d.attention, b.attention - a.attention) << name << " " << p;
      EXPECT_DOUBLE_EQ(d.indexer, b.indexer - a.indexer) << name << " " << p;
    }
  }
}

TEST(BenchAccounting, BadInput) {
  const ModelConfig c = preset_config("tiny");
  EXPECT_THROW(decode_traffic(c, -1), std::runtime_error);
  EXPECT_THROW(prefill_flops(c, 0, PrefillPlan::kExact), std::runtime_error);
  EXPECT_THROW(decode_flops(c, -1), std::runtime_error);
  ModelConfig bad = c;
  bad.hidden_size = 0;
  EXPECT_THROW(decode_traffic(bad, 0), std::runtime_error);
  EXPECT_THROW(prefill_flops(bad, 1, PrefillPlan::kCed), std::runtime_error);
}

}  // namespace
}  // namespace cedar::bench
