// Shared helpers of the constrained-decoding tests over the real V4.1 vocabulary
// (token_constraint_test.cpp, tool_constraint_test.cpp): the build's tokenizer and a greedy
// sampler from random logits through a constraint's mask.
#pragma once

#include <string>
#include <vector>

#include "runtime/token_constraint.h"

namespace cedar::runtime::testing {

constexpr int32_t kEos = 1;  // the stop token the tests' constraints are given

// The tokenizer.json the build made (loaded once).
const text::Tokenizer& tokenizer();

struct Sampled {
  std::string text;
  bool stopped = false;  // the stop token was chosen (checked then: the answer may end there)
};

// Up to max_tokens greedy choices over random normal logits (seeded) plus push[id] (empty: none),
// each through c's mask; every choice is accepted into c and its bytes appended to the text.
Sampled sample(const TokenTrie& trie, TokenConstraint& c, unsigned seed, int max_tokens,
               const std::vector<float>& push = {});

}  // namespace cedar::runtime::testing
