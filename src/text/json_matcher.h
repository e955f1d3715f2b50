// A byte-level matcher for the JSON texts of a compiled schema (text/json_schema.h): it accepts
// exactly the prefixes of texts whose value the schema admits (within the bounds below), one
// byte at a time, so that runtime/token_constraint.* can turn it into a mask over the vocabulary.
//
// JSON's syntax is deterministic; the schema is not (anyOf, a type list, enum beside a type):
// several readings of the same bytes can stay alive. The matcher keeps them as hypotheses per
// nesting level -- a graph-structured stack: each open container has one frame per schema it
// may be a value of, each frame knows which frames of the level below it serves (a bit mask),
// and the scalar being read has one hypothesis per schema. A reading that fails is dropped, and
// so is every frame left serving none; a byte is refused when no reading survives it. Copies
// are plain memory (no heap): the mask search copies a matcher at each trie node it visits,
// and only the live frames and hypotheses are copied.
//
// Bounds: containers nest at most kMaxDepth deep, whitespace runs at most kMaxWhitespace bytes,
// numbers have at most 24 digits per part (18 in an integer, exponents 2), and past kMaxFrames /
// kMaxValues live readings the later ones are dropped (a text is then refused that the schema
// allows, never the reverse). Strings under a pattern, format, enum or declared key take \u
// escapes only for ASCII (other characters are written as UTF-8); lone surrogates are refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "text/json_schema.h"

namespace cedar::text {

class JsonMatcher {
 public:
  static constexpr int kMaxDepth = kMaxJsonDepth;
  static constexpr int kMaxWhitespace = 8;
  static constexpr int kMaxFrames = 32;  // open-container readings, all levels together
  static constexpr int kMaxValues = 32;  // readings of the scalar being read

  explicit JsonMatcher(const SchemaNode* root);  // nullptr: any JSON value
  JsonMatcher(const JsonMatcher& o) { copy_from(o); }
  JsonMatcher& operator=(const JsonMatcher& o) {
    if (this != &o) copy_from(o);
    return *this;
  }

  // Consumes one byte; false (state unchanged) if no text of the schema continues with it.
  bool feed(uint8_t c);
  bool feed(std::string_view s);  // all or nothing: false leaves the state unchanged
  // feed() without the undo: on false the state is garbage (the mask search steps a copy).
  bool step(uint8_t c);
  // The text so far is a complete value (only the end of the output may follow).
  bool done() const { return h_.mode == Mode::kDone; }
  // The text so far may end here: done(), or a top-level number that could take more digits.
  bool can_end() const;
  // A compact encoding of the state: equal keys accept the same continuations of up to 256
  // bytes (the mask cache's key: counters are clipped where no token could tell them apart).
  std::string key() const;

 private:
  enum class Mode : uint8_t { kValue, kString, kNumber, kKeyword, kAfter, kObjKey, kColon, kDone };
  enum class Start : uint8_t { kNone, kObject, kArray, kString, kNumber, kKeyword };
  struct Frame {              // one reading of an open object or array
    const SchemaNode* node;   // the alternative this container is a value of
    const SchemaNode* child;  // the schema of the value being read, or to be read next
    Bits128 used;             // object: the tracked names present
    uint32_t parents;         // bit i: serves frame i of the level below (the root: bit 0)
    uint32_t count;           // items / keys so far
    uint32_t trie, kdfa;      // key being read: names-trie and free-key states (kDead: off)
    uint32_t klen;            // key being read: code points
    uint32_t khash;           // key being read: FNV-1a of its bytes (distinct free keys)
    uint32_t seen[SchemaLimits::kMaxDistinctFree];  // the free keys counted so far
    uint8_t nseen;
    bool array, empty;
  };
  struct Value {  // one reading of the scalar being read
    const SchemaNode* node;
    uint32_t parents;
    uint32_t state;  // string / number-literal automaton state
    uint32_t len;    // string: code points
  };
  struct Head {
    const SchemaNode* root;
    Mode mode;
    uint8_t depth;  // open containers
    uint8_t ws;     // whitespace bytes in a row
    uint8_t nframes, nvalues;
    uint8_t level[kMaxDepth + 1];  // level[d]: the first frame of level d; level[depth] = nframes
    // strings (values and keys)
    bool in_key;
    uint8_t esc;        // 0; 1 after '\'; 2..5: hex digit esc-1 next; 6, 7: "\u" of a low surrogate
    bool low;           // the \u being read must be a low surrogate
    uint8_t utf8_left;  // continuation bytes still expected
    uint8_t utf8_lead;
    uint16_t unit, high;  // the \u code unit so far; the high surrogate before it
    // numbers
    uint8_t num;   // syntax state (see number_byte)
    uint8_t part;  // digits in the current part
    NumPrefix np;
    // true / false / null
    uint8_t kw, kw_pos;
  };

  void copy_from(const JsonMatcher& o);
  int top() const { return h_.depth - 1; }  // the level of the innermost open container
  int level_size(int l) const { return h_.level[l + 1] - h_.level[l]; }
  Frame* level_frames(int l) { return frames_ + h_.level[l]; }
  int budget() const { return kMaxDepth - h_.depth; }  // levels a value here may open
  bool value_leaves() const;
  void compact(int l, uint32_t keep);
  bool settle();
  bool keep_top(uint32_t keep);

  // structure (json_matcher.cpp)
  bool value_start(uint8_t c);
  void collect(Start kind, uint8_t c);
  bool first_items();
  void add_frame(const SchemaNode* s, uint32_t pbit, bool array);
  void add_value(const SchemaNode* s, uint32_t pbit);
  bool close();
  bool value_done(uint32_t satisfied);
  bool after_value(uint8_t c);
  bool key_start(uint8_t c);
  bool close_allowed(const Frame& f) const;
  Bits128 available(const Frame& f) const;
  bool room_for_optional(const Frame& f) const;
  bool free_key_ok(const Frame& f) const;
  bool can_add_key(const Frame& f) const;
  bool key_viable(const Frame& f) const;
  bool key_end();

  // scalars (json_matcher_lexer.cpp)
  bool string_byte(uint8_t c);
  bool hex_digit(uint8_t c);
  bool decoded(uint8_t b);
  bool decoded_cp(uint32_t cp);
  bool escape_possible(uint32_t lo, uint32_t hi);
  bool key_escape_ok(Frame& f, uint32_t lo, uint32_t hi) const;
  bool key_byte(Frame& f, uint8_t b) const;
  bool string_end();
  bool number_byte(uint8_t c);
  uint8_t number_syntax(uint8_t c, char* kind) const;
  bool number_digit_ok(Value& v, char kind, uint8_t c) const;
  bool number_complete(const Value& v) const;
  bool keyword_byte(uint8_t c);

  Head h_;
  Frame frames_[kMaxFrames];
  Value values_[kMaxValues];
};

}  // namespace cedar::text
