// Constrained decoding: each step, the tokens whose bytes cannot continue a text of a byte
// grammar get -inf logits, and the end of the answer is allowed only where the grammar may end.
// Two grammars use it: a JSON answer (response_format json_object / json_schema,
// text/json_grammar.h) and strict tool calls (text/dsml_grammar.h). The search walks a byte trie
// of the vocabulary with the grammar's matcher, so a state where few bytes fit (after a '{')
// visits few nodes; masks are cached by matcher state (the inside of a string is one state).
// Requests without a constraint never reach this code.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/dsml_grammar.h"
#include "text/json_grammar.h"
#include "text/tokenizer.h"

namespace cedar::runtime {

// The tokens a state of a grammar allows: a bit per token, and -- when few tokens are refused, as
// in free text -- the refused ones, so that a step sets those few logits instead of walking the
// whole vocabulary.
struct TokenMask {
  std::vector<uint64_t> allowed;
  bool sparse = false;
  std::vector<int32_t> refused;  // sparse: every id below the logits' size that is not allowed
};

// The plain-text tokens of a vocabulary by their bytes, and the DSML tag marker; the other added
// tokens (<think>, the stop tokens, ...) are left out, and so would be a plain token holding the
// marker's bytes (the marker token is the only token that holds them). Built once per engine.
// It also keeps the masks of grammar states that belong to no request in particular (free
// answer text beside tools, the inside of a raw tool-call value), shared by every request.
class TokenTrie {
 public:
  struct Node {
    uint32_t first_child = 0, next_sibling = 0;  // 0: none (node 0 is the root)
    uint32_t tok_begin = 0, tok_end = 0;         // ids()[tok_begin, tok_end): tokens ending here
    uint8_t byte = 0;
  };
  explicit TokenTrie(const text::Tokenizer& tok);
  int32_t vocab_size() const { return vocab_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& ids() const { return ids_; }

  // The shared mask of `key`, or nullptr; share() keeps a mask (the first one of a key wins, and
  // at most kMaxShared are kept) and returns the one kept. Thread-safe.
  std::shared_ptr<const TokenMask> shared(const std::string& key) const;
  std::shared_ptr<const TokenMask> share(const std::string& key,
                                         std::shared_ptr<const TokenMask> mask) const;

 private:
  static constexpr size_t kMaxShared = 256;
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  int32_t vocab_ = 0;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const TokenMask>> shared_;
};

// What the generator sees of a constraint.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of every token the answer cannot continue with to -inf.
  virtual void mask(std::span<float> logits) = 0;
  // The token chosen (sampled from masked logits, or forced by the test hook: then it may not
  // fit, and the constraint stops applying).
  virtual void accept(int32_t id) = 0;
  // The answer may end here.
  virtual bool complete() const = 0;
};

// Matcher: feed(string_view) (all or nothing), step(uint8_t) (no undo), done(), key() -- the
// interface of text::JsonMatcher and text::ToolCallMatcher. Instantiated for those two.
template <class Matcher>
class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(const TokenTrie& trie, const text::Tokenizer& tok, Matcher start,
                    std::vector<int32_t> stop_ids);
  void mask(std::span<float> logits) override;
  void accept(int32_t id) override;
  bool complete() const override { return m_.done(); }

 private:
  using Bits = std::vector<uint64_t>;
  void search(uint32_t node, const Matcher& m, Bits* allowed) const;
  std::shared_ptr<const TokenMask> build_mask(size_t n_logits) const;
  const TokenMask& allowed(size_t n_logits);

  const TokenTrie& trie_;
  const text::Tokenizer& tok_;
  Matcher m_;
  std::vector<int32_t> stop_ids_;
  std::vector<float> stop_logits_;  // mask()'s scratch, one per stop id (no allocation per step)
  bool broken_ = false;
  std::unordered_map<std::string, std::shared_ptr<const TokenMask>> cache_;
  std::string bytes_;  // scratch: one token's bytes
};

using JsonConstraint = GrammarConstraint<text::JsonMatcher>;
using ToolCallConstraint = GrammarConstraint<text::ToolCallMatcher>;

}  // namespace cedar::runtime
