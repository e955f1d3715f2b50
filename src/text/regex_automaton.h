// Byte automata for the strings of a JSON schema: deterministic automata over the decoded UTF-8
// bytes of a JSON string, built from ECMA-262 regular expressions (JSON Schema's "pattern",
// "patternProperties", "propertyNames" and the built-in formats) or from a set of literal strings
// (enum / const, declared property names). The matcher (text/json_matcher.h) steps them one byte
// at a time, so every automaton is pruned to states from which a final state can be reached:
// a byte the automaton takes never leads into a dead end.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cedar::text {

// A pattern outside the supported subset, or one whose automaton is too big.
struct RegexError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ByteDfa {
 public:
  static constexpr uint32_t kDead = UINT32_MAX;
  static constexpr uint32_t kInf = UINT32_MAX;  // min_rem / max_rem: unbounded or unreachable
  struct Edge {
    uint8_t lo, hi;  // never straddles 0x80 or 0xC0 (see weight())
    uint32_t to;
  };
  struct State {
    uint32_t first_edge = 0, n_edges = 0;
    uint64_t accept = 0;        // components (patterns) whose match a string ending here completes
    uint32_t tag = UINT32_MAX;  // literal automata: the literal that ends here
    bool final = false;         // set by finish()
    // Code points still needed to reach a final state, fewest and most (kInf: no bound).
    uint32_t min_rem = kInf, max_rem = kInf;
  };

  uint32_t start() const { return start_; }
  uint32_t next(uint32_t s, uint8_t b) const;
  const State& state(uint32_t s) const { return states_[s]; }
  size_t size() const { return states_.size(); }
  // The largest finite min_rem / max_rem: a length counter clipped above this plus the longest
  // token distinguishes no more states than the exact counter (text/json_matcher.cpp's key()).
  uint32_t rem_clip() const { return rem_clip_; }
  // No string reaches a final state.
  bool empty() const { return states_[start_].min_rem == kInf; }
  // Runs the whole string from the start: the state reached (kDead if none).
  uint32_t run(std::string_view s) const;

  // Marks the final states (is_final(index, state)), drops every edge into a state that
  // reaches none, and computes min_rem / max_rem. May be called again with a narrower predicate.
  template <class IsFinal>
  void finish(IsFinal is_final) {
    for (uint32_t i = 0; i < states_.size(); ++i) states_[i].final = is_final(i, states_[i]);
    prune();
  }

  // A trie of the literals (UTF-8 strings): tag = the index of the literal ending in a state.
  // Throws RegexError beyond max_states.
  static ByteDfa literals(const std::vector<std::string>& lits, size_t max_states);
  // The patterns as unanchored searches (JSON Schema's reading of "pattern"): a string ending in
  // a state matches pattern i when bit i of its accept is set (at most 64 patterns). Throws
  // RegexError for what the subset refuses (backreferences, lookaround, \b, \p{..}) or past the
  // bounds (max_states automaton states, nested counted repetition beyond the NFA bound, more
  // than *work construction steps: *work is what is left of a budget shared by several calls).
  static ByteDfa patterns(const std::vector<std::string>& patterns, size_t max_states,
                          uint64_t* work);

  // Code points weigh their first byte: continuation bytes (0x80..0xBF) add nothing.
  static uint32_t weight(uint8_t b) { return (b & 0xC0) == 0x80 ? 0 : 1; }

 private:
  friend class DfaBuilder;
  void prune();
  std::vector<uint32_t> min_remaining() const;
  void max_remaining();
  std::vector<State> states_;
  std::vector<Edge> edges_;
  uint32_t start_ = 0;
  uint32_t rem_clip_ = 0;
};

// Escapes the characters an ECMA-262 pattern treats specially, so the result matches s itself.
std::string regex_quote(std::string_view s);

}  // namespace cedar::text
