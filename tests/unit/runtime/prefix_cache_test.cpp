// PrefixCache on a generated tiny model (cedar make-model --preset tiny --seed 2):
//  * exact restore (memory tier, or disk units with the window) continues bit-identically to the
//    cold run: same logits bit for bit, same greedy tokens;
//  * a disk unit without the window is restored by SWA Bounded Replay: the global rows and
//    ratio-2 tails are the cold run's (never rewritten), the window starts at h - 128, and the
//    logits differ from the cold run's by a measured amount (printed; random weights);
//  * a longer cached state serves a shorter prefix (truncate + replay);
//  * through the Generator: hit tokens reported as usage.cached_tokens, memory then disk;
//  * a corrupt unit is refused with a warning and the cache falls back.
// CEDAR_PREFIX_MEASURE=1 [CEDAR_PREFIX_PRESET=small CEDAR_PREFIX_TOKENS=2048] runs the
// measurement reported in docs/PREFIX_CACHE.md (timings printed, never asserted).
#include "runtime/prefix_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generator.h"

namespace cedar::runtime {
namespace {

namespace fs = std::filesystem;

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

std::string make_model(const std::string& preset, int seed) {
  static std::vector<std::string> dirs;
  char tmpl[] = "/tmp/cedar-prefix-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return "";
  const std::string dir = std::string(tmpl) + "/" + preset;
  const std::string cmd = cedar_bin() + " make-model --preset " + preset + " --seed " +
                          std::to_string(seed) + " --out " + dir + " > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return "";
  return dir;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Forward helpers straight on the Transformer (the Generator is exercised separately).
std::vector<float> prefill(Engine& e, SequenceState& st, std::span<const int32_t> ids,
                           PrefillMode mode) {
  std::vector<float> logits(size_t(e.config().vocab_size));
  ForwardOptions fo;
  fo.mode = mode;
  e.model().forward(st, ids.data(), int(ids.size()), st.n_tokens, fo, logits.data());
  return logits;
}

int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// n greedy tokens after `logits` (the state's next-token logits).
std::vector<int32_t> greedy(Engine& e, SequenceState& st, std::vector<float> logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t t = argmax(logits);
    out.push_back(t);
    if (i + 1 < n) logits = prefill(e, st, std::span<const int32_t>(&t, 1), PrefillMode::kExact);
  }
  return out;
}

double rel_l2(const std::vector<float>& ref, const std::vector<float>& x) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(x[i]) - ref[i]) * (double(x[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

int agree(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) n += a[i] == b[i];
  return n;
}

class PrefixCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(make_model("tiny", 2));
    ASSERT_FALSE(model_dir_->empty()) << "cedar make-model failed";
    EngineOptions o;
    o.model_dir = *model_dir_;
    o.threads = 2;
    engine_ = Engine::load(o).release();
    std::mt19937 rng(11);
    ids_ = new std::vector<int32_t>(700);
    for (auto& v : *ids_) v = int32_t(rng() % uint32_t(engine_->config().vocab_size));
  }
  static void TearDownTestSuite() {
    delete engine_;
    fs::remove_all(fs::path(*model_dir_).parent_path());
    delete model_dir_;
    delete ids_;
  }
  void SetUp() override {
    cache_dir_ =
        (fs::path(*model_dir_).parent_path() /
         (std::string("cache_") + ::testing::UnitTest::GetInstance()->current_test_info()->name()))
            .string();
    fs::remove_all(cache_dir_);
  }
  PrefixCacheOptions opts(bool disk, bool window, uint64_t memory) {
    PrefixCacheOptions o;
    o.memory_bytes = memory;
    o.disk_dir = disk ? cache_dir_ : "";
    o.store_window = window;
    o.interval = 256;
    o.warn = [this](const std::string& m) { warnings_.push_back(m); };
    return o;
  }
  static std::span<const int32_t> ids(int64_t n) { return {ids_->data(), size_t(n)}; }

  static std::string* model_dir_;
  static Engine* engine_;
  static std::vector<int32_t>* ids_;
  std::string cache_dir_;
  std::vector<std::string> warnings_;
};
std::string* PrefixCacheTest::model_dir_ = nullptr;
Engine* PrefixCacheTest::engine_ = nullptr;
std::vector<int32_t>* PrefixCacheTest::ids_ = nullptr;

void expect_same_global(const SequenceState& a, const SequenceState& b) {
  ASSERT_EQ(a.n_tokens, b.n_tokens);
  EXPECT_EQ(a.engram_history, b.engram_history);
  for (size_t l = 0; l < a.compressed.size(); ++l) {
    const auto &x = a.compressed[l], &y = b.compressed[l];
    EXPECT_EQ(x.n_rows, y.n_rows) << l;
    EXPECT_TRUE(x.kv_fp4 == y.kv_fp4 && x.kv_scale == y.kv_scale) << "layer " << l;
    EXPECT_TRUE(x.ik_fp4 == y.ik_fp4 && x.ik_scale == y.ik_scale) << "layer " << l;
    EXPECT_EQ(x.n_tail, y.n_tail) << l;
    EXPECT_TRUE(x.tail_k == y.tail_k && x.tail_z == y.tail_z) << "tail of layer " << l;
  }
}

// The headline exactness property: cold logits == restored-with-window logits, bit for bit.
TEST_F(PrefixCacheTest, ExactRestoreFromDiskIsBitIdenticalToTheColdRun) {
  Engine& e = *engine_;
  const int64_t h = 401;  // odd: a half-filled ratio-2 group is in the unit
  SequenceState cold = e.model().new_state();
  const auto cold_logits = prefill(e, cold, ids(700), PrefillMode::kExact);
  {
    PrefixCache writer(e, opts(true, true, 0));
    SequenceState st = e.model().new_state();
    prefill(e, st, ids(h), PrefillMode::kExact);
    writer.offer(ids(h), st, PrefixCacheHook::Point::kPromptEnd);
    EXPECT_EQ(writer.disk()->units(), 1u);
  }
  PrefixCache reader(e, opts(true, true, 0));  // a new process
  SequenceState st = e.model().new_state();
  ASSERT_EQ(reader.restore(e, ids(700), 699, &st), h);
  const RestoreInfo info = reader.last_restore();
  EXPECT_EQ(info.source, RestoreInfo::Source::kDisk);
  EXPECT_FALSE(info.replayed);
  const auto warm_logits = prefill(e, st, ids(700).subspan(size_t(h)), PrefillMode::kExact);
  ASSERT_EQ(warm_logits.size(), cold_logits.size());
  EXPECT_EQ(std::memcmp(warm_logits.data(), cold_logits.data(), cold_logits.size() * 4), 0);
  EXPECT_EQ(greedy(e, st, warm_logits, 8), greedy(e, cold, cold_logits, 8));
  EXPECT_TRUE(warnings_.empty());
}

// Exact restore is exact w.r.t. the state whatever the prefill mode: a CED-prefilled prompt
// saved with its window continues exactly like the state that was saved.
TEST_F(PrefixCacheTest, ExactRestoreOfACedStateContinuesLikeTheSavedState) {
  Engine& e = *engine_;
  SequenceState orig = e.model().new_state();
  prefill(e, orig, ids(500), PrefillMode::kCed);
  PrefixCache c(e, opts(true, true, 0));
  c.offer(ids(500), orig, PrefixCacheHook::Point::kPromptEnd);
  SequenceState st = e.model().new_state();
  ASSERT_EQ(c.restore(e, ids(700), 699, &st), 500);
  EXPECT_EQ(st.window_from, orig.window_from);
  const auto a = prefill(e, orig, ids(700).subspan(500), PrefillMode::kCed);
  const auto b = prefill(e, st, ids(700).subspan(500), PrefillMode::kCed);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

TEST_F(PrefixCacheTest, MemoryHitIsExactAndPreferredOverAReplayedDiskUnit) {
  Engine& e = *engine_;
  PrefixCache c(e, opts(true, false, uint64_t(1) << 30));
  SequenceState st = e.model().new_state();
  prefill(e, st, ids(400), PrefillMode::kExact);
  c.offer(ids(400), st, PrefixCacheHook::Point::kPromptEnd);
  EXPECT_EQ(c.stats().memory_entries, 1);
  EXPECT_EQ(c.disk()->units(), 1u);
  SequenceState got = e.model().new_state();
  ASSERT_EQ(c.restore(e, ids(700), 699, &got), 400);
  EXPECT_EQ(c.last_restore().source, RestoreInfo::Source::kMemory);
  EXPECT_FALSE(c.last_restore().replayed);
  SequenceState cold = e.model().new_state();
  const auto a = prefill(e, cold, ids(700), PrefillMode::kExact);
  const auto b = prefill(e, got, ids(700).subspan(400), PrefillMode::kExact);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  // the memory entry is a copy: using the restored state did not change it
  SequenceState again = e.model().new_state();
  ASSERT_EQ(c.restore(e, ids(700), 699, &again), 400);
  EXPECT_EQ(again.n_tokens, 400);
  const auto s = c.stats();
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.hit_tokens, 800);
  EXPECT_EQ(s.miss_tokens, 600);
}

// SWA Bounded Replay restore: global rows and tails untouched, window rebuilt from h - 128, and
// the logits' distance to the cold run measured.
TEST_F(PrefixCacheTest, ReplayRestoreKeepsGlobalRowsAndIsMeasured) {
  Engine& e = *engine_;
  const int64_t h = 401;
  SequenceState at_h = e.model().new_state();
  prefill(e, at_h, ids(h), PrefillMode::kExact);
  PrefixCache c(e, opts(true, false, 0));
  c.offer(ids(h), at_h, PrefixCacheHook::Point::kPromptEnd);
  SequenceState st = e.model().new_state();
  ASSERT_EQ(c.restore(e, ids(700), 699, &st), h);
  const RestoreInfo info = c.last_restore();
  EXPECT_EQ(info.source, RestoreInfo::Source::kDisk);
  EXPECT_TRUE(info.replayed);
  EXPECT_EQ(info.replay_start, h - 128);
  EXPECT_EQ(st.window_from, h - 128);
  expect_same_global(at_h, st);  // the persisted ratio-2 tail (h odd) included
  // the replayed window differs from the exact one only through the truncation at s
  int differing = 0;
  for (size_t l = 0; l < st.window.size(); ++l)
    differing += st.window[l].codes != at_h.window[l].codes;
  EXPECT_GT(differing, 0);
  EXPECT_EQ(st.window[0].codes, at_h.window[0].codes);  // layer 0 has no earlier window to lose
  // the disk path adds nothing to the replay: the same as replaying the cold state in place
  SequenceState direct = at_h;
  direct.drop_window();
  e.model().replay(direct, ids(h), 0);
  for (size_t l = 0; l < st.window.size(); ++l) {
    EXPECT_EQ(st.window[l].codes, direct.window[l].codes) << l;
    EXPECT_EQ(st.window[l].scales, direct.window[l].scales) << l;
  }

  SequenceState cold = e.model().new_state();
  const auto cold_logits = prefill(e, cold, ids(700), PrefillMode::kExact);
  const auto warm_logits = prefill(e, st, ids(700).subspan(size_t(h)), PrefillMode::kExact);
  for (float v : warm_logits) ASSERT_TRUE(std::isfinite(v));
  const double r = rel_l2(cold_logits, warm_logits);
  const auto g_cold = greedy(e, cold, cold_logits, 16), g_warm = greedy(e, st, warm_logits, 16);
  std::printf(
      "[replay restore, tiny seed 2] h=%lld, suffix 299: rel L2 %.3e, greedy %d/16, "
      "argmax %s\n",
      (long long)h, r, agree(g_cold, g_warm), g_cold[0] == g_warm[0] ? "same" : "differs");
  EXPECT_GT(r, 0.0);  // the truncated window is not the exact one
}

// A unit of at most `window` tokens replays from position 0: no truncation, so the restore is
// exact (the persisted tail and the rebuilt window equal the cold run's).
TEST_F(PrefixCacheTest, ReplayOfAUnitWithinOneWindowIsExact) {
  Engine& e = *engine_;
  SequenceState at = e.model().new_state();
  prefill(e, at, ids(101), PrefillMode::kExact);
  DiskCacheOptions o;
  o.dir = cache_dir_;
  DiskCache dc(e.config(), model_fingerprint(*model_dir_), o);
  dc.save(ids(101), at, false);
  auto u = dc.load_longest(ids(300), 299);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->state.window_from, 101);
  EXPECT_EQ(e.model().replay(u->state, ids(101), 0), 0);
  for (size_t l = 0; l < at.window.size(); ++l)
    EXPECT_EQ(u->state.window[l].codes, at.window[l].codes);
  SequenceState cold = e.model().new_state();
  const auto a = prefill(e, cold, ids(300), PrefillMode::kExact);
  const auto b = prefill(e, u->state, ids(300).subspan(101), PrefillMode::kExact);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

TEST_F(PrefixCacheTest, LongerCachedStateServesAShorterPrefixByTruncation) {
  Engine& e = *engine_;
  PrefixCache c(e, opts(false, false, uint64_t(1) << 30));
  SequenceState st = e.model().new_state();
  prefill(e, st, ids(500), PrefillMode::kExact);
  c.offer(ids(500), st, PrefixCacheHook::Point::kAnswerEnd);
  // the same 500-token prompt again: at most 499 may be reused
  SequenceState got = e.model().new_state();
  ASSERT_EQ(c.restore(e, ids(500), 499, &got), 499);
  EXPECT_EQ(c.last_restore().cached_len, 500);
  EXPECT_TRUE(c.last_restore().replayed);
  EXPECT_EQ(got.n_tokens, 499);
  EXPECT_EQ(got.compressed[2].n_tail, 1);  // recomputed by the replay (odd length)
  std::vector<float> logits = prefill(e, got, ids(500).subspan(499), PrefillMode::kExact);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  // a diverging request: the common prefix (300) is served, short prefixes are not
  std::vector<int32_t> other(ids_->begin(), ids_->begin() + 600);
  other[300] = (other[300] + 1) % int32_t(e.config().vocab_size);
  ASSERT_EQ(c.restore(e, other, 599, &got), 300);
  other[100] = (other[100] + 1) % int32_t(e.config().vocab_size);
  SequenceState none = e.model().new_state();
  EXPECT_EQ(c.restore(e, other, 599, &none), 0);  // 100 tokens: replay would cost more
  EXPECT_EQ(none.n_tokens, 0);
  // truncation off: only whole entries
  PrefixCacheOptions o = opts(false, false, uint64_t(1) << 30);
  o.allow_truncate = false;
  PrefixCache strict(e, o);
  strict.offer(ids(500), st, PrefixCacheHook::Point::kAnswerEnd);
  EXPECT_EQ(strict.restore(e, ids(500), 499, &none), 0);
}

TEST_F(PrefixCacheTest, MemoryBudgetEvictsLeastRecentlyUsed) {
  Engine& e = *engine_;
  SequenceState a = e.model().new_state(), b = e.model().new_state();
  prefill(e, a, ids(300), PrefillMode::kExact);
  prefill(e, b, ids(350), PrefillMode::kExact);
  const uint64_t one = a.bytes() + 300 * 4;
  PrefixCache c(e, opts(false, false, one + one / 2));
  c.offer(ids(300), a, PrefixCacheHook::Point::kPromptEnd);
  c.offer(ids(350), b, PrefixCacheHook::Point::kPromptEnd);  // evicts the 300 entry
  EXPECT_EQ(c.stats().memory_entries, 1);
  EXPECT_LE(c.stats().memory_bytes, one + one / 2);
  SequenceState got = e.model().new_state();
  EXPECT_EQ(c.restore(e, ids(700), 699, &got), 350);
  EXPECT_FALSE(c.last_restore().replayed);
  c.offer(ids(300), a, PrefixCacheHook::Point::kInterval);  // interval points: disk only
  EXPECT_EQ(c.stats().memory_entries, 1);
}

TEST_F(PrefixCacheTest, GeneratorReportsHitTokensFromMemoryThenDisk) {
  Engine& e = *engine_;
  PrefixCache c(e, opts(true, false, uint64_t(1) << 30));
  GenerationOptions g;
  g.sampling.temperature = 0;
  g.max_tokens = 4;
  g.prefill_chunk = 128;
  std::vector<int32_t> p1(ids_->begin(), ids_->begin() + 600);
  GenerationResult r1;
  {
    Generator gen(e, &c);
    r1 = gen.generate(p1, g);
  }
  EXPECT_EQ(r1.usage.cached_tokens, 0);
  // disk units: intervals 256 and 512, prompt end 600, answer end 600 + 3
  EXPECT_EQ(c.disk()->lengths(),
            (std::vector<int64_t>{256, 512, 600, 600 + int64_t(r1.tokens.size()) - 1}));
  // next turn: prompt + answer + more
  std::vector<int32_t> p2 = p1;
  p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end());
  p2.insert(p2.end(), ids_->begin() + 600, ids_->end());
  const int64_t answer_end = 600 + int64_t(r1.tokens.size()) - 1;
  GenerationResult r2;
  {
    Generator gen(e, &c);
    r2 = gen.generate(p2, g);
  }
  EXPECT_EQ(r2.usage.cached_tokens, answer_end);
  EXPECT_EQ(r2.prefill_computed, int64_t(p2.size()) - answer_end);
  EXPECT_EQ(c.last_restore().source, RestoreInfo::Source::kMemory);
  c.clear_memory();
  GenerationResult r3;
  {
    Generator gen(e, &c);
    r3 = gen.generate(p2, g);
  }
  // the longest disk unit is r2's prompt end (all of p2): cut to p2.size() - 1, replayed
  EXPECT_EQ(r3.usage.cached_tokens, int64_t(p2.size()) - 1);
  EXPECT_EQ(c.last_restore().source, RestoreInfo::Source::kDisk);
  EXPECT_EQ(c.last_restore().cached_len, int64_t(p2.size()));
  EXPECT_TRUE(c.last_restore().replayed);
  std::printf(
      "[generator, tiny] prefill cold %.3fs (%zu tok), memory hit %.3fs, disk hit %.3fs "
      "(%lld cached); greedy memory vs disk %d/%zu\n",
      r1.prefill_seconds, p1.size(), r2.prefill_seconds, r3.prefill_seconds,
      (long long)r3.usage.cached_tokens, agree(r2.tokens, r3.tokens), r2.tokens.size());
}

