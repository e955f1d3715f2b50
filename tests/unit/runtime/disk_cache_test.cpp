// DiskCache: unit naming, longest-prefix lookup, persistence across instances, LRU eviction
// under the byte budget, and refusal (with a warning, never trusted) of corrupt, truncated,
// foreign, other-version and mislabeled units. States are synthetic (random rows in the tiny
// layout); the model-level restore is in prefix_cache_test.cpp.
#include "runtime/disk_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/presets.h"

namespace cedar::runtime {
namespace {

namespace fs = std::filesystem;

ModelFingerprint fp_of(uint8_t seed) {
  ModelFingerprint f{};
  for (size_t i = 0; i < f.size(); ++i) f[i] = uint8_t(seed * 31 + i);
  return f;
}

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_ = preset_config("tiny");
    cfg_.validate();
    dir_ = (fs::temp_directory_path() /
            ("cedar_disk_cache_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    std::mt19937 rng(5);
    ids_.resize(1000);
    for (auto& v : ids_) v = int32_t(rng() % uint32_t(cfg_.vocab_size));
  }
  void TearDown() override { fs::remove_all(dir_); }

  DiskCacheOptions opts(uint64_t budget = uint64_t(1) << 30, bool chain = true) {
    DiskCacheOptions o;
    o.dir = dir_;
    o.max_bytes = budget;
    o.chain = chain;
    o.warn = [this](const std::string& m) { warnings_.push_back(m); };
    return o;
  }

  // The state after ids[0..n): the first rows of one random 1000-token state (so that states of
  // different lengths agree on their common rows, as forwards of one sequence do), with a tail,
  // history and window of its own.
  SequenceState state(int64_t n) const {
    std::mt19937 rng(77);
    // random codes, never the NaN codes 0x7F / 0xFF that no quantizer writes (refused on load)
    auto code = [&rng] {
      uint8_t b;
      do b = uint8_t(rng());
      while ((b & 0x7F) == 0x7F);
      return b;
    };
    SequenceState st(cfg_);
    st.n_tokens = st.dec_tokens = n;
    for (auto& c : st.compressed) {
      if (c.ratio == 0) continue;
      std::vector<uint8_t> kp(size_t(c.head_dim / 2)), ks(size_t(c.head_dim / 16)),
          ip(size_t(c.index_head_dim / 2)), is(size_t(c.index_head_dim / 32));
      for (int64_t r = 0; r < 1000 / c.ratio; ++r) {
        for (auto* v : {&kp, &ks, &ip, &is})
          for (auto& b : *v) b = code();
        if (r < n / c.ratio) c.append(kp.data(), ks.data(), ip.data(), is.data());
      }
      c.n_tail = int(n % c.ratio);
      for (int i = 0; i < c.n_tail * c.head_dim; ++i) c.tail_k[size_t(i)] = float(i + n);
    }
    rng.seed(static_cast<unsigned>(n));
    for (int i = 0; i < std::min<int64_t>(n, cfg_.engram_max_ngram_size - 1); ++i)
      st.engram_history.push_back(int32_t(rng() % 1000));
    for (auto& w : st.window)
      for (auto& b : w.codes) b = code();
    return st;
  }
  std::span<const int32_t> prefix(int64_t n) const { return {ids_.data(), size_t(n)}; }
  uint64_t unit_bytes(int64_t n, bool win = false, int64_t base = 0) const {
    return snapshot_bytes(cfg_, n, win, base);
  }
  void expect_state(const SequenceState& got, int64_t n) const {
    const SequenceState want = state(n);
    ASSERT_EQ(got.n_tokens, n);
    EXPECT_EQ(got.engram_history, want.engram_history);
    for (size_t l = 0; l < want.compressed.size(); ++l) {
      EXPECT_EQ(got.compressed[l].n_rows, want.compressed[l].n_rows) << l;
      EXPECT_EQ(got.compressed[l].kv_fp4, want.compressed[l].kv_fp4) << l;
      EXPECT_EQ(got.compressed[l].ik_scale, want.compressed[l].ik_scale) << l;
      EXPECT_EQ(got.compressed[l].n_tail, want.compressed[l].n_tail) << l;
      EXPECT_EQ(got.compressed[l].tail_k, want.compressed[l].tail_k) << l;
    }
  }

  ModelConfig cfg_;
  std::string dir_;
  std::vector<int32_t> ids_;
  std::vector<std::string> warnings_;
};

TEST_F(DiskCacheTest, LongestPrefixLookupAndPersistence) {
  {
    DiskCache dc(cfg_, fp_of(1), opts());
    EXPECT_EQ(dc.save(prefix(200), state(200), false), unit_bytes(200));
    EXPECT_EQ(dc.save(prefix(401), state(401), false), unit_bytes(401, false, 200));  // extends 200
    EXPECT_EQ(dc.save(prefix(401), state(401), false), 0u);  // present: touched, not rewritten
    EXPECT_EQ(dc.units(), 2u);
    EXPECT_EQ(dc.bytes_used(), unit_bytes(200) + unit_bytes(401, false, 200));
    EXPECT_EQ(dc.base_of(prefix(401)), 200);
    EXPECT_EQ(dc.lengths(), (std::vector<int64_t>{200, 401}));
    EXPECT_TRUE(fs::exists(dir_ + "/" + dc.unit_name(prefix(401))));
  }
  DiskCache dc(cfg_, fp_of(1), opts());  // a new process: the index is rebuilt from the headers
  EXPECT_EQ(dc.units(), 2u);
  auto u = dc.load_longest(ids_, 999);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->tokens.size(), 401u);
  EXPECT_FALSE(u->has_window);
  EXPECT_EQ(u->state.window_from, 401);  // needs a replay
  EXPECT_EQ(u->state.compressed[2].n_tail, 1);
  expect_state(u->state, 401);     // the chain 200 -> 401 rebuilt
  u = dc.load_longest(ids_, 400);  // the 401 unit is too long: the 200 one
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->tokens.size(), 200u);
  EXPECT_FALSE(dc.load_longest(ids_, 999, 402).has_value());  // min_len
  std::vector<int32_t> other = ids_;
  other[150] = (other[150] + 1) % int32_t(cfg_.vocab_size);  // diverges inside both units
  EXPECT_FALSE(dc.load_longest(other, 999).has_value());
  other = ids_;
  other[300] = (other[300] + 1) % int32_t(cfg_.vocab_size);  // diverges inside the 401 unit
  u = dc.load_longest(other, 999);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->tokens.size(), 200u);
  EXPECT_EQ(dc.stats().hits, 3);
  EXPECT_EQ(dc.stats().misses, 2);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(DiskCacheTest, NamesDependOnModelAndExactPrefix) {
  DiskCache a(cfg_, fp_of(1), opts());
  DiskCache b(cfg_, fp_of(2), opts());
  EXPECT_NE(a.unit_name(prefix(300)), b.unit_name(prefix(300)));
  EXPECT_NE(a.unit_name(prefix(300)), a.unit_name(prefix(301)));
  EXPECT_EQ(a.unit_name(prefix(300)),
            a.unit_name(std::vector<int32_t>(ids_.begin(), ids_.begin() + 300)));
  EXPECT_EQ(a.unit_name(prefix(300)).size(), 32u + 5u);
}

