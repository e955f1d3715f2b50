// Internals of JsonSchema::compile (text/json_schema.h), shared by json_schema.cpp (reading the
// document's keywords), json_schema_merge.cpp (allOf conjunctions, anyOf distribution, oneOf
// disjointness) and json_schema_build.cpp (rules, automata and the depth analysis).
//
// A schema is first read into Drafts: each is a conjunction of per-type recipes (string,
// number, object, array constraints as written) or an anyOf of such conjunctions. Conjunction
// (allOf, $ref with siblings, enum with other keywords) merges recipes exactly -- object
// properties are kept as facets so that additionalProperties / patternProperties keep their
// meaning -- and distributes over anyOf. Drafts reached through properties and items are read
// lazily, so recursive schemas are graphs; only a cycle through allOf / anyOf / $ref alone
// (a schema that is its own conjunct) is refused. Then each Draft becomes a SchemaNode.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/json_schema.h"

namespace cedar::text {

struct Draft;

struct StrRecipe {
  std::vector<std::string> patterns;  // sorted, each must match
  uint64_t min_len = 0, max_len = UINT64_MAX;
  bool has_lits = false;
  std::vector<std::string> lits;  // sorted decoded strings (has_lits: only these)
};

struct NumRecipe {
  bool integer = false;
  bool has_lo = false, has_hi = false;
  double lo = 0, hi = 0;
  bool lo_excl = false, hi_excl = false;
  uint64_t multiple = 0;
  bool has_lits = false;
  std::vector<std::string> lits;  // sorted JSON texts
};

// One schema's properties / patternProperties / additionalProperties: a key's value must
// satisfy each facet of the object.
struct Facet {
  std::vector<std::pair<std::string, Draft*>> props;     // name -> schema
  std::vector<std::pair<std::string, Draft*>> patterns;  // regex -> schema
  Draft* additional = nullptr;  // keys neither declared nor matched (any_ when absent)
  bool additional_given = false;
};

struct ObjRecipe {
  std::vector<Facet> facets;
  std::vector<std::string> required;  // sorted, unique
  uint64_t min_props = 0, max_props = UINT64_MAX;
  std::vector<std::string> name_patterns;  // propertyNames
  uint64_t name_min = 0, name_max = UINT64_MAX;
};

struct ArrRecipe {
  std::vector<Draft*> prefix;
  Draft* rest = nullptr;  // any_ when absent; false_: no more items
  uint64_t min_items = 0, max_items = UINT64_MAX;
  bool unique = false;
};

struct Draft {
  enum class State : uint8_t { kPending, kActive, kDone };
  State state = State::kPending;
  const ojson* json = nullptr;  // read from the document ...
  std::vector<Draft*> atoms;    // ... or the conjunction of these (sorted, 2 or more, none a
                                // conjunction itself: each set is one draft)
  std::string path;
  // Done: either alts (an anyOf of simple drafts) or the recipes below (a simple draft).
  std::vector<Draft*> alts;
  uint8_t types = SchemaNode::kAllTypes;
  uint8_t bools = 3;
  StrRecipe str;
  NumRecipe num;
  ObjRecipe obj;
  ArrRecipe arr;
  std::string unique_path;  // where uniqueItems was asked for
  SchemaNode* out = nullptr;
  bool built = false;
  bool simple() const { return state == State::kDone && alts.empty(); }
};

class SchemaCompiler {
 public:
  // doc: the document '#' references resolve in; param: its name in errors.
  SchemaCompiler(JsonSchema* out, const ojson& doc, std::string param);
  // The node of `start` (doc itself or a part of it, named start_param); container_root: only
  // objects and arrays at its top level.
  const SchemaNode* run(const ojson& start, const std::string& start_param, bool container_root);

  [[noreturn]] static void fail(const std::string& path, const std::string& why);

 private:
  // ---- json_schema.cpp: drafts from the document
  Draft* make(const std::string& path);
  Draft* from_json(const ojson& s, const std::string& path);
  void resolve(Draft* d);
  void resolve_json(Draft* d);
  void read_keywords(const ojson& s, const std::string& path, Draft* d);
  void read_type(const ojson& s, const std::string& path, Draft* d);
  void read_string(const ojson& s, const std::string& path, Draft* d);
  void read_number(const ojson& s, const std::string& path, Draft* d);
  void read_object(const ojson& s, const std::string& path, Draft* d);
  void read_property_names(const ojson& s, const std::string& path, Draft* d);
  void read_array(const ojson& s, const std::string& path, Draft* d);
  Draft* ref_target(const ojson& ref, const std::string& path);
  Draft* any_of(const ojson& list, const std::string& path, bool one_of);
  Draft* enum_of(const ojson& values, const std::string& path);
  Draft* const_of(const ojson& v, const std::string& path);
  void add_literal_bytes(size_t n, const std::string& path);
  void scan_document(const ojson& doc);

  // ---- json_schema_merge.cpp
  Draft* conj(Draft* a, Draft* b);
  void resolve_conj(Draft* d);
  void merge_simple(Draft* d, const Draft& a, const Draft& b);
  bool disjoint(Draft* a, Draft* b, int depth);
  bool objects_disjoint(Draft* a, Draft* b, int depth);

  // ---- json_schema_build.cpp
  void drain();
  void build(Draft* d);
  struct KeyPlan {
    std::vector<size_t> first;  // facet f's patternProperties: key automaton bits from first[f]
    size_t n_pat = 0;
    uint64_t name_bits = 0;  // propertyNames: every one of these bits
    ByteDfa* keys = nullptr;
    uint64_t mask_of(const std::string& name) const;
  };
  void build_object(Draft* d);
  KeyPlan plan_keys(const Draft* d);
  bool declare_names(Draft* d, const KeyPlan& k, ObjectRule* o);
  void build_trie(const Draft* d, ObjectRule* o);
  void plan_free_keys(const Draft* d, const KeyPlan& k, ObjectRule* o);
  Draft* facet_value(const Facet& f, size_t facet_first, const std::string* name, uint64_t mask);
  void build_array(Draft* d);
  void build_string(Draft* d);
  void build_number(Draft* d);
  const ByteDfa* pattern_dfa(const std::vector<std::string>& patterns, const std::string& path);
  ByteDfa* own_dfa(ByteDfa dfa, const std::string& path);
  void analyse_depth();
  void finish_objects();
  void finish_fits();
  void unsat(const std::string& path, const std::string& why);

  JsonSchema* out_;
  const ojson& doc_;
  std::string param_;
  std::deque<Draft> drafts_;
  std::unordered_map<const ojson*, Draft*> by_json_;
  std::map<std::vector<Draft*>, Draft*> conj_memo_;
  Draft* any_ = nullptr;
  Draft* false_ = nullptr;
  int inline_depth_ = 0;
  bool refs_ = false, ids_ = false;  // a $ref; an $id / id below the top
  bool ids_move_base_ = false;       // both: '#' pointers would not mean the document
  size_t literal_bytes_ = 0;
  size_t dfa_states_ = 0;
  uint64_t regex_work_ = SchemaLimits::kMaxRegexWork;  // left of the patterns' budget
  std::map<std::vector<std::string>, const ByteDfa*> pattern_cache_;
  std::vector<std::pair<std::string, std::string>> unsat_;  // (path, why), first ones kept
  std::vector<ObjectRule*> objects_;  // built so far (finished after the depth analysis)
};

}  // namespace cedar::text