TEST_F(PrefixCacheTest, CorruptUnitIsRefusedAndTheCacheFallsBack) {
  Engine& e = *engine_;
  SequenceState st = e.model().new_state();
  PrefixCache c(e, opts(true, false, 0));
  prefill(e, st, ids(300), PrefillMode::kExact);
  c.offer(ids(300), st, PrefixCacheHook::Point::kInterval);
  prefill(e, st, ids(500).subspan(300), PrefillMode::kExact);
  c.offer(ids(500), st, PrefixCacheHook::Point::kPromptEnd);
  const std::string path = cache_dir_ + "/" + c.disk()->unit_name(ids(500));
  fs::resize_file(path, fs::file_size(path) / 2);
  SequenceState got = e.model().new_state();
  EXPECT_EQ(c.restore(e, ids(700), 699, &got), 300);
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_[0].find("truncated"), std::string::npos) << warnings_[0];
  // a unit from another model (fingerprint) under this prefix's name is never used
  const std::string p300 = cache_dir_ + "/" + c.disk()->unit_name(ids(300));
  ModelFingerprint other{};
  other[0] = 1;
  write_snapshot_file(p300, serialize_snapshot(st, ids(500), other, false));  // foreign content
  SequenceState none = e.model().new_state();
  EXPECT_EQ(c.restore(e, ids(700), 699, &none), 0);
  EXPECT_EQ(none.n_tokens, 0);
}