TEST_F(DiskCacheTest, WindowUnitsReplaceWindowlessOnes) {
  DiskCache dc(cfg_, fp_of(1), opts());
  dc.save(prefix(300), state(300), false);
  EXPECT_EQ(dc.save(prefix(300), state(300), true), unit_bytes(300, true));  // upgraded
  EXPECT_EQ(dc.save(prefix(300), state(300), false), 0u);  // a window unit serves both
  EXPECT_EQ(dc.units(), 1u);
  EXPECT_EQ(dc.bytes_used(), unit_bytes(300, true));
  auto u = dc.load_longest(ids_, 999);
  ASSERT_TRUE(u.has_value());
  EXPECT_TRUE(u->has_window);
  EXPECT_EQ(u->state.window[3].codes, state(300).window[3].codes);
}

TEST_F(DiskCacheTest, LruEvictionUnderTheBudget) {
  const uint64_t budget = unit_bytes(300) + unit_bytes(400) + unit_bytes(500) / 2;
  DiskCache dc(cfg_, fp_of(1), opts(budget, false));  // self-contained units
  dc.save(prefix(300), state(300), false);
  dc.save(prefix(400), state(400), false);
  ASSERT_TRUE(dc.load_longest(ids_, 300).has_value());  // 300 is now the most recent
  dc.save(prefix(500), state(500), false);              // over budget: 400 goes
  EXPECT_EQ(dc.lengths(), (std::vector<int64_t>{300, 500}));
  EXPECT_LE(dc.bytes_used(), budget);
  EXPECT_EQ(dc.stats().evictions, 1);
  EXPECT_FALSE(fs::exists(dir_ + "/" + dc.unit_name(prefix(400))));
  // the LRU order survives a restart (file mtimes): 300 older than 500
  DiskCache again(cfg_, fp_of(1), opts(budget, false));
  again.save(prefix(450), state(450), false);
  EXPECT_EQ(again.lengths(), (std::vector<int64_t>{450, 500}));
  // a unit larger than the whole budget is not saved
  DiskCache small(cfg_, fp_of(1), opts(1000));
  EXPECT_EQ(small.save(prefix(600), state(600), false), 0u);
  EXPECT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_.back().find("exceeds the whole cache budget"), std::string::npos);
}

