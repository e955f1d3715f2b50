// ExpertCache on a generated tiny checkpoint: the bytes it serves are the checkpoint's, the
// policies evict what they say, pins are honoured, and a shard truncated under it is a clear
// error that leaves the cache usable for experts it can still read.
#include "forward/expert_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "forward/weights.h"
#include "model/make_model.h"
#include "model/presets.h"

namespace {

namespace fs = std::filesystem;
using namespace cedar;

class ExpertCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cedar_expert_cache_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_checkpoint(preset_config("tiny"), 7, dir_.string(), 1, "tiny");
    fs::copy_file(CEDAR_DEFAULT_TOKENIZER, dir_ / "tokenizer.json");
    ck_ = Checkpoint::open(dir_.string());
    w_ = std::make_unique<ModelWeights>(ModelWeights::bind(*ck_));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // expert e of layer l as the mapping holds it, byte for byte against what the cache serves
  static bool same(const ExpertWeights& a, const ExpertWeights& b) {
    auto eq = [](const Linear& x, const Linear& y) {
      const size_t wb = x.kind == Linear::Kind::FP4 ? size_t(x.out) * x.in / 2
                                                    : size_t(x.out) * x.in;  // FP8 / I8 bytes
      return x.kind == y.kind && std::memcmp(x.w, y.w, wb) == 0 &&
             (!x.scale || std::memcmp(x.scale, y.scale, size_t(x.out) * x.in / 32) == 0);
    };
    return eq(a.w1, b.w1) && eq(a.w2, b.w2) && eq(a.w3, b.w3);
  }

  fs::path dir_;
  std::unique_ptr<Checkpoint> ck_;
  std::unique_ptr<ModelWeights> w_;
};

TEST_F(ExpertCacheTest, ServesTheCheckpointsBytesAndCountsHits) {
  ExpertCache c(*ck_, *w_, size_t(1) << 30, 1, 3);
  EXPECT_EQ(c.capacity(), 3);
  EXPECT_GT(c.slot_bytes(), 0u);
  const int ids[] = {1, 4};
  const ExpertWeights* out[2] = {};
  c.acquire(0, ids, 2, out);
  EXPECT_TRUE(same(*out[0], w_->layers[0].experts[1]));
  EXPECT_TRUE(same(*out[1], w_->layers[0].experts[4]));
  EXPECT_NE(out[0]->w1.w, w_->layers[0].experts[1].w1.w);  // a copy, not the mapping
  c.release(0, ids, 2);
  c.acquire(0, ids, 2, out);
  c.release(0, ids, 2);
  const ExpertCacheStats s = c.stats();
  EXPECT_EQ(s.lookups, 4);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.evictions, 0);
  EXPECT_GT(s.bytes_read, 0);
}

TEST_F(ExpertCacheTest, LfuKeepsTheFrequentExpertLruTheRecentOne) {
  for (EvictionPolicy p : {EvictionPolicy::kLfu, EvictionPolicy::kLru}) {
    ExpertCache c(*ck_, *w_, size_t(1) << 30, 1, 2, p);
    const ExpertWeights* out[1] = {};
    auto use = [&](int e) {
      c.acquire(0, &e, 1, out);
      EXPECT_TRUE(same(*out[0], w_->layers[0].experts[size_t(e)]));
      c.release(0, &e, 1);
    };
    use(0), use(0), use(0), use(1), use(2);  // 2 evicts 1 under LFU, 0 under LRU
    const int64_t before = c.stats().hits;
    use(0);
    EXPECT_EQ(c.stats().hits - before, p == EvictionPolicy::kLfu ? 1 : 0);
  }
}

TEST_F(ExpertCacheTest, PrefetchedExpertsAreReadOnceAndServedByAcquire) {
  ExpertCache c(*ck_, *w_, size_t(1) << 30, 1, 4);
  const int ids[] = {2, 5, 7};
  c.prefetch(2, ids, 3);
  c.prefetch(2, ids, 3);  // already in flight or read: nothing more
  const ExpertWeights* out[3] = {};
  c.acquire(2, ids, 3, out);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same(*out[i], w_->layers[2].experts[size_t(ids[i])]));
  c.release(2, ids, 3);
  ExpertCacheStats s = c.stats();
  EXPECT_EQ(s.prefetched, 3);
  EXPECT_EQ(s.hits, 0);
  const int64_t reads = s.reads;
  c.acquire(2, ids, 3, out);
  c.release(2, ids, 3);
  s = c.stats();
  EXPECT_EQ(s.hits, 3);
  EXPECT_EQ(s.reads, reads);
  c.prefetch(2, ids, -1);  // nonsense hints are ignored
  const int bad = 99;
  c.prefetch(2, &bad, 1);
  c.prefetch(1000, ids, 3);
  EXPECT_THROW(c.acquire(2, &bad, 1, out), std::runtime_error);
}

TEST_F(ExpertCacheTest, PinnedSlotsAreNeverEvicted) {
  ExpertCache c(*ck_, *w_, size_t(1) << 30, 1, 2);
  const int a[] = {0, 1};
  const ExpertWeights* out[2] = {};
  c.acquire(1, a, 2, out);
  const int b = 2;
  EXPECT_THROW(c.acquire(1, &b, 1, out), std::runtime_error);
  const int three[] = {0, 1, 2};
  EXPECT_THROW(c.acquire(1, three, 3, out), std::runtime_error);  // over capacity
  c.release(1, a, 2);
  c.acquire(1, &b, 1, out);
  EXPECT_TRUE(same(*out[0], w_->layers[1].experts[2]));
  c.release(1, &b, 1);
}

TEST_F(ExpertCacheTest, ABudgetBelowTheLeastIsRefused) {
  try {
    ExpertCache c(*ck_, *w_, 1000, 2);
    FAIL() << "accepted a 1000-byte cache";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--mem-budget"), std::string::npos) << e.what();
  }
}

TEST_F(ExpertCacheTest, ATruncatedShardIsAClearErrorNotData) {
  ExpertCache c(*ck_, *w_, size_t(1) << 30, 1, 2);
  // the routed expert stored last in the file, and its file offset
  int cut_layer = -1, cut_id = -1;
  size_t cut = 0;
  for (size_t l = 0; l < w_->layers.size(); ++l)
    for (size_t e = 0; e < w_->layers[l].experts.size(); ++e) {
      const auto at = ck_->locate(w_->layers[l].experts[e].w1.w, 1);
      ASSERT_TRUE(at.has_value());
      if (at->offset >= cut) cut = at->offset, cut_layer = int(l), cut_id = int(e);
    }
  // cut the file inside that expert (the mapping is never read afterwards: its pages past the
  // new end are gone)
  fs::resize_file(ck_->locate(w_->layers[0].experts[0].w1.w, 1)->path, cut + 1);
  const ExpertWeights* out[2] = {};
  try {
    c.acquire(cut_layer, &cut_id, 1, out);
    FAIL() << "served a truncated expert";
  } catch (const std::runtime_error& err) {
    EXPECT_NE(std::string(err.what()).find("short read"), std::string::npos) << err.what();
  }
  // nothing stays pinned and no slot holds the partial read: both slots serve other experts
  const int other[] = {cut_id == 0 ? 1 : 0, cut_id == 2 ? 3 : 2};
  c.acquire(cut_layer, other, 2, out);
  EXPECT_TRUE(same(*out[0], w_->layers[size_t(cut_layer)].experts[size_t(other[0])]));
  c.release(cut_layer, other, 2);
  EXPECT_THROW(c.acquire(cut_layer, &cut_id, 1, out), std::runtime_error);
}

}  // namespace