// The reported bug: units of a checkpoint with another rope_theta were restored, because the
// engine-level constructor hashed nothing. A disk unit is only restored by a cache over the same
// checkpoint, tokenizer and kernel table.
TEST_F(PrefixCacheTest, DiskUnitsAreOnlyRestoredForTheSameModelAndKernels) {
  Engine& e = *engine_;
  {
    PrefixCache c(e, opts(true, true, 0));
    SequenceState st = e.model().new_state();
    prefill(e, st, ids(300), PrefillMode::kExact);
    c.offer(ids(300), st, PrefixCacheHook::Point::kPromptEnd);
  }
  auto restored = [&](Engine& eng) {
    PrefixCache c(eng, opts(true, true, 0));
    SequenceState got = eng.model().new_state();
    return c.restore(eng, ids(400), 399, &got);
  };
  EXPECT_EQ(restored(e), 300);  // the same model: restored
  // a copy of the checkpoint with another rope_theta
  const fs::path other = fs::path(*model_dir_).parent_path() / "other_rope";
  fs::remove_all(other);
  fs::copy(*model_dir_, other, fs::copy_options::recursive);
  std::ifstream in(other / "config.json");
  std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const size_t at = cfg.find("\"rope_theta\"");
  ASSERT_NE(at, std::string::npos);
  cfg.insert(cfg.find_first_of("0123456789", cfg.find(':', at)), "2");  // 10000 -> 210000
  std::ofstream(other / "config.json", std::ios::trunc) << cfg;
  EngineOptions o;
  o.model_dir = other.string();
  o.threads = 2;
  auto e2 = Engine::load(o);
  EXPECT_EQ(restored(*e2), 0);
  // the same checkpoint under another kernel table
  for (const KernelTable* k : supported_kernel_tables()) {
    if (k->name == e.kernels().name) continue;
    EngineOptions ok;
    ok.model_dir = *model_dir_;
    ok.threads = 2;
    ok.kernels = std::string(k->name);
    auto e3 = Engine::load(ok);
    EXPECT_EQ(restored(*e3), 0) << k->name;
  }
  fs::remove_all(other);
}