TEST_F(DiskCacheTest, CorruptUnitIsSkippedWithWarningDeletedAndShorterOneUsed) {
  DiskCache dc(cfg_, fp_of(1), opts());
  dc.save(prefix(200), state(200), false);
  dc.save(prefix(500), state(500), false);
  const std::string path = dir_ + "/" + dc.unit_name(prefix(500));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    char c = 0;
    f.read(&c, 1);
    f.seekp(5000);
    c = char(c ^ 0x40);
    f.write(&c, 1);
  }
  auto u = dc.load_longest(ids_, 999);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->tokens.size(), 200u);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("checksum mismatch"), std::string::npos) << warnings_[0];
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(dc.stats().refused, 1);
}

TEST_F(DiskCacheTest, ChainsStoreEachRowOnceAndDieWithTheirBase) {
  DiskCache dc(cfg_, fp_of(1), opts());
  uint64_t total = 0;
  for (int64_t n : {256, 512, 768, 900}) {
    total += dc.save(prefix(n), state(n), false);
    expect_state(dc.load_longest(ids_, n)->state, n);
  }
  EXPECT_EQ(dc.base_of(prefix(900)), 768);
  EXPECT_EQ(dc.base_of(prefix(256)), 0);
  EXPECT_EQ(total, unit_bytes(256) + unit_bytes(512, false, 256) + unit_bytes(768, false, 512) +
                       unit_bytes(900, false, 768));
  EXPECT_LT(total, unit_bytes(900) + 3 * unit_bytes(0) + 3 * 2 * 4 * 128);  // ~ one 900-token unit
  // a branch: another continuation of the first 512 tokens extends the 512 unit
  std::vector<int32_t> branch(ids_.begin(), ids_.begin() + 700);
  branch[600] ^= 1;
  dc.save(branch, state(700), false);
  EXPECT_EQ(dc.base_of(branch), 512);
  auto u = dc.load_longest(branch, 699 + 1);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->tokens, branch);
  // a restart keeps the chains
  DiskCache again(cfg_, fp_of(1), opts());
  expect_state(again.load_longest(ids_, 999)->state, 900);
  // the base vanishes (deleted by hand): its descendants are refused, deleted, and the longest
  // intact unit is used
  fs::remove(dir_ + "/" + again.unit_name(prefix(512)));
  u = again.load_longest(ids_, 999);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->tokens.size(), 256u);
  EXPECT_FALSE(warnings_.empty());
  EXPECT_FALSE(fs::exists(dir_ + "/" + again.unit_name(prefix(900))));
  EXPECT_FALSE(fs::exists(dir_ + "/" + again.unit_name(branch)));
  EXPECT_EQ(again.lengths(), (std::vector<int64_t>{256}));
}

