// Shared by the forward tests: a generated tiny checkpoint with its Transformer, and the
// bit-level comparisons of logits and sequence states.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "forward/transformer.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "text/engram_token_map.h"
#include "text/tokenizer.h"

namespace cedar::testutil {

inline std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

inline int run_quiet(const std::string& cmd) {
  return std::system((cmd + " > /dev/null 2>&1").c_str());
}

// `cedar make-model --preset PRESET --seed SEED` in a temporary directory (removed again), loaded
// with the reference kernels on a pool of `threads`.
struct TinyRig {
  TinyRig(int seed, const std::string& tag, int threads = 2, const std::string& preset = "tiny") {
    std::string tmpl = "/tmp/cedar_" + tag + "_XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
    const std::string m = dir + "/" + preset;
    if (run_quiet(cedar_bin() + " make-model --preset " + preset + " --seed " +
                  std::to_string(seed) + " --out " + m) != 0)
      throw std::runtime_error("cedar make-model failed");
    ckpt = Checkpoint::open(m);
    const auto tok = text::Tokenizer::load(m + "/tokenizer.json");
    map = text::build_engram_token_map(tok).map;
    pool = std::make_unique<ThreadPool>(threads);
    model = std::make_unique<Transformer>(*ckpt, choose_kernels("ref"), *pool, map);
  }
  ~TinyRig() {
    model.reset();
    std::filesystem::remove_all(dir);
  }
  std::string dir;
  std::unique_ptr<Checkpoint> ckpt;
  std::vector<int32_t> map;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Transformer> model;
};

// n pseudo-random ordinary token ids (below the added tokens) from seed.
inline std::vector<int32_t> random_ids(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, 127999);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = id(rng);
  return v;
}

inline bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  // Empty vectors may hold null data, which memcmp must not be given even for zero bytes.
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The global half of two states: compressed rows, tails, Engram history, token count.
inline void expect_same_global(const SequenceState& a, const SequenceState& b) {
  ASSERT_EQ(a.compressed.size(), b.compressed.size());
  for (size_t l = 0; l < a.compressed.size(); ++l) {
    const auto &ca = a.compressed[l], &cb = b.compressed[l];
    EXPECT_EQ(ca.n_rows, cb.n_rows) << "layer " << l;
    EXPECT_EQ(ca.kv_fp4, cb.kv_fp4) << "layer " << l;
    EXPECT_EQ(ca.kv_scale, cb.kv_scale) << "layer " << l;
    EXPECT_EQ(ca.ik_fp4, cb.ik_fp4) << "layer " << l;
    EXPECT_EQ(ca.ik_scale, cb.ik_scale) << "layer " << l;
    EXPECT_EQ(ca.n_tail, cb.n_tail) << "layer " << l;
    EXPECT_EQ(ca.tail_k, cb.tail_k) << "layer " << l;
    EXPECT_EQ(ca.tail_z, cb.tail_z) << "layer " << l;
  }
  EXPECT_EQ(a.engram_history, b.engram_history);
  EXPECT_EQ(a.n_tokens, b.n_tokens);
}

// Every field of the state that a forward writes, compared exactly.
inline void expect_same_state(const SequenceState& a, const SequenceState& b) {
  expect_same_global(a, b);
  EXPECT_EQ(a.dec_tokens, b.dec_tokens);
  EXPECT_EQ(a.window_from, b.window_from);
  EXPECT_EQ(a.ced_stream.first, b.ced_stream.first);
  EXPECT_EQ(a.ced_stream.rows, b.ced_stream.rows);
  EXPECT_EQ(a.ced_stream.h, b.ced_stream.h);
  EXPECT_EQ(a.ced_stream.pre, b.ced_stream.pre);
  ASSERT_EQ(a.window.size(), b.window.size());
  for (size_t l = 0; l < a.window.size(); ++l) {
    EXPECT_EQ(a.window[l].codes, b.window[l].codes) << "layer " << l;
    EXPECT_EQ(a.window[l].scales, b.window[l].scales) << "layer " << l;
  }
  // the DSpark rings' extent (two empty ones are alike wherever they sit) and contents
  if (a.dspark_from < a.dspark_to || b.dspark_from < b.dspark_to) {
    EXPECT_EQ(a.dspark_from, b.dspark_from);
    EXPECT_EQ(a.dspark_to, b.dspark_to);
  }
  ASSERT_EQ(a.dspark.size(), b.dspark.size());
  for (size_t s = 0; s < a.dspark.size(); ++s) {
    EXPECT_EQ(a.dspark[s].codes, b.dspark[s].codes) << "DSpark stage " << s;
    EXPECT_EQ(a.dspark[s].scales, b.dspark[s].scales) << "DSpark stage " << s;
  }
}

}  // namespace cedar::testutil
