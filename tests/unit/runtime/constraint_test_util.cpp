#include "constraint_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace cedar::runtime::testing {

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer t =
      text::Tokenizer::load(std::string(CEDAR_BINARY_DIR) + "/tokenizer/tokenizer.json");
  return t;
}

Sampled sample(const TokenTrie& trie, TokenConstraint& c, unsigned seed, int max_tokens,
               const std::vector<float>& push) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> logits(size_t(trie.vocab_size()));
  Sampled r;
  for (int step = 0; step < max_tokens; ++step) {
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = nd(rng) + (push.empty() ? 0 : push[i]);
    c.mask(logits);
    const int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_TRUE(std::isfinite(logits[size_t(best)])) << "everything masked at step " << step;
    if (!std::isfinite(logits[size_t(best)])) break;
    if (best == kEos) {
      EXPECT_TRUE(c.complete()) << r.text;
      r.stopped = true;
      break;
    }
    c.accept(best);
    tokenizer().append_token_bytes(best, &r.text);
  }
  return r;
}

}  // namespace cedar::runtime::testing