TEST_F(DiskCacheTest, CorruptBaseTakesItsExtensionsWithIt) {
  DiskCache dc(cfg_, fp_of(1), opts());
  dc.save(prefix(200), state(200), false);
  dc.save(prefix(400), state(400), false);
  dc.save(prefix(600), state(600), false);
  const std::string p400 = dir_ + "/" + dc.unit_name(prefix(400));
  {
    std::fstream f(p400, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x5a');
  }
  auto u = dc.load_longest(ids_, 999);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->tokens.size(), 200u);
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_[0].find("checksum mismatch"), std::string::npos) << warnings_[0];
  EXPECT_EQ(dc.lengths(), (std::vector<int64_t>{200}));
}

TEST_F(DiskCacheTest, EvictingABaseEvictsItsExtensions) {
  const uint64_t budget =
      unit_bytes(300) + unit_bytes(600, false, 300) + unit_bytes(100) + unit_bytes(100) / 2;
  DiskCache dc(cfg_, fp_of(1), opts(budget));
  auto other = [&](int k) {
    return std::vector<int32_t>(ids_.rbegin() + 100 * k, ids_.rbegin() + 100 * k + 100);
  };
  dc.save(prefix(300), state(300), false);
  dc.save(prefix(600), state(600), false);  // extends 300
  ASSERT_EQ(dc.base_of(prefix(600)), 300);
  dc.save(other(0), state(100), false);
  EXPECT_EQ(dc.units(), 3u);
  // a hit on 600 touches its base too: the next newcomer evicts other(0), not the chain root
  ASSERT_TRUE(dc.load_longest(ids_, 999).has_value());
  dc.save(other(1), state(100), false);
  EXPECT_EQ(dc.lengths(), (std::vector<int64_t>{100, 300, 600}));
  EXPECT_EQ(dc.base_of(other(0)), -1);
  // now the chain is the least recent: evicting its root takes the extension with it
  dc.save(other(2), state(100), false);
  EXPECT_EQ(dc.lengths(), (std::vector<int64_t>{100}));
  EXPECT_EQ(dc.units(), 2u);
  EXPECT_LE(dc.bytes_used(), budget);
  EXPECT_FALSE(fs::exists(dir_ + "/" + dc.unit_name(prefix(600))));
  EXPECT_EQ(dc.stats().evictions, 3);
}

TEST_F(DiskCacheTest, TruncatedUnitIsSkippedWithWarning) {
  DiskCache dc(cfg_, fp_of(1), opts());
  dc.save(prefix(500), state(500), false);
  const std::string path = dir_ + "/" + dc.unit_name(prefix(500));
  fs::resize_file(path, fs::file_size(path) - 100);
  EXPECT_FALSE(dc.load_longest(ids_, 999).has_value());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("truncated"), std::string::npos) << warnings_[0];
  // truncated inside the header: found by the scan of a new instance, deleted
  dc.save(prefix(300), state(300), false);
  const std::string p2 = dir_ + "/" + dc.unit_name(prefix(300));
  fs::resize_file(p2, 50);
  DiskCache again(cfg_, fp_of(1), opts());
  EXPECT_EQ(again.units(), 0u);
  EXPECT_FALSE(fs::exists(p2));
  EXPECT_NE(warnings_.back().find("truncated"), std::string::npos) << warnings_.back();
}

TEST_F(DiskCacheTest, ForeignAndOtherVersionUnitsAreNeverTrusted) {
  // another model's unit placed under the name this model looks up
  std::string name;
  {
    DiskCache mine(cfg_, fp_of(1), opts());
    name = mine.unit_name(prefix(300));
  }
  write_snapshot_file(dir_ + "/" + name,
                      serialize_snapshot(state(300), prefix(300), fp_of(9), false));
  {
    // the scan sees a foreign header: counted for the budget, never offered
    DiskCache dc(cfg_, fp_of(1), opts());
    EXPECT_EQ(dc.units(), 1u);
    EXPECT_TRUE(dc.lengths().empty());
    EXPECT_FALSE(dc.load_longest(ids_, 999).has_value());
  }
  // a unit that turns foreign after the scan (another process rewrote it)
  DiskCache dc(cfg_, fp_of(1), opts());
  dc.save(prefix(301), state(301), false);
  const std::string p = dir_ + "/" + dc.unit_name(prefix(301));
  write_snapshot_file(p, serialize_snapshot(state(301), prefix(301), fp_of(9), false));
  EXPECT_FALSE(dc.load_longest(ids_, 999).has_value());
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_.back().find("another model"), std::string::npos) << warnings_.back();
  EXPECT_TRUE(fs::exists(p));  // not ours to delete
  // other format version
  auto bytes = serialize_snapshot(state(302), prefix(302), fp_of(1), false);
  dc.save(prefix(302), state(302), false);
  const uint32_t v = kSnapshotVersion + 7;
  std::memcpy(bytes.data() + 8, &v, 4);
  write_snapshot_file(dir_ + "/" + dc.unit_name(prefix(302)), bytes);
  EXPECT_FALSE(dc.load_longest(ids_, 999).has_value());
  EXPECT_NE(warnings_.back().find("format version"), std::string::npos) << warnings_.back();
}

