// Constrained JSON output (response_format json_object / json_schema): a JSON schema compiled to
// a tree of SchemaNodes, and a byte-level pushdown matcher that accepts exactly the texts that
// are JSON values of that schema (or prefixes of one). runtime/token_constraint.* turns the
// matcher into a mask over the vocabulary, one decoding step at a time.
//
// The schema subset (a request using anything else is refused, never silently unconstrained):
// type object (properties, required; keys are the declared properties, in any order, each at
// most once -- additionalProperties is taken as false, as OpenAI's strict mode requires), array
// (items, minItems, maxItems), string, number, integer, boolean, null, a list of types, enum and
// const of scalars; "description", "title", "default", "examples", "$schema" and "strict" are
// ignored. json_object is any JSON object. Whitespace between tokens is allowed (at most
// kMaxWhitespace bytes in a row), containers nest at most kMaxDepth deep.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "text/dsml.h"

namespace cedar::text {

struct SchemaNode {
  enum class Kind : uint8_t {
    kAny,
    kObject,
    kArray,
    kString,
    kNumber,
    kInteger,
    kBoolean,
    kNull,
    kLiteral,
    kScalarAny
  };
  Kind kind = Kind::kAny;
  // kObject: declared properties (free_keys: any key, values kAny -- json_object and nested
  // untyped objects)
  bool free_keys = false;
  std::vector<std::string> names;  // JSON-escaped key text without the quotes
  std::vector<const SchemaNode*> props;
  uint64_t required = 0;  // bit i: names[i] is required
  // kArray
  const SchemaNode* items = nullptr;  // nullptr: any value
  uint32_t min_items = 0, max_items = UINT32_MAX;
  // kLiteral: the exact JSON texts allowed (enum / const / true|false / null)
  std::vector<std::string> literals;
  // a union of types ("type": ["string", "null"]): the first byte picks the alternative
  std::vector<const SchemaNode*> alternatives;
};

class JsonSchema {
 public:
  // Throws RequestError (param `param`) naming an unsupported or malformed part.
  static JsonSchema compile(const ojson& schema, const std::string& param);
  // Any value at the top level (a tool parameter's schema).
  static JsonSchema compile_value(const ojson& schema, const std::string& param);
  static JsonSchema any_object();  // response_format json_object
  const SchemaNode* root() const { return root_; }

 private:
  const SchemaNode* node(const ojson& s, const std::string& path, int depth);
  std::deque<SchemaNode> nodes_;
  const SchemaNode* root_ = nullptr;
};

class JsonMatcher {
 public:
  static constexpr int kMaxDepth = 16;
  static constexpr int kMaxWhitespace = 8;

  explicit JsonMatcher(const SchemaNode* root);
  // Consumes one byte; false (state unchanged) if no text of the schema continues with it.
  bool feed(uint8_t c);
  bool feed(std::string_view s);  // all or nothing: false leaves the state unchanged
  // feed() without the undo: on false the state is garbage (the mask search steps a copy).
  bool step(uint8_t c);
  // The text so far is a complete value (only the end of the output may follow).
  bool done() const { return mode_ == Mode::kDone; }
  // The text so far may end here: done(), or a top-level number that could take more digits.
  bool can_end() const;
  // A compact encoding of the state: equal keys accept the same continuations (mask cache).
  std::string key() const;

 private:
  enum class Mode : uint8_t {
    kValue,    // before a value of expect_ (whitespace allowed)
    kString,   // inside a string value or a free key
    kLiteral,  // inside one of lit_ candidates (a key of a declared object, enum, true...)
    kNumber,   // inside a number
    kAfter,    // after a value: ',' or the container's close (or kDone at top level)
    kObjKey,   // after '{' or ',' in an object: whitespace, then '"' (or '}' after '{')
    kColon,    // after a key: whitespace, ':'
    kDone,
  };
  struct Frame {
    const SchemaNode* node;  // kObject or kArray (or free object / any array: kAny)
    bool array;
    bool any;       // free keys (object) or any items (array)
    bool empty;     // nothing inside yet (a close is allowed right after the open)
    int16_t prop;   // object: the property whose value comes next (-1: free key)
    uint64_t used;  // object: properties present
    uint32_t count;
  };

  bool feed_byte(uint8_t c);
  bool start_value(uint8_t c);
  bool close_allowed(const Frame& f) const;
  void value_done();
  bool string_byte(uint8_t c);
  bool number_byte(uint8_t c);
  bool literal_byte(uint8_t c);
  void begin_literals(const std::vector<std::string>* set, bool key);

  Mode mode_ = Mode::kValue;
  const SchemaNode* expect_ = nullptr;  // kValue: the schema of the value to come (nullptr: any)
  Frame frames_[kMaxDepth + 1];
  int depth_ = 0;
  uint8_t ws_ = 0;  // whitespace bytes in a row
  // kString
  bool key_string_ = false;
  uint8_t esc_ = 0;   // 0 none, 1 after '\', 2..5 hex digits of \u still expected (5 - esc_)
  uint8_t utf8_ = 0;  // continuation bytes still expected
  uint8_t utf8_lead_ = 0;
  // kNumber: the number grammar's state (see number_byte)
  uint8_t num_ = 0;
  bool integer_ = false;
  // kLiteral
  const std::vector<std::string>* lit_ = nullptr;
  uint64_t lit_alive_ = 0;  // candidates still matching (up to 64)
  uint16_t lit_pos_ = 0;
  bool lit_key_ = false;
};

}  // namespace cedar::text
