// EngramStore on a generated tiny checkpoint: rows gathered (prefetched or not, through a cache
// far smaller than the table) are the mapped table's bytes; bad row ids and a table truncated
// under it are clear errors.
#include "forward/engram_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/make_model.h"
#include "model/presets.h"

namespace {

namespace fs = std::filesystem;
using namespace cedar;

class EngramStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cedar_engram_store_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    cfg_ = preset_config("tiny");
    write_checkpoint(cfg_, 3, dir_.string(), 1, "tiny");
    fs::copy_file(CEDAR_DEFAULT_TOKENIZER, dir_ / "tokenizer.json");
    ck_ = Checkpoint::open(dir_.string());
    w_ = std::make_unique<ModelWeights>(ModelWeights::bind(*ck_));
    ASSERT_FALSE(cfg_.engram_layer_ids.empty());
    layer_ = &w_->layers.at(size_t(cfg_.engram_layer_ids[0]));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // gathered rows equal the mapped table's
  // gathered rows: each the table row's codes, then its scales
  bool matches(const std::vector<int64_t>& rows, const std::vector<uint8_t>& got) const {
    const size_t hd = size_t(cfg_.engram_head_dim), sb = hd / 32;
    for (size_t i = 0; i < rows.size(); ++i)
      if (std::memcmp(got.data() + i * (hd + sb), layer_->engram_table + size_t(rows[i]) * hd,
                      hd) ||
          std::memcmp(got.data() + i * (hd + sb) + hd,
                      layer_->engram_table_scale + size_t(rows[i]) * sb, sb))
        return false;
    return true;
  }

  fs::path dir_;
  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ck_;
  std::unique_ptr<ModelWeights> w_;
  const LayerWeights* layer_ = nullptr;
};

TEST_F(EngramStoreTest, GathersTheTablesBytesPrefetchedOrNot) {
  EngramStore st(*ck_, cfg_, *w_, 2048);  // a few dozen rows of a much larger table
  const int64_t R = layer_->engram_rows;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 60; ++i) rows.push_back((i * 7919 + 13) % R);
  rows.push_back(rows[3]);  // a repeat within one gather
  const size_t hd = size_t(cfg_.engram_head_dim);
  ASSERT_EQ(st.row_bytes(0), hd + hd / 32);
  std::vector<uint8_t> got(rows.size() * st.row_bytes(0));
  st.gather(0, rows.data(), int(rows.size()), got.data());
  EXPECT_TRUE(matches(rows, got));
  std::fill(got.begin(), got.end(), 0);
  st.prefetch(0, rows.data(), int(rows.size()));
  st.gather(0, rows.data(), int(rows.size()), got.data());
  EXPECT_TRUE(matches(rows, got));
  const EngramStoreStats s = st.stats();
  EXPECT_EQ(s.lookups, 2 * int64_t(rows.size()));
  EXPECT_GT(s.prefetched + s.hits, 0);
  const int64_t bad = R;
  EXPECT_THROW(st.gather(0, &bad, 1, got.data()), std::runtime_error);
  st.prefetch(0, &bad, 1);  // ignored
  st.prefetch(99, rows.data(), 3);
}

TEST_F(EngramStoreTest, ATruncatedTableIsAClearError) {
  EngramStore st(*ck_, cfg_, *w_, 4096);
  const auto at = ck_->locate(layer_->engram_table, 1);
  ASSERT_TRUE(at.has_value());
  const int64_t R = layer_->engram_rows;
  const size_t hd = size_t(cfg_.engram_head_dim);
  // cut the file inside the codes of the last row (the mapping is not read afterwards)
  fs::resize_file(at->path, at->offset + size_t(R - 1) * hd + 1);
  const int64_t last = R - 1;
  std::vector<uint8_t> row(hd + hd / 32);
  for (int prefetched = 0; prefetched < 2; ++prefetched) {
    if (prefetched) st.prefetch(0, &last, 1);
    try {
      st.gather(0, &last, 1, row.data());
      ADD_FAILURE() << "served a truncated row";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("short read"), std::string::npos) << e.what();
    }
  }
  const int64_t first = 0;  // rows before the cut still read
  st.gather(0, &first, 1, row.data());
  EXPECT_EQ(std::memcmp(row.data(), layer_->engram_table, hd), 0);
}

}  // namespace
