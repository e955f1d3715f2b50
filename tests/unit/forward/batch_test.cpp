// Transformer::forward_batch (continuous batching): several sequences in one pass must give each
// sequence exactly what forward() gives it alone -- the same logits bit for bit and the same
// state -- for decode steps, open and completing CED chunks, exact chunks with all logits, and
// any mix of them; a refused item leaves its state unchanged and the rest of the batch runs.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "tiny_fixture.h"

namespace cedar {
namespace {

using testutil::bit_equal;
using testutil::expect_same_state;
using testutil::TinyRig;

TinyRig& rig() {
  static TinyRig r(3, "forward_batch_test");
  return r;
}

std::vector<int32_t> random_ids(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, int32_t(rig().model->config().vocab_size - 1));
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = id(rng);
  for (int i = 8; i + 4 < n; i += 23) v[size_t(i)] = v[size_t(i - 8)];  // repeated n-grams
  return v;
}

// One scripted call of one sequence.
struct Step {
  int n;
  PrefillMode mode;
  bool completes;
  LogitsWanted logits;
};

// The logits rows a call writes (an upper bound; the result says how many were written).
int rows_of(const Step& s) {
  if (s.logits == LogitsWanted::kNone) return 0;
  if (s.logits == LogitsWanted::kLast) return 1;
  return s.n < 128 ? 128 : s.n;
}

struct Seq {
  std::vector<int32_t> ids;
  std::vector<Step> steps;
};

// Runs every sequence's script: `batched` = false, one forward() per call; true, round r runs the
// r-th call of every sequence that has one as one forward_batch. Returns, per sequence and call,
// the logits written; the final states go to *states.
std::vector<std::vector<std::vector<float>>> run(const std::vector<Seq>& seqs, bool batched,
                                                 std::vector<SequenceState>* states,
                                                 std::vector<std::vector<ForwardResult>>* results) {
  const Transformer& m = *rig().model;
  const size_t V = size_t(m.config().vocab_size);
  states->assign(seqs.size(), m.new_state());
  results->assign(seqs.size(), {});
  std::vector<std::vector<std::vector<float>>> out(seqs.size());
  std::vector<int64_t> pos(seqs.size(), 0);
  size_t rounds = 0;
  for (const auto& s : seqs) rounds = std::max(rounds, s.steps.size());
  for (size_t r = 0; r < rounds; ++r) {
    std::vector<BatchItem> items;
    std::vector<size_t> who;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (r >= seqs[i].steps.size()) continue;
      const Step& st = seqs[i].steps[r];
      out[i].emplace_back(size_t(rows_of(st)) * V, 0.0f);
      BatchItem it;
      it.state = &(*states)[i];
      it.ids = seqs[i].ids.data() + pos[i];
      it.n = st.n;
      it.first_pos = pos[i];
      it.opt.mode = st.mode;
      it.opt.completes_prompt = st.completes;
      it.opt.logits = st.logits;
      it.logits = out[i].back().empty() ? nullptr : out[i].back().data();
      pos[i] += st.n;
      items.push_back(it);
      who.push_back(i);
    }
    if (batched) {
      m.forward_batch(std::span<BatchItem>(items));
      for (size_t k = 0; k < items.size(); ++k) {
        if (items[k].error) std::rethrow_exception(items[k].error);
        (*results)[who[k]].push_back(items[k].result);
      }
    } else {
      for (size_t k = 0; k < items.size(); ++k) {
        const BatchItem& it = items[k];
        (*results)[who[k]].push_back(
            m.forward(*it.state, it.ids, it.n, it.first_pos, it.opt, it.logits));
      }
    }
  }
  return out;
}

void expect_same_runs(const std::vector<Seq>& seqs) {
  std::vector<SequenceState> sa, sb;
  std::vector<std::vector<ForwardResult>> ra, rb;
  const auto alone = run(seqs, false, &sa, &ra);
  const auto batch = run(seqs, true, &sb, &rb);
  for (size_t i = 0; i < seqs.size(); ++i) {
    ASSERT_EQ(alone[i].size(), batch[i].size());
    for (size_t k = 0; k < alone[i].size(); ++k) {
      EXPECT_TRUE(bit_equal(alone[i][k], batch[i][k])) << "sequence " << i << " call " << k;
      EXPECT_EQ(ra[i][k].logits_first_pos, rb[i][k].logits_first_pos);
      EXPECT_EQ(ra[i][k].logits_rows, rb[i][k].logits_rows);
      EXPECT_EQ(ra[i][k].replay_start, rb[i][k].replay_start);
      EXPECT_EQ(ra[i][k].decoder_rows, rb[i][k].decoder_rows);
      EXPECT_EQ(ra[i][k].truncated, rb[i][k].truncated);
    }
    SCOPED_TRACE("sequence " + std::to_string(i));
    expect_same_state(sa[i], sb[i]);
  }
  // the runs did something: logits are finite and differ between sequences
  ASSERT_GE(seqs.size(), 2u);
  EXPECT_FALSE(bit_equal(alone[0].back(), alone[1].back()));
}

