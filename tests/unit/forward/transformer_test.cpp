// The forward pass on a generated tiny checkpoint (cedar make-model): one-shot prefill, chunked
// prefill (chunk sizes that split a ratio-2 group, a candidate block and the 128-row window) and
// token-by-token decode must give bit-identical logits and identical sequence state. T = 300
// makes the indexer Top-K (16) and the candidate pool (4 blocks of 8) limits bite.
#include "forward/transformer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/scratch.h"
#include "base/thread_pool.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "text/engram_token_map.h"
#include "text/tokenizer.h"
#include "tiny_fixture.h"

namespace cedar {
namespace {

using testutil::bit_equal;
using testutil::cedar_bin;
using testutil::expect_same_state;
int run(const std::string& cmd) { return testutil::run_quiet(cmd); }

class TinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/cedar_forward_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    const std::string model = *dir_ + "/tiny";
    ASSERT_EQ(run(cedar_bin() + " make-model --preset tiny --seed 3 --out " + model), 0);
    ckpt_ = Checkpoint::open(model).release();
    const auto tok = text::Tokenizer::load(model + "/tokenizer.json");
    map_ = new std::vector<int32_t>(text::build_engram_token_map(tok).map);
    pool_ = new ThreadPool(2);
    model_ = new Transformer(*ckpt_, choose_kernels("ref"), *pool_, *map_);
    std::mt19937 rng(17);
    std::uniform_int_distribution<int32_t> id(0, int32_t(ckpt_->config().vocab_size - 1));
    ids_ = new std::vector<int32_t>(300);
    for (auto& v : *ids_) v = id(rng);
    (*ids_)[5] = (*ids_)[9] = (*ids_)[13];  // repeated n-grams for Engram
    (*ids_)[6] = (*ids_)[10] = (*ids_)[14];
  }
  static void TearDownTestSuite() {
    delete model_;
    delete pool_;
    delete map_;
    delete ckpt_;
    delete ids_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  // Feeds ids[0..T) in calls of `chunk` tokens; returns all logits [T, vocab].
  static std::vector<float> logits(int chunk, SequenceState* out_state = nullptr, int T = 300) {
    const int64_t V = model_->config().vocab_size;
    SequenceState st = model_->new_state();
    std::vector<float> all(size_t(T) * size_t(V));
    for (int p = 0; p < T; p += chunk) {
      const int n = std::min(chunk, T - p);
      model_->forward(st, ids_->data() + p, n, p, LogitsWanted::kAll, all.data() + size_t(p) * V);
    }
    if (out_state) *out_state = std::move(st);
    return all;
  }

  static std::string* dir_;
  static Checkpoint* ckpt_;
  static std::vector<int32_t>* map_;
  static ThreadPool* pool_;
  static Transformer* model_;
  static std::vector<int32_t>* ids_;
};

std::string* TinyModel::dir_ = nullptr;
Checkpoint* TinyModel::ckpt_ = nullptr;
std::vector<int32_t>* TinyModel::map_ = nullptr;
ThreadPool* TinyModel::pool_ = nullptr;
Transformer* TinyModel::model_ = nullptr;
std::vector<int32_t>* TinyModel::ids_ = nullptr;

TEST_F(TinyModel, ChunkedPrefillAndDecodeAreBitIdenticalToOneShot) {
  SequenceState st_one;
  const auto one = logits(300, &st_one);
  // sanity: finite, not constant, the compressed caches grew as the ratios say
  for (size_t i = 0; i < one.size(); i += 997) ASSERT_TRUE(std::isfinite(one[i]));
  EXPECT_NE(one[0], one[1]);
  const ModelConfig& cfg = model_->config();
  for (int l = 0; l < cfg.num_hidden_layers; ++l)
    if (cfg.plan(l).is_kv_source) {
      EXPECT_EQ(st_one.compressed[size_t(l)].n_rows, 300 / cfg.plan(l).ratio);
    }
  for (int chunk : {1, 2, 3, 7, 64, 127, 128, 129}) {
    SequenceState st;
    const auto c = logits(chunk, &st);
    EXPECT_TRUE(bit_equal(c, one)) << "chunk " << chunk;
    expect_same_state(st, st_one);
  }
}

TEST_F(TinyModel, ResultsDoNotDependOnThreadCount) {
  const auto two = logits(300, nullptr, 40);
  ThreadPool single(1);
  Transformer m1(*ckpt_, choose_kernels("ref"), single, *map_);
  SequenceState st = m1.new_state();
  const int64_t V = m1.config().vocab_size;
  std::vector<float> one(size_t(40) * V);
  m1.forward(st, ids_->data(), 40, 0, LogitsWanted::kAll, one.data());
  EXPECT_TRUE(bit_equal(one, two));
}

TEST_F(TinyModel, LastRowLogitsEqualTheLastRowOfAll) {
  const int64_t V = model_->config().vocab_size;
  const auto all = logits(300, nullptr, 20);
  SequenceState st = model_->new_state();
  std::vector<float> last(static_cast<size_t>(V));
  model_->forward(st, ids_->data(), 20, 0, LogitsWanted::kLast, last.data());
  EXPECT_EQ(std::memcmp(last.data(), all.data() + size_t(19) * V, size_t(V) * 4), 0);
}

TEST_F(TinyModel, RejectsBadIdsAndPositions) {
  SequenceState st = model_->new_state();
  const int64_t V = model_->config().vocab_size;
  std::vector<float> out(static_cast<size_t>(V));
  const int32_t bad = int32_t(V);
  EXPECT_THROW(model_->forward(st, &bad, 1, 0, LogitsWanted::kLast, out.data()),
               std::runtime_error);
  EXPECT_EQ(st.n_tokens, 0);
  const int32_t ok = 5;
  EXPECT_THROW(model_->forward(st, &ok, 1, 3, LogitsWanted::kLast, out.data()), std::runtime_error);
  model_->forward(st, &ok, 1, 0, LogitsWanted::kLast, out.data());
  EXPECT_EQ(st.n_tokens, 1);
}

std::vector<char> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST_F(TinyModel, CliWritesNpyAndChunkingMatches) {
  const std::string m = *dir_ + "/tiny", a = *dir_ + "/a.npy", b = *dir_ + "/b.npy",
                    c = *dir_ + "/c.npy";
  const std::string ids = "0,5,7,100,2000,3,77,1234,99999,129279,42";
  const std::string cli = cedar_bin() + " logits --model " + m + " --ids " + ids;
  ASSERT_EQ(run(cli + " --kernels ref --out " + a), 0);
  ASSERT_EQ(run(cli + " --kernels ref --out " + b + " --chunk 3 --threads 1"), 0);
  ASSERT_EQ(run(cli + " --kernels ref --out " + c + " --decode"), 0);
  // the default (fastest) table is batch-invariant too: one-shot = chunked = decode
  const std::string d = *dir_ + "/d.npy", e = *dir_ + "/e.npy", f = *dir_ + "/f.npy";
  ASSERT_EQ(run(cli + " --out " + d), 0);
  ASSERT_EQ(run(cli + " --out " + e + " --chunk 3 --threads 1"), 0);
  ASSERT_EQ(run(cli + " --out " + f + " --decode"), 0);
  EXPECT_EQ(slurp(d), slurp(e));
  EXPECT_EQ(slurp(d), slurp(f));
  const auto fa = slurp(a);
  EXPECT_EQ(fa, slurp(b));
  EXPECT_EQ(fa, slurp(c));
  // header: .npy v1.0, '<f4', shape (11, vocab); payload 11 * vocab * 4 bytes
  ASSERT_GT(fa.size(), 128u);
  EXPECT_EQ(std::string(fa.data() + 1, 5), "NUMPY");
  const std::string head(fa.data(), 128);
  EXPECT_NE(head.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(head.find("'shape': (11, 129280)"), std::string::npos);
  const size_t hlen = size_t(uint8_t(fa[8])) | (size_t(uint8_t(fa[9])) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(fa.size(), 10 + hlen + size_t(11) * 129280 * 4);
  // the CLI logits equal the in-process ones
  std::vector<int32_t> v = {0, 5, 7, 100, 2000, 3, 77, 1234, 99999, 129279, 42};
  SequenceState st = model_->new_state();
  std::vector<float> mem(size_t(11) * 129280);
  model_->forward(st, v.data(), 11, 0, LogitsWanted::kAll, mem.data());
  EXPECT_EQ(std::memcmp(fa.data() + 10 + hlen, mem.data(), mem.size() * 4), 0);
}

TEST_F(TinyModel, CliErrors) {
  const std::string m = *dir_ + "/tiny", o = *dir_ + "/e.npy";
  EXPECT_NE(run(cedar_bin() + " logits --model " + m + " --ids 1,129280 --out " + o), 0);
  EXPECT_NE(run(cedar_bin() + " logits --model " + m + " --ids 1,x2 --out " + o), 0);
  EXPECT_NE(run(cedar_bin() + " logits --model " + m + " --ids '' --out " + o), 0);
  EXPECT_NE(run(cedar_bin() + " logits --model " + *dir_ + "/nope --ids 1 --out " + o), 0);
  EXPECT_NE(run(cedar_bin() + " logits --model " + m + " --ids 1 --out " + o + " --kernels x"), 0);
  EXPECT_NE(run(cedar_bin() + " logits --model " + m + " --ids 1 --out " + o + " --chunk 0"), 0);
  const std::string msg = *dir_ + "/msg.txt";
  EXPECT_EQ(std::system(
                (cedar_bin() + " logits --model " + m + " --ids 1,129280 --out " + o + " 2> " + msg)
                    .c_str()) != 0,
            true);
  const auto text = slurp(msg);
  EXPECT_NE(std::string(text.begin(), text.end()).find("129280"), std::string::npos);
}

// The per-forward workspace (base/scratch.h): once a decode step has run, later steps take their
// working buffers from the threads' caches. Only a buffer that outgrows its size class (the
// index scores grow with the context) goes to the heap, a handful of times over 64 steps where a
// step used to take thousands of buffers.
TEST_F(TinyModel, DecodeStepsReuseTheirWorkingBuffers) {
  const int64_t V = model_->config().vocab_size;
  std::vector<float> out(static_cast<size_t>(V));
  for (const KernelTable* k : supported_kernel_tables()) {
    Transformer m(*ckpt_, *k, *pool_, *map_);
    SequenceState st = m.new_state();
    m.forward(st, ids_->data(), 100, 0, LogitsWanted::kLast, out.data());
    for (int p = 100; p < 104; ++p)
      m.forward(st, ids_->data() + p, 1, p, LogitsWanted::kLast, out.data());
    const size_t before = scratch::heap_acquires();
    for (int p = 104; p < 168; ++p)
      m.forward(st, ids_->data() + p, 1, p, LogitsWanted::kLast, out.data());
    EXPECT_LE(scratch::heap_acquires() - before, 8u) << k->name;
    std::printf("[ info ] %s: %zu scratch buffers from the heap over 64 decode steps\n",
                std::string(k->name).c_str(), scratch::heap_acquires() - before);
  }
}

}  // namespace
}  // namespace cedar