TEST_F(DiskCacheTest, UnitWhoseTokensDoNotMatchItsNameIsRefused) {
  DiskCache dc(cfg_, fp_of(1), opts());
  dc.save(prefix(300), state(300), false);
  std::vector<int32_t> other(ids_.begin(), ids_.begin() + 300);
  other[7] ^= 1;
  // a valid unit of other tokens under this prefix's name (a collision or a renamed file)
  write_snapshot_file(dir_ + "/" + dc.unit_name(prefix(300)),
                      serialize_snapshot(state(300), other, fp_of(1), false));
  EXPECT_FALSE(dc.load_longest(ids_, 999).has_value());
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_.back().find("do not match"), std::string::npos) << warnings_.back();
}

TEST_F(DiskCacheTest, GarbageFilesAreDeletedOnScanAndOtherFilesIgnored) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/junk.cdkv") << std::string(200, 'j');  // longer than a header
  std::ofstream(dir_ + "/notes.txt") << "keep me";
  DiskCache dc(cfg_, fp_of(1), opts());
  EXPECT_EQ(dc.units(), 0u);
  EXPECT_FALSE(fs::exists(dir_ + "/junk.cdkv"));
  EXPECT_TRUE(fs::exists(dir_ + "/notes.txt"));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("bad magic"), std::string::npos) << warnings_[0];
}

TEST_F(DiskCacheTest, UnusableDirectoryIsAClearError) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/file") << "x";
  DiskCacheOptions o = opts();
  o.dir = dir_ + "/file/sub";
  try {
    DiskCache dc(cfg_, fp_of(1), o);
    ADD_FAILURE() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(o.dir), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile directories: links planted in the cache never lead outside it, and a directory another
// user could write is refused.

// Files outside the cache directory that a planted link points at; each must stay as it was.
class Victims {
 public:
  Victims(const std::string& dir, int n) {
    for (int i = 0; i < n; ++i) {
      paths_.push_back(dir + "_victim" + std::to_string(i));
      std::ofstream(paths_.back()) << "victim " << i;
    }
  }
  ~Victims() {
    for (const auto& p : paths_) fs::remove(p);
  }
  const std::string& operator[](size_t i) const { return paths_[i]; }
  void expect_intact() const {
    for (size_t i = 0; i < paths_.size(); ++i) {
      std::ifstream in(paths_[i]);
      std::string s;
      std::getline(in, s);
      EXPECT_EQ(s, "victim " + std::to_string(i)) << paths_[i];
      EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(paths_[i]))) << paths_[i];
    }
  }

 private:
  std::vector<std::string> paths_;
};