const Step kDecode{1, PrefillMode::kCed, true, LogitsWanted::kLast};

TEST(ForwardBatch, DecodeStepsOfManySequencesEqualAlone) {
  // prompts of different lengths (inside one window, across it, splitting a ratio-2 group and a
  // candidate block), each prefilled in one CED call, then 12 decode steps side by side
  std::vector<Seq> seqs;
  const int lens[] = {1, 2, 37, 128, 129, 260};
  for (int i = 0; i < 6; ++i) {
    Seq s;
    s.ids = random_ids(lens[i] + 12, 100 + uint32_t(i));
    s.steps.push_back({lens[i], PrefillMode::kCed, true, LogitsWanted::kLast});
    for (int k = 0; k < 12; ++k) s.steps.push_back(kDecode);
    seqs.push_back(std::move(s));
  }
  expect_same_runs(seqs);
}

TEST(ForwardBatch, MixedPrefillChunksAndDecodeEqualAlone) {
  std::vector<Seq> seqs(5);
  // CED prompt fed as open chunks, completed by the third (window truncation), then decode
  seqs[0].ids = random_ids(310, 7);
  seqs[0].steps = {{100, PrefillMode::kCed, false, LogitsWanted::kNone},
                   {100, PrefillMode::kCed, false, LogitsWanted::kNone},
                   {100, PrefillMode::kCed, true, LogitsWanted::kReplay}};
  // exact prompt in two chunks with every row's logits, then decode
  seqs[1].ids = random_ids(160, 8);
  seqs[1].steps = {{63, PrefillMode::kExact, true, LogitsWanted::kAll},
                   {87, PrefillMode::kExact, true, LogitsWanted::kAll}};
  // a short CED prompt, then a long decode run (decode rows next to the others' prefill)
  seqs[2].ids = random_ids(40, 9);
  seqs[2].steps = {{5, PrefillMode::kCed, true, LogitsWanted::kLast}};
  // CED chunk that completes a prompt inside the window with kAll, then an exact chunk
  seqs[3].ids = random_ids(200, 10);
  seqs[3].steps = {{90, PrefillMode::kCed, true, LogitsWanted::kAll},
                   {101, PrefillMode::kExact, true, LogitsWanted::kLast}};
  // exact decode steps with no logits wanted in between
  seqs[4].ids = random_ids(40, 11);
  seqs[4].steps = {{20, PrefillMode::kExact, true, LogitsWanted::kLast},
                   {1, PrefillMode::kExact, true, LogitsWanted::kNone}};
  for (auto& s : seqs) {
    int used = 0;
    for (const auto& st : s.steps) used += st.n;
    while (used < int(s.ids.size()) && s.steps.size() < 12) {
      s.steps.push_back(kDecode);
      ++used;
    }
  }
  expect_same_runs(seqs);
}

TEST(ForwardBatch, RefusedItemLeavesItsStateAndTheOthersRun) {
  const Transformer& m = *rig().model;
  const size_t V = size_t(m.config().vocab_size);
  const auto ids = random_ids(64, 12);
  SequenceState a = m.new_state(), b = m.new_state();
  m.forward(a, ids.data(), 30, 0, ForwardOptions{}, std::vector<float>(V).data());
  m.forward(b, ids.data(), 20, 0, ForwardOptions{}, std::vector<float>(V).data());
  SequenceState a_alone = a, b_before = b;
  std::vector<float> want(V), got(V), junk(V);
  m.forward(a_alone, ids.data() + 30, 1, 30, ForwardOptions{}, want.data());

  std::vector<BatchItem> items(4);
  items[0].state = &a;  // valid decode step
  items[0].ids = ids.data() + 30;
  items[0].n = 1;
  items[0].first_pos = 30;
  items[0].logits = got.data();
  items[1] = items[0];  // the same state again: refused
  items[1].logits = junk.data();
  items[2].state = &b;  // wrong position: refused
  items[2].ids = ids.data() + 20;
  items[2].n = 1;
  items[2].first_pos = 21;
  items[2].logits = junk.data();
  const int32_t bad = int32_t(V) + 5;
  items[3] = items[2];  // id outside the vocabulary: refused
  items[3].first_pos = 20;
  items[3].ids = &bad;
  m.forward_batch(std::span<BatchItem>(items));
  EXPECT_FALSE(items[0].error);
  EXPECT_TRUE(items[1].error);
  EXPECT_TRUE(items[2].error);
  EXPECT_TRUE(items[3].error);
  EXPECT_TRUE(bit_equal(want, got));
  expect_same_state(a, a_alone);
  expect_same_state(b, b_before);
  try {
    std::rethrow_exception(items[2].error);
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not follow"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cedar
