// A JSON Schema compiled for constrained decoding: a graph of SchemaNodes (recursive through
// $ref) that text/json_matcher.h walks byte by byte. compile() reads the schema as JSON Schema
// 2020-12 does, with the draft-4..7 spellings too (definitions, items as a tuple +
// additionalItems, boolean exclusiveMinimum/Maximum, OpenAPI's nullable); a $ref with sibling
// keywords is the conjunction of both (2019+). What is compiled:
//   $ref to a JSON pointer in the document ("#", "#/$defs/x", "#/definitions/x", any pointer,
//     ~0 ~1 and %-escapes); recursion; allOf (merged at compile time); anyOf; oneOf when its
//     branches provably exclude each other (types, or a required property with disjoint const /
//     enum values, or disjoint number ranges); type (a list too), enum / const of any JSON value;
//   objects: properties, required, additionalProperties, patternProperties, propertyNames
//     (string keywords), minProperties, maxProperties;
//   arrays: items, prefixItems, additionalItems, minItems, maxItems (uniqueItems only where at
//     most one item fits);
//   strings: minLength, maxLength, pattern (text/regex_automaton.h), format (text/json_formats.h);
//   numbers: minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf (integer divisors;
//     text/json_number.h).
// Every other assertion (not, if/then/else, dependencies, contains, unevaluated*, ...) is a
// RequestError naming the keyword and where it is; annotations and unknown keywords are ignored,
// as JSON Schema ignores them. Generation policy (all of it valid for the schema): an object
// writes only its declared properties unless additionalProperties is given explicitly,
// patternProperties exist, there are no properties, or minProperties needs more keys.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "text/dsml.h"
#include "text/json_number.h"
#include "text/regex_automaton.h"

namespace cedar::text {

// Limits on what a request's schema may cost; past one, compile() throws RequestError.
struct SchemaLimits {
  static constexpr size_t kMaxNodes = 20000;           // schema nodes after merging
  static constexpr size_t kMaxAlternatives = 128;      // anyOf branches one value can take
  static constexpr size_t kMaxLiteralBytes = 1 << 20;  // enum / const / property name bytes
  static constexpr size_t kMaxDfaStates = 4096;        // states of one pattern's automaton
  static constexpr size_t kMaxTotalDfaStates = 200000;
  static constexpr uint64_t kMaxRegexWork = 50000000;  // steps building all pattern automata
  static constexpr int kMaxInlineDepth = 64;           // allOf / anyOf / $ref nested in place
  static constexpr uint64_t kMaxCount = 1000000;       // minItems / minLength / minProperties
  static constexpr size_t kMaxTracked = 128;           // properties an object tracks (required)
  static constexpr uint32_t kMaxDistinctFree = 4;      // free keys minProperties may need
};

constexpr uint8_t kUnsat = 0xFF;  // SchemaNode::md*: no value fits
// Containers nest at most this deep in an answer (JsonMatcher::kMaxDepth); a recursive schema
// is followed down to it.
constexpr int kMaxJsonDepth = 16;
// JsonMatcher::key() saturates counters here (plus what an automaton still needs): no token
// (at most 256 bytes in the release vocabulary) can tell two values apart beyond it.
constexpr uint32_t kKeyClip = 257;

struct SchemaNode;

struct StringRule {
  const ByteDfa* dfa = nullptr;  // pattern / format / enum over the decoded bytes (nullptr: any)
  uint32_t min_len = 0, max_len = UINT32_MAX;  // code points
  uint32_t clip = 0;                           // length counters above this are alike (key())
  bool sat = true;
};

using Bits128 = std::array<uint64_t, 2>;

struct ObjectRule {
  // Declared keys (decoded UTF-8): the tracked ones first, required before optional.
  std::vector<std::string> names;
  std::vector<const SchemaNode*> values;  // each name's value schema
  ByteDfa trie;                           // the names (tag: index)
  std::vector<Bits128> below;             // per trie state: tracked names at or below it
  std::vector<uint8_t> untracked_below;   // per trie state: an untracked name at or below it
  uint32_t n_tracked = 0;
  Bits128 required{};
  // per nesting budget b: the tracked names whose value fits in b more levels
  std::vector<Bits128> fits;
  uint32_t min_props = 0, max_props = UINT32_MAX;
  // Keys other than the names: allowed, their automaton (patternProperties + propertyNames;
  // nullptr: any key) and the value schema each final state gives (or free_value without one).
  bool free = false;
  const ByteDfa* keys = nullptr;
  std::vector<const SchemaNode*> free_values;
  const SchemaNode* free_value = nullptr;
  uint32_t key_min = 0, key_max = UINT32_MAX, key_clip = 0;
  uint8_t free_md = kUnsat;    // the shallowest free value
  bool distinct_free = false;  // minProperties counts free keys: each must differ
};

struct ArrayRule {
  std::vector<const SchemaNode*> prefix;  // items by position
  const SchemaNode* rest = nullptr;       // items after the prefix (nullptr: none)
  uint32_t min_items = 0, max_items = UINT32_MAX;
  const SchemaNode* item(uint32_t i) const { return i < prefix.size() ? prefix[i] : rest; }
};

struct SchemaNode {
  enum Type : uint8_t { kNull = 1, kBool = 2, kObject = 4, kArray = 8, kString = 16, kNumber = 32 };
  static constexpr uint8_t kAllTypes = 63;
  // anyOf: a value of this node is a value of one of alts (each without alts of its own);
  // the fields below are then unused.
  std::vector<const SchemaNode*> alts;
  uint8_t types = 0;
  uint8_t bools = 3;  // bit 0: false allowed, bit 1: true allowed
  StringRule str;
  NumberRule num;
  const ObjectRule* obj = nullptr;
  const ArrayRule* arr = nullptr;
  // Container levels a value needs (0: a scalar fits), per kind and overall; kUnsat: none.
  uint8_t md_object = kUnsat, md_array = kUnsat, md = kUnsat;
};

// Every string is a value of node (a tool parameter written as raw text needs no check).
bool admits_any_string(const SchemaNode* node);

class SchemaCompiler;

class JsonSchema {
 public:
  // Throws RequestError (param `param`, or where in it) naming an unsupported or malformed part.
  // The top level must admit an object or an array (response_format); other values are not.
  static JsonSchema compile(const ojson& schema, const std::string& param);
  // Any value at the top level (a tool parameter's schema).
  static JsonSchema compile_value(const ojson& schema, const std::string& param);
  // A part of a larger document (a tool parameter of a tool's "parameters"): its '#' references
  // resolve in `document` (named document_param in errors).
  static JsonSchema compile_value(const ojson& schema, const std::string& param,
                                  const ojson& document, const std::string& document_param);
  static JsonSchema any_object();  // response_format json_object
  const SchemaNode* root() const { return root_; }

  JsonSchema() = default;
  JsonSchema(JsonSchema&&) = default;
  JsonSchema& operator=(JsonSchema&&) = default;
  JsonSchema(const JsonSchema&) = delete;  // the nodes point into this object's storage
  JsonSchema& operator=(const JsonSchema&) = delete;

 private:
  friend class SchemaCompiler;
  std::deque<SchemaNode> nodes_;
  std::deque<ObjectRule> objects_;
  std::deque<ArrayRule> arrays_;
  std::deque<ByteDfa> dfas_;
  const SchemaNode* root_ = nullptr;
};

}  // namespace cedar::text
