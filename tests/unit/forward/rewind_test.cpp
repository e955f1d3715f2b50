// SequenceState::rewind after a verify pass (ForwardOptions::keep_undo): dropping the last k rows
// of the call leaves the state bit for bit equal to a run that processed only the kept rows --
// window rings, compressed rows, ratio-2 tails (both parities of the call's start), index keys,
// Engram history, DSpark rings -- and the next forward gives the same logits. Bad uses refused.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "tiny_fixture.h"

namespace cedar {
namespace {

using testutil::bit_equal;
using testutil::expect_same_state;
using testutil::random_ids;
using testutil::TinyRig;

TinyRig& rig() {
  static TinyRig r(6, "rewind_test");
  return r;
}

ForwardOptions opts(bool undo) {
  ForwardOptions o;
  o.mode = PrefillMode::kExact;
  o.logits = LogitsWanted::kLast;
  o.dspark_seed = true;
  o.keep_undo = undo;
  return o;
}

std::vector<float> step(const Transformer& m, SequenceState& st, const std::vector<int32_t>& ids,
                        bool undo = false) {
  std::vector<float> logits(size_t(m.config().vocab_size));
  if (!ids.empty())
    m.forward(st, ids.data(), int(ids.size()), st.n_tokens, opts(undo), logits.data());
  return logits;
}

TEST(Rewind, KeptRowsEqualThePlainPath) {
  const Transformer& m = *rig().model;
  for (int prompt : {130, 131}) {  // the call starts on either parity of the ratio-2 groups
    const std::vector<int32_t> p = random_ids(prompt, uint32_t(prompt));
    SequenceState base = m.new_state();
    step(m, base, p);
    for (int n : {1, 6}) {
      const std::vector<int32_t> call = random_ids(n, uint32_t(100 + n));
      SequenceState verified = base;
      step(m, verified, call, true);
      for (int j = 0; j <= n; ++j) {
        SCOPED_TRACE("prompt " + std::to_string(prompt) + ", call " + std::to_string(n) +
                     ", kept " + std::to_string(j));
        SequenceState r = verified;
        r.rewind(n - j);
        SequenceState plain = base;
        step(m, plain, std::vector<int32_t>(call.begin(), call.begin() + j));
        expect_same_state(r, plain);
        // and they go on alike: the next token's logits and the draft after it
        const std::vector<int32_t> next = {int32_t(1234 + j)};
        EXPECT_TRUE(bit_equal(step(m, r, next), step(m, plain, next)));
        expect_same_state(r, plain);
        EXPECT_EQ(m.draft(r, 77).tokens, m.draft(plain, 77).tokens);
      }
    }
  }
}

TEST(Rewind, RefusesWhatItCannotUndo) {
  const Transformer& m = *rig().model;
  SequenceState st = m.new_state();
  step(m, st, random_ids(20, 1));
  EXPECT_THROW(st.rewind(1), std::runtime_error);  // no log kept
  step(m, st, random_ids(3, 2), true);
  EXPECT_THROW(st.rewind(4), std::runtime_error);  // more rows than the call had
  EXPECT_THROW(st.rewind(-1), std::runtime_error);
  SequenceState moved = st;
  step(m, moved, random_ids(1, 3));  // a later call without a log
  EXPECT_THROW(moved.rewind(1), std::runtime_error);
  st.rewind(2);
  EXPECT_EQ(st.n_tokens, 21);
  EXPECT_THROW(st.rewind(1), std::runtime_error);  // the log is consumed
  // an undo log is for verify passes: at most a window of rows on a closed prompt
  SequenceState big = m.new_state();
  const std::vector<int32_t> many = random_ids(129, 4);
  std::vector<float> logits(size_t(m.config().vocab_size));
  EXPECT_THROW(m.forward(big, many.data(), 129, 0, opts(true), logits.data()), std::runtime_error);
  EXPECT_EQ(big.n_tokens, 0);
}

}  // namespace
}  // namespace cedar