// Measurement for docs/PREFIX_CACHE.md (printed, not asserted).
TEST_F(PrefixCacheTest, Measure) {
  if (!std::getenv("CEDAR_PREFIX_MEASURE")) GTEST_SKIP() << "set CEDAR_PREFIX_MEASURE=1";
  const char* pe = std::getenv("CEDAR_PREFIX_PRESET");
  const char* te = std::getenv("CEDAR_PREFIX_TOKENS");
  const std::string preset = pe ? pe : "tiny";
  const int64_t T = te ? std::atoll(te) : 2048, Q = 64, G = 64;
  const std::string dir = preset == "tiny" ? *model_dir_ : make_model(preset, 2);
  ASSERT_FALSE(dir.empty());
  EngineOptions eo;
  eo.model_dir = dir;
  eo.threads = 2;
  auto ep = Engine::load(eo);
  Engine& e = *ep;
  std::mt19937 rng(23);
  std::vector<int32_t> all(size_t(T + Q));
  for (auto& v : all) v = int32_t(rng() % uint32_t(e.config().vocab_size));
  const std::span<const int32_t> P(all.data(), size_t(T)), full(all);
  for (PrefillMode mode : {PrefillMode::kExact, PrefillMode::kCed}) {
    const char* mname = mode == PrefillMode::kExact ? "exact" : "CED";
    // cold: the whole prompt
    SequenceState cold = e.model().new_state();
    auto t0 = std::chrono::steady_clock::now();
    const auto cold_logits = prefill(e, cold, full, mode);
    const double t_cold = seconds_since(t0);
    const auto g_cold = greedy(e, cold, cold_logits, int(G));
    // the shared prefix, saved both ways
    SequenceState at = e.model().new_state();
    prefill(e, at, P, mode);
    for (bool window : {false, true}) {
      fs::remove_all(cache_dir_);
      PrefixCache w(e, opts(true, window, 0));
      w.offer(P, at, PrefixCacheHook::Point::kPromptEnd);
      const uint64_t file = w.disk()->bytes_used();
      PrefixCache r(e, opts(true, window, 0));
      SequenceState st = e.model().new_state();
      t0 = std::chrono::steady_clock::now();
      const int64_t got = r.restore(e, full, int64_t(full.size()) - 1, &st);
      const double t_restore = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      const auto warm = prefill(e, st, full.subspan(size_t(got)), mode);
      const double t_suffix = seconds_since(t0);
      const auto g_warm = greedy(e, st, warm, int(G));
      int first_div = int(G);
      for (int i = 0; i < G; ++i)
        if (g_cold[size_t(i)] != g_warm[size_t(i)]) {
          first_div = i;
          break;
        }
      std::printf(
          "[measure %s %s] prompt %lld+%lld, unit %s: %llu B (%.1f B/token); cold %.3fs, "
          "warm %.3fs (restore %.3fs%s + suffix %.3fs), speedup x%.1f; rel L2 %.3e, "
          "bit-identical %s, greedy %d/%lld (first divergence %d)\n",
          preset.c_str(), mname, (long long)T, (long long)Q, window ? "with window" : "global only",
          (unsigned long long)file, double(file) / double(T), t_cold, t_restore + t_suffix,
          t_restore, r.last_restore().replayed ? " incl. replay" : "", t_suffix,
          t_cold / (t_restore + t_suffix), rel_l2(cold_logits, warm),
          std::memcmp(cold_logits.data(), warm.data(), warm.size() * 4) == 0 ? "yes" : "no",
          agree(g_cold, g_warm), (long long)G, first_div);
    }
  }
  if (preset != "tiny") fs::remove_all(fs::path(dir).parent_path());
}

}  // namespace
}  // namespace cedar::runtime
