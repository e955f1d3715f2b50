// Constrained decoding of a JSON answer (response_format json_object / json_schema): each step,
// the tokens whose bytes cannot continue a value of the schema (text/json_grammar.h) get -inf
// logits, and the end of the answer is allowed only once the value is complete. The search walks
// a byte trie of the vocabulary with the matcher, so a state where few bytes fit (after a '{')
// visits few nodes; masks are cached by matcher state (the inside of a string is one state).
// Requests without a schema never reach this code.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/json_grammar.h"
#include "text/tokenizer.h"

namespace cedar::runtime {

// The plain-text tokens of a vocabulary by their bytes (added tokens -- <think>, DSML tags, the
// stop tokens -- are left out). Built once per engine.
class TokenTrie {
 public:
  explicit TokenTrie(const text::Tokenizer& tok);
  int32_t vocab_size() const { return vocab_; }

 private:
  friend class JsonConstraint;
  struct Node {
    uint32_t first_child = 0, next_sibling = 0;  // 0: none (node 0 is the root)
    uint32_t tok_begin = 0, tok_end = 0;         // ids_[tok_begin, tok_end): tokens ending here
    uint8_t byte = 0;
  };
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  int32_t vocab_ = 0;
};

class JsonConstraint {
 public:
  JsonConstraint(const TokenTrie& trie, const text::Tokenizer& tok, const text::SchemaNode* root,
                 std::vector<int32_t> stop_ids);
  // Sets the logits of every token the answer cannot continue with to -inf.
  void mask(std::span<float> logits);
  // The token chosen (sampled from masked logits, or forced by the test hook: then it may not
  // fit, and the constraint stops applying).
  void accept(int32_t id);
  bool complete() const { return m_.done(); }

 private:
  using Bits = std::vector<uint64_t>;
  void search(uint32_t node, const text::JsonMatcher& m, Bits* allowed) const;
  const Bits& allowed();

  const TokenTrie& trie_;
  const text::Tokenizer& tok_;
  text::JsonMatcher m_;
  std::vector<int32_t> stop_ids_;
  std::vector<float> stop_logits_;  // mask()'s scratch, one per stop id (no allocation per step)
  bool broken_ = false;
  std::unordered_map<std::string, Bits> cache_;
  std::string bytes_;  // scratch: one token's bytes
};

}  // namespace cedar::runtime
