// The DSpark drafter inside the engine (forward/dspark.h): which forwards seed the rings and when
// draft() refuses; a draft after a batched pass or a chunked prompt equals the draft after the
// same rows run alone or at once; a CED prompt seeds the last window. (Bit-identity with the
// numpy reference is tests/model/test_dspark_parity.sh.) Fidelity of the fast kernel tables for
// the draft itself: the same seeded rings and anchor, ref vs fast, where only the draft's own
// arithmetic differs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tiny_fixture.h"

namespace cedar {
namespace {

using testutil::bit_equal;
using testutil::random_ids;
using testutil::TinyRig;

TinyRig& rig() {
  static TinyRig r(4, "dspark_test");
  return r;
}

ForwardOptions seeding(PrefillMode mode = PrefillMode::kExact) {
  ForwardOptions o;
  o.mode = mode;
  o.logits = LogitsWanted::kLast;
  o.dspark_seed = true;
  return o;
}

// Runs ids through one state in calls of `chunk` rows, seeding every call.
SequenceState prefill(const std::vector<int32_t>& ids, int chunk,
                      PrefillMode mode = PrefillMode::kExact) {
  const Transformer& m = *rig().model;
  SequenceState st = m.new_state();
  std::vector<float> logits(size_t(m.config().vocab_size));
  for (size_t p = 0; p < ids.size(); p += size_t(chunk)) {
    const int n = int(std::min(ids.size() - p, size_t(chunk)));
    ForwardOptions o = seeding(mode);
    o.completes_prompt = p + size_t(n) == ids.size();
    if (!o.completes_prompt) o.logits = LogitsWanted::kNone;  // an open CED chunk has none
    m.forward(st, ids.data() + p, n, int64_t(p), o, logits.data());
  }
  return st;
}

void expect_same_draft(const Draft& a, const Draft& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_TRUE(bit_equal(a.logits, b.logits));
  EXPECT_TRUE(bit_equal(a.confidence, b.confidence));
}

TEST(DSpark, TheTinyPresetHasADrafter) {
  const Transformer& m = *rig().model;
  ASSERT_NE(m.dspark(), nullptr);
  EXPECT_EQ(m.dspark()->block_size(), 5);
  EXPECT_EQ(m.config().dspark_target_layer_ids, (std::vector<int>{4, 5, 6}));
}

TEST(DSpark, SeedsOnlyWhenAskedAndRefusesStaleRings) {
  const Transformer& m = *rig().model;
  const std::vector<int32_t> ids = random_ids(40, 1);
  SequenceState st = prefill(ids, 40);
  EXPECT_EQ(st.dspark_from, 0);
  EXPECT_EQ(st.dspark_to, 40);
  const Draft d = m.draft(st, 7);
  ASSERT_EQ(d.tokens.size(), 6u);
  EXPECT_EQ(d.tokens[0], 7);
  EXPECT_EQ(d.logits.size(), size_t(5) * size_t(m.config().vocab_size));
  for (float c : d.confidence) EXPECT_TRUE(std::isfinite(c));
  EXPECT_THROW(m.draft(st, -1), std::runtime_error);
  EXPECT_THROW(m.draft(st, int32_t(m.config().vocab_size)), std::runtime_error);
  // a decode step that does not seed leaves the rings behind: no draft after it
  std::vector<float> logits(size_t(m.config().vocab_size));
  const int32_t next = 9;
  m.forward(st, &next, 1, 40, LogitsWanted::kLast, logits.data());
  EXPECT_THROW(m.draft(st, 7), std::runtime_error);
  // seeding again restarts the rings at that row: a draft over that one row
  m.forward(st, &next, 1, 41, seeding(), logits.data());
  EXPECT_EQ(st.dspark_from, 41);
  EXPECT_EQ(m.draft(st, 7).tokens.size(), 6u);
  // a fresh state, a truncated one: nothing to draft from
  EXPECT_THROW(m.draft(m.new_state(), 7), std::runtime_error);
  SequenceState t = prefill(ids, 40);
  t.truncate(20);
  EXPECT_THROW(m.draft(t, 7), std::runtime_error);
}

TEST(DSpark, ChunkedAndDecodedSeedingEqualOneShot) {
  const Transformer& m = *rig().model;
  const std::vector<int32_t> ids = random_ids(150, 2);  // past the 128-slot ring
  const Draft whole = m.draft(prefill(ids, 150), 11);
  expect_same_draft(whole, m.draft(prefill(ids, 33), 11));
  expect_same_draft(whole, m.draft(prefill(ids, 1), 11));
}

TEST(DSpark, BatchedSeedingEqualsAlone) {
  const Transformer& m = *rig().model;
  const std::vector<int32_t> a = random_ids(60, 3), b = random_ids(140, 4);
  std::vector<float> la(size_t(m.config().vocab_size)), lb(la.size());
  SequenceState sa = m.new_state(), sb = m.new_state();
  BatchItem items[2];
  items[0].state = &sa;
  items[0].ids = a.data();
  items[0].n = 60;
  items[0].logits = la.data();
  items[1].state = &sb;
  items[1].ids = b.data();
  items[1].n = 140;
  items[1].logits = lb.data();
  for (BatchItem& it : items) it.opt = seeding();
  m.forward_batch(items);
  ASSERT_FALSE(items[0].error);
  ASSERT_FALSE(items[1].error);
  expect_same_draft(m.draft(sa, 5), m.draft(prefill(a, 60), 5));
  expect_same_draft(m.draft(sb, 5), m.draft(prefill(b, 140), 5));
}

TEST(DSpark, CedPromptSeedsTheLastWindow) {
  const Transformer& m = *rig().model;
  ASSERT_TRUE(m.has_ced());
  const std::vector<int32_t> ids = random_ids(300, 5);
  const SequenceState st = prefill(ids, 100, PrefillMode::kCed);  // open chunks, then the last
  EXPECT_EQ(st.dspark_to, 300);
  EXPECT_EQ(st.dspark_from, 300 - m.config().sliding_window);
  const Draft d = m.draft(st, 3);
  EXPECT_EQ(d.tokens.size(), 6u);
}

// The fast tables draft from the same rings (seeded by the reference) with the same anchor:
// draft logits within relative L2 1e-2 of the reference's, the confidences within 1e-2 of their
// scale, and the share of equal drafted tokens reported.
TEST(DSpark, FastKernelsDraftCloseToTheReference) {
  const Transformer& ref = *rig().model;
  for (const KernelTable* fast : supported_kernel_tables()) {
    if (fast == &choose_kernels("ref")) continue;
    SCOPED_TRACE(std::string(fast->name));
    Transformer fm(*rig().ckpt, *fast, *rig().pool, rig().map);
    int same_tokens = 0, tokens = 0;
    double worst = 0;
    for (uint32_t seed = 10; seed < 16; ++seed) {
      const SequenceState st = prefill(random_ids(int(20 + 37 * (seed - 10)), seed), 64);
      const Draft r = ref.draft(st, 1000 + int32_t(seed)), f = fm.draft(st, 1000 + int32_t(seed));
      double num = 0, den = 0;
      for (size_t i = 0; i < r.logits.size(); ++i) {
        num += std::pow(double(r.logits[i]) - f.logits[i], 2);
        den += std::pow(double(r.logits[i]), 2);
      }
      worst = std::max(worst, std::sqrt(num / den));
      double cscale = 0;
      for (float c : r.confidence) cscale = std::max(cscale, std::fabs(double(c)));
      for (size_t k = 0; k < r.confidence.size(); ++k)
        EXPECT_LE(std::fabs(double(r.confidence[k]) - f.confidence[k]), 1e-2 * cscale + 1e-6);
      for (size_t k = 1; k < r.tokens.size(); ++k) {
        same_tokens += r.tokens[k] == f.tokens[k];
        ++tokens;
      }
    }
    std::printf("[ info ] %s: draft logits relative L2 <= %.3g, drafted tokens equal %d/%d\n",
                std::string(fast->name).c_str(), worst, same_tokens, tokens);
    EXPECT_LT(worst, 1e-2);
  }
}

// The speculative runtime's drafts (tokens and confidences, no logits) on the default model,
// whose head and Markov head both repeat rows (its unused ids, and ids new to the target's last
// run that its training left identical, not the same ones in both tables): picked among the
// joint classes, they are the tokens of the vocabulary-wide scan, with the same confidences, in
// every table, over a prompt and twenty decode steps.
TEST(DSpark, DraftsWithoutLogitsPickTheSameTokens) {
  const std::string dir = CEDAR_DEFAULT_MODEL;
  if (!std::filesystem::exists(dir + "/model.safetensors")) GTEST_SKIP() << "no default model";
  const auto ck = Checkpoint::open(dir);
  const auto map = text::build_engram_token_map(text::Tokenizer::load(dir + "/tokenizer.json")).map;
  ThreadPool pool(2);
  for (const KernelTable* k : supported_kernel_tables()) {
    SCOPED_TRACE(std::string(k->name));
    const Transformer m(*ck, *k, pool, map);
    ASSERT_NE(m.dspark(), nullptr);
    ASSERT_TRUE(m.dspark()->drafts_in_classes());
    SequenceState st = m.new_state();
    std::vector<int32_t> ids = random_ids(150, 21);
    std::vector<float> logits(size_t(m.config().vocab_size));
    m.forward(st, ids.data(), int(ids.size()), 0, seeding(), logits.data());
    int32_t anchor = 17;
    for (int step = 0; step < 20; ++step) {
      const Draft a = m.draft(st, anchor), b = m.draft(st, anchor, false);
      ASSERT_EQ(a.tokens, b.tokens) << step;
      ASSERT_TRUE(bit_equal(a.confidence, b.confidence)) << step;
      EXPECT_TRUE(b.logits.empty());
      ForwardOptions o = seeding();
      m.forward(st, &anchor, 1, st.n_tokens, o, logits.data());
      anchor = a.tokens[1 + size_t(step) % 4];  // a drafted token next, to vary the rings' input
    }
  }
}

}  // namespace
}  // namespace cedar