TEST_F(DiskCacheTest, LinksPlantedAtTempPathsAreNeverWrittenThrough) {
  DiskCache dc(cfg_, fp_of(1), opts(uint64_t(1) << 30, /*chain=*/false));
  const Victims victims(dir_, 5);
  // five prompts; for each, links to a victim file outside the directory at the old fixed temp
  // name and at the first three temp names its save will try (attempts count from 0 per cache:
  // prompt i's save tries 4i .. 4i + 2, all taken, then writes 4i + 3)
  for (int i = 0; i < 5; ++i) {
    const std::string unit = dc.unit_name(prefix(200 + i));
    fs::create_symlink(victims[size_t(i)], dir_ + "/" + unit + ".tmp");
    for (uint64_t n = 4 * uint64_t(i); n < 4 * uint64_t(i) + 3; ++n)
      fs::create_symlink(victims[size_t(i)], dir_ + "/" + DirFd::temp_name(unit, n));
  }
  for (int i = 0; i < 5; ++i) EXPECT_GT(dc.save(prefix(200 + i), state(200 + i), false), 0u);
  victims.expect_intact();
  for (int i = 0; i < 5; ++i) {
    auto u = dc.load_longest(prefix(200 + i), 200 + i, 200 + i);
    ASSERT_TRUE(u.has_value()) << i;
    expect_state(u->state, 200 + i);
  }
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(DiskCacheTest, LinksPlantedAtUnitPathsAreRemovedNotFollowed) {
  // before the cache opens: a link named like a unit is deleted by the scan (the link only)
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::owner_all);
  const Victims victims(dir_, 1);
  const std::string unit = dir_ + "/" + DiskCache(cfg_, fp_of(1), opts()).unit_name(prefix(300));
  fs::create_symlink(victims[0], unit);
  warnings_.clear();
  DiskCache dc(cfg_, fp_of(1), opts());
  EXPECT_FALSE(fs::exists(fs::symlink_status(unit)));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("a symbolic link, not a unit"), std::string::npos) << warnings_[0];

  // while it runs: a unit replaced by a link to a copy of itself (valid bytes, outside the
  // directory) is not read through the link; the link goes, the miss is a miss, the copy stays
  ASSERT_GT(dc.save(prefix(300), state(300), false), 0u);
  const std::string copy = dir_ + "_copy";
  fs::copy_file(unit, copy, fs::copy_options::overwrite_existing);
  const auto copy_time = fs::last_write_time(copy);
  fs::remove(unit);
  fs::create_symlink(copy, unit);
  EXPECT_FALSE(dc.load_longest(prefix(300), 300).has_value());
  EXPECT_FALSE(fs::exists(fs::symlink_status(unit)));
  EXPECT_EQ(fs::last_write_time(copy), copy_time);  // not touched as a hit either
  fs::remove(copy);
  // planted again: the next save replaces the link with a real unit
  fs::create_symlink(victims[0], unit);
  ASSERT_GT(dc.save(prefix(300), state(300), false), 0u);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(unit)));
  ASSERT_TRUE(dc.load_longest(prefix(300), 300).has_value());
  victims.expect_intact();
}

// Expects the cache to refuse its directory with an error naming the path and `why`.
void expect_dir_refused(const ModelConfig& cfg, const DiskCacheOptions& o, const std::string& why) {
  try {
    DiskCache dc(cfg, fp_of(1), o);
    ADD_FAILURE() << "accepted " << o.dir;
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("refusing the cache directory " + o.dir), std::string::npos) << m;
    EXPECT_NE(m.find(why), std::string::npos) << m;
  }
}

TEST_F(DiskCacheTest, DirectoriesOthersCanWriteAreRefused) {
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::all);
  expect_dir_refused(cfg_, opts(), "writable by its group and others (mode 0777)");
  fs::permissions(dir_, fs::perms::all | fs::perms::sticky_bit);  // sticky: still refused
  expect_dir_refused(cfg_, opts(), "(mode 1777)");
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_write | fs::perms::group_exec);
  expect_dir_refused(cfg_, opts(), "writable by its group (mode 0730)");
  fs::permissions(dir_, fs::perms::owner_all);
  EXPECT_NO_THROW(DiskCache(cfg_, fp_of(1), opts()));
  // the path may be a link to a private directory (a cache on another disk)
  DiskCacheOptions o = opts();
  o.dir = dir_ + "_link";
  fs::create_directory_symlink(dir_, o.dir);
  EXPECT_NO_THROW(DiskCache(cfg_, fp_of(1), o));
  fs::remove(o.dir);
}

TEST_F(DiskCacheTest, DirectoryOfAnotherOwnerIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another user";
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::owner_all);
  ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
  expect_dir_refused(cfg_, opts(), "owned by uid 65534, not by this process's uid 0");
}

}  // namespace
}  // namespace cedar::runtime
