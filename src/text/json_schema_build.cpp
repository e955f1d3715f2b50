// From resolved drafts to SchemaNodes: the object / array / string / number rules with their
// automata, then the depth analysis (how many container levels each value needs, so that the
// matcher never opens a value it cannot close within JsonMatcher::kMaxDepth).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "text/json_schema_compiler.h"

namespace cedar::text {

namespace {

uint32_t clamp32(uint64_t v) { return v > UINT32_MAX ? UINT32_MAX : uint32_t(v); }

uint64_t code_points(std::string_view s) {
  uint64_t n = 0;
  for (const char c : s) n += ByteDfa::weight(uint8_t(c));
  return n;
}

uint8_t add_level(uint8_t m) { return m >= kMaxJsonDepth ? kUnsat : uint8_t(m + 1); }

// A number literal as a validator reads it (a JavaScript double) against the rule's bounds.
bool number_literal_ok(const NumRecipe& n, const std::string& text) {
  const double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v)) return false;
  if (n.has_lo && (v < n.lo || (v == n.lo && n.lo_excl))) return false;
  if (n.has_hi && (v > n.hi || (v == n.hi && n.hi_excl))) return false;
  if (n.integer && v != std::floor(v)) return false;
  if (n.multiple != 0) {  // ajv: data / multipleOf must be an integer (parseInt of it)
    const double q = v / double(n.multiple);
    if (q != std::floor(q) || std::fabs(q) >= 1e21) return false;
  }
  return true;
}

// The levels an object of rule o needs at least: its required values, and the shallowest of the
// other keys minProperties asks for.
uint8_t object_md(const ObjectRule& o) {
  const uint32_t n_req =
      uint32_t(__builtin_popcountll(o.required[0]) + __builtin_popcountll(o.required[1]));
  if (o.max_props < n_req || o.min_props > o.max_props) return kUnsat;
  uint8_t m = 0;
  for (uint32_t i = 0; i < n_req; ++i) m = std::max(m, o.values[i]->md);
  if (o.min_props > n_req && m != kUnsat) {  // more keys: the shallowest ones
    std::vector<uint8_t> c;
    for (size_t i = n_req; i < o.values.size(); ++i) c.push_back(o.values[i]->md);
    if (o.free) c.insert(c.end(), o.distinct_free ? SchemaLimits::kMaxDistinctFree : 1, o.free_md);
    std::sort(c.begin(), c.end());
    const size_t extra = o.min_props - n_req;
    m = extra <= c.size() ? std::max(m, c[extra - 1]) : kUnsat;
  }
  return m == kUnsat ? kUnsat : add_level(m);
}

// The levels an array of rule a needs at least: the items minItems asks for.
uint8_t array_md(const ArrayRule& a) {
  if (a.min_items > a.max_items) return kUnsat;
  uint8_t m = 0;
  for (uint32_t i = 0; i < a.min_items && i < a.prefix.size(); ++i)
    m = std::max<uint8_t>(m, a.prefix[i] ? a.prefix[i]->md : kUnsat);
  if (a.min_items > a.prefix.size()) m = std::max<uint8_t>(m, a.rest ? a.rest->md : kUnsat);
  return m == kUnsat ? kUnsat : add_level(m);
}

}  // namespace

void SchemaCompiler::unsat(const std::string& path, const std::string& why) {
  if (unsat_.size() < 4) unsat_.emplace_back(path, why);
}

ByteDfa* SchemaCompiler::own_dfa(ByteDfa dfa, const std::string& path) {
  dfa_states_ += dfa.size();
  if (dfa_states_ > SchemaLimits::kMaxTotalDfaStates)
    fail(path, "the schema's patterns, formats and literals need more than " +
                   std::to_string(SchemaLimits::kMaxTotalDfaStates) + " automaton states");
  return &out_->dfas_.emplace_back(std::move(dfa));
}

// The automaton of a string that must match every pattern (cached: formats repeat).
const ByteDfa* SchemaCompiler::pattern_dfa(const std::vector<std::string>& patterns,
                                           const std::string& path) {
  if (const auto it = pattern_cache_.find(patterns); it != pattern_cache_.end()) return it->second;
  ByteDfa* d = nullptr;
  try {
    d = own_dfa(ByteDfa::patterns(patterns, SchemaLimits::kMaxDfaStates, &regex_work_), path);
  } catch (const RegexError& e) {
    std::string names;
    for (const auto& p : patterns) names += (names.empty() ? "\"" : ", \"") + p + "\"";
    fail(path, "pattern " + names + ": " + e.what());
  }
  const uint64_t all = patterns.size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << patterns.size()) - 1;
  d->finish([all](uint32_t, const ByteDfa::State& s) { return (s.accept & all) == all; });
  pattern_cache_.emplace(patterns, d);
  return d;
}

void SchemaCompiler::drain() {
  for (size_t i = 0; i < drafts_.size(); ++i) {  // building adds drafts (property values)
    Draft* d = &drafts_[i];
    resolve(d);
    build(d);
  }
}

void SchemaCompiler::build(Draft* d) {
  if (d->built) return;
  d->built = true;
  SchemaNode& n = *d->out;
  if (!d->alts.empty()) {
    for (const Draft* a : d->alts) n.alts.push_back(a->out);
    return;
  }
  n.types = d->types;
  n.bools = d->bools;
  if (d->types & SchemaNode::kObject) build_object(d);
  if (d->types & SchemaNode::kArray) build_array(d);
  if (d->types & SchemaNode::kString) build_string(d);
  if (d->types & SchemaNode::kNumber) build_number(d);
}

// A key's value schema from one facet: its declared schema and the patterns it matches (mask
// bits from `first`), or additionalProperties when neither applies.
Draft* SchemaCompiler::facet_value(const Facet& f, size_t first, const std::string* name,
                                   uint64_t mask) {
  Draft* v = any_;
  bool applies = false;
  if (name)
    for (const auto& [n, s] : f.props)
      if (n == *name) {
        v = conj(v, s);
        applies = true;
      }
  for (size_t k = 0; k < f.patterns.size(); ++k)
    if (mask >> (first + k) & 1) {
      v = conj(v, f.patterns[k].second);
      applies = true;
    }
  return applies ? v : conj(v, f.additional);
}

// One automaton for an object's keys: every facet's patternProperties (facet f's from bit
// first[f]), then propertyNames (name_bits, all of which a key must match).
SchemaCompiler::KeyPlan SchemaCompiler::plan_keys(const Draft* d) {
  const ObjRecipe& r = d->obj;
  KeyPlan k;
  std::vector<std::string> comps;
  for (const Facet& f : r.facets) {
    k.first.push_back(comps.size());
    for (const auto& p : f.patterns) comps.push_back(p.first);
  }
  k.n_pat = comps.size();
  comps.insert(comps.end(), r.name_patterns.begin(), r.name_patterns.end());
  if (comps.size() > 64) fail(d->path, "more than 64 patterns constrain this object's keys");
  k.name_bits = (comps.size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << comps.size()) - 1) &
                ~((uint64_t(1) << k.n_pat) - 1);
  if (comps.empty()) return k;
  try {
    k.keys = own_dfa(ByteDfa::patterns(comps, SchemaLimits::kMaxDfaStates, &regex_work_), d->path);
  } catch (const RegexError& e) {
    fail(d->path, std::string("patternProperties / propertyNames: ") + e.what());
  }
  return k;
}

uint64_t SchemaCompiler::KeyPlan::mask_of(const std::string& name) const {
  if (!keys) return 0;
  const uint32_t s = keys->run(name);
  return s == ByteDfa::kDead ? 0 : keys->state(s).accept;
}

// The declared names (every facet's properties and the required ones), required first, each
// with the conjunction of what every facet says of it. A forbidden name stays (last, with a value
// nothing satisfies), so that a key spelling it is that name, never a free key. False when a
// required one is forbidden.
bool SchemaCompiler::declare_names(Draft* d, const KeyPlan& k, ObjectRule* o) {
  const ObjRecipe& r = d->obj;
  std::vector<std::string> all = r.required;
  for (const Facet& f : r.facets)
    for (const auto& p : f.props) all.push_back(p.first);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::vector<std::pair<std::string, Draft*>> req, opt, forbidden;
  bool ok = true;
  for (const std::string& name : all) {
    const uint64_t mask = k.mask_of(name);
    const bool required = std::binary_search(r.required.begin(), r.required.end(), name);
    const uint64_t len = code_points(name);
    Draft* v = any_;
    if (len < r.name_min || len > r.name_max || (mask & k.name_bits) != k.name_bits)
      v = false_;
    else
      for (size_t f = 0; f < r.facets.size(); ++f)
        v = conj(v, facet_value(r.facets[f], k.first[f], &name, mask));
    if (v == false_ && required) {
      unsat(d->path, "the required property \"" + name +
                         "\" is not allowed (additionalProperties / propertyNames)");
      ok = false;
    }
    (v == false_ ? forbidden : required ? req : opt).emplace_back(name, v);
  }
  if (req.size() > SchemaLimits::kMaxTracked)
    fail(d->path, "more than " + std::to_string(SchemaLimits::kMaxTracked) +
                      " required properties on one object");
  for (auto* list : {&req, &opt, &forbidden})
    for (auto& [name, v] : *list) {
      o->names.push_back(name);
      o->values.push_back(v->out);
    }
  o->n_tracked = uint32_t(std::min<size_t>(o->names.size(), SchemaLimits::kMaxTracked));
  for (size_t i = 0; i < req.size(); ++i) o->required[i / 64] |= uint64_t(1) << (i % 64);
  if (r.min_props > 1 && o->names.size() > SchemaLimits::kMaxTracked)
    fail(d->path, "minProperties on an object of more than " +
                      std::to_string(SchemaLimits::kMaxTracked) + " properties");
  return ok;
}

// The names' trie, and which names lie at or below each of its states.
void SchemaCompiler::build_trie(const Draft* d, ObjectRule* o) {
  try {
    o->trie = ByteDfa::literals(o->names, SIZE_MAX);
  } catch (const RegexError& e) {
    fail(d->path, e.what());
  }
  o->trie.finish([](uint32_t, const ByteDfa::State& s) { return s.tag != UINT32_MAX; });
  o->below.assign(o->trie.size(), Bits128{});
  o->untracked_below.assign(o->trie.size(), 0);
  for (size_t i = 0; i < o->names.size(); ++i) {
    uint32_t at = o->trie.start();
    for (size_t k = 0; k <= o->names[i].size(); ++k) {
      if (i < o->n_tracked)
        o->below[at][i / 64] |= uint64_t(1) << (i % 64);
      else
        o->untracked_below[at] = 1;
      if (k < o->names[i].size()) at = o->trie.next(at, uint8_t(o->names[i][k]));
    }
  }
}

// Keys other than the names, written when the schema asks for them (see json_schema.h): the
// value schema each final state of the key automaton gives (or one for every key without one).
void SchemaCompiler::plan_free_keys(const Draft* d, const KeyPlan& k, ObjectRule* o) {
  const ObjRecipe& r = d->obj;
  bool given = false, possible = r.max_props > 0;
  for (const Facet& f : r.facets) {
    given |= f.additional_given;
    possible &= !(f.additional == false_ && f.patterns.empty());
  }
  o->free = possible && (o->names.empty() || given || k.n_pat > 0 || r.min_props > o->names.size());
  if (!o->free) return;
  if (!k.keys) {
    Draft* v = any_;
    for (const Facet& f : r.facets) v = conj(v, facet_value(f, 0, nullptr, 0));
    o->free_value = v->out;
    return;
  }
  std::map<uint64_t, Draft*> by_mask;
  o->free_values.assign(k.keys->size(), nullptr);
  for (uint32_t s = 0; s < k.keys->size(); ++s) {
    const uint64_t mask = k.keys->state(s).accept;
    if ((mask & k.name_bits) != k.name_bits) continue;
    Draft*& v = by_mask[mask];
    if (!v) {
      v = any_;
      for (size_t f = 0; f < r.facets.size(); ++f)
        v = conj(v, facet_value(r.facets[f], k.first[f], nullptr, mask));
    }
    if (v != false_) o->free_values[s] = v->out;
  }
  k.keys->finish([&](uint32_t i, const ByteDfa::State&) { return o->free_values[i] != nullptr; });
  o->keys = k.keys;
}

void SchemaCompiler::build_object(Draft* d) {
  const ObjRecipe& r = d->obj;
  ObjectRule& o = out_->objects_.emplace_back();
  d->out->obj = &o;
  const KeyPlan k = plan_keys(d);
  bool ok = declare_names(d, k, &o) && r.min_props <= r.max_props;
  build_trie(d, &o);
  plan_free_keys(d, k, &o);
  o.key_min = clamp32(r.name_min);
  o.key_max = clamp32(r.name_max);
  o.key_clip = kKeyClip + (o.keys ? o.keys->rem_clip() : 0);
  o.min_props = clamp32(r.min_props);
  o.max_props = clamp32(r.max_props);
  if (o.free && r.min_props > 1) {  // free keys may count towards minProperties: each distinct
    o.distinct_free = true;
    if (r.min_props > o.names.size() + SchemaLimits::kMaxDistinctFree)
      fail(d->path,
           "minProperties needs more than " + std::to_string(SchemaLimits::kMaxDistinctFree) +
               " keys beyond the declared properties (duplicates could not be told apart)");
  }
  if (!o.free && r.min_props > o.names.size()) {
    unsat(d->path, "minProperties asks for more keys than the object may have");
    ok = false;
  }
  if (!ok) o.max_props = 0, o.min_props = 1;  // no object satisfies it
  objects_.push_back(&o);
}

void SchemaCompiler::build_array(Draft* d) {
  ArrayRule& a = out_->arrays_.emplace_back();
  d->out->arr = &a;
  for (Draft* p : d->arr.prefix) a.prefix.push_back(p == false_ ? nullptr : p->out);
  a.rest = d->arr.rest == false_ ? nullptr : d->arr.rest->out;
  a.min_items = clamp32(d->arr.min_items);
  a.max_items = clamp32(d->arr.max_items);
  if (a.prefix.size() > a.max_items) a.prefix.resize(a.max_items);
  if (a.min_items > a.max_items) unsat(d->path, "minItems is larger than maxItems");
}

void SchemaCompiler::build_string(Draft* d) {
  StringRule& r = d->out->str;
  const StrRecipe& s = d->str;
  r.min_len = clamp32(s.min_len);
  r.max_len = clamp32(s.max_len);
  if (s.has_lits) {  // enum / const: the literals the other keywords allow, as a trie
    const ByteDfa* pd = s.patterns.empty() ? nullptr : pattern_dfa(s.patterns, d->path);
    std::vector<std::string> keep;
    for (const auto& lit : s.lits) {
      const uint64_t n = code_points(lit);
      if (n < s.min_len || n > s.max_len) continue;
      if (pd) {
        const uint32_t at = pd->run(lit);
        if (at == ByteDfa::kDead || !pd->state(at).final) continue;
      }
      keep.push_back(lit);
    }
    ByteDfa* t = own_dfa(ByteDfa::literals(keep, SIZE_MAX), d->path);
    t->finish([](uint32_t, const ByteDfa::State& st) { return st.tag != UINT32_MAX; });
    r.dfa = t;
    r.min_len = 0;
    r.max_len = UINT32_MAX;
  } else if (!s.patterns.empty()) {
    r.dfa = pattern_dfa(s.patterns, d->path);
  }
  const ByteDfa::State* st = r.dfa ? &r.dfa->state(r.dfa->start()) : nullptr;
  r.sat = r.min_len <= r.max_len &&
          (!st || (st->min_rem != ByteDfa::kInf && st->min_rem <= r.max_len &&
                   (st->max_rem == ByteDfa::kInf || st->max_rem >= r.min_len)));
  r.clip = kKeyClip + (r.dfa ? r.dfa->rem_clip() : 0);
  if (!r.sat && (d->types & ~SchemaNode::kString) == 0)
    unsat(d->path, s.has_lits ? "no enum / const string satisfies the string keywords"
                              : "no string satisfies pattern / format / minLength / maxLength");
}

void SchemaCompiler::build_number(Draft* d) {
  NumberRule& r = d->out->num;
  const NumRecipe& n = d->num;
  r.integer = n.integer;
  r.multiple = n.multiple;
  if (n.has_lo) r.lo = make_bound(n.lo, n.lo_excl);
  if (n.has_hi) r.hi = make_bound(n.hi, n.hi_excl);
  r.exact = n.has_lo || n.has_hi || n.multiple != 0;
  if (n.has_lits) {
    std::vector<std::string> keep;
    for (const auto& lit : n.lits)
      if (number_literal_ok(n, lit)) keep.push_back(lit);
    ByteDfa* t = own_dfa(ByteDfa::literals(keep, SIZE_MAX), d->path);
    t->finish([](uint32_t, const ByteDfa::State& st) { return st.tag != UINT32_MAX; });
    r.literals = t;
    r.sat = !keep.empty();
  } else {
    r.sat = number_finish(&r);
  }
  if (!r.sat && (d->types & ~SchemaNode::kNumber) == 0)
    unsat(d->path, "no number satisfies minimum / maximum / multipleOf / enum together");
}

// Container levels each node's shallowest value needs: a least fixpoint, iterated until stable
// (values only fall, and a value of level m needs its children at m - 1: few sweeps).
void SchemaCompiler::analyse_depth() {
  for (int sweep = 0; sweep < 4 * kMaxJsonDepth + 8; ++sweep) {
    bool changed = false;
    for (ObjectRule* o : objects_) {
      uint8_t fm = kUnsat;  // the shallowest free value
      if (o->free_value) fm = o->free_value->md;
      for (size_t s = 0; s < o->free_values.size(); ++s)
        if (o->free_values[s] && o->keys->state(uint32_t(s)).final)
          fm = std::min(fm, o->free_values[s]->md);
      o->free_md = fm;
    }
    for (Draft& d : drafts_) {
      SchemaNode& n = *d.out;
      uint8_t md = kUnsat;
      if (!n.alts.empty()) {
        for (const SchemaNode* a : n.alts) md = std::min(md, a->md);
      } else {
        const bool scalar = (n.types & SchemaNode::kNull) ||
                            ((n.types & SchemaNode::kBool) && n.bools) ||
                            ((n.types & SchemaNode::kString) && n.str.sat) ||
                            ((n.types & SchemaNode::kNumber) && n.num.sat);
        n.md_object = n.obj && (n.types & SchemaNode::kObject) ? object_md(*n.obj) : kUnsat;
        n.md_array = n.arr && (n.types & SchemaNode::kArray) ? array_md(*n.arr) : kUnsat;
        md = std::min({scalar ? uint8_t(0) : kUnsat, n.md_object, n.md_array});
      }
      if (md != n.md) {
        n.md = md;
        changed = true;
      }
    }
    if (!changed) return;
  }
}

// With depths known: free keys whose value cannot be written are pruned from the key automata,
// and each object learns which names fit under each nesting budget.
void SchemaCompiler::finish_objects() {
  for (ObjectRule* rule : objects_) {
    ObjectRule& o = *rule;
    if (o.keys && o.free) {
      ByteDfa* keys = const_cast<ByteDfa*>(o.keys);  // owned by out_->dfas_, built here
      keys->finish([&](uint32_t i, const ByteDfa::State&) {
        return o.free_values[i] && o.free_values[i]->md != kUnsat;
      });
      for (uint32_t s = 0; s < keys->size(); ++s)
        if (!keys->state(s).final) o.free_values[s] = nullptr;
      if (keys->empty()) o.free = false;
      o.key_clip = kKeyClip + keys->rem_clip();
    } else if (o.free && o.free_value && o.free_value->md == kUnsat) {
      o.free = false;
    }
  }
}

void SchemaCompiler::finish_fits() {
  for (ObjectRule* rule : objects_) {
    ObjectRule& o = *rule;
    o.fits.assign(kMaxJsonDepth + 1, Bits128{});
    for (int budget = 0; budget <= kMaxJsonDepth; ++budget)
      for (uint32_t i = 0; i < o.n_tracked; ++i)
        if (o.values[i]->md <= budget) o.fits[size_t(budget)][i / 64] |= uint64_t(1) << (i % 64);
  }
}

const SchemaNode* SchemaCompiler::run(const ojson& start, const std::string& start_param,
                                      bool container_root) {
  if (&start != &doc_) scan_document(start);
  Draft* root = from_json(start, start_param);
  resolve(root);
  if (container_root) {  // response_format: the answer is an object or an array
    Draft* c = make(param_);
    c->state = Draft::State::kDone;
    c->types = SchemaNode::kObject | SchemaNode::kArray;
    root = conj(root, c);
    resolve(root);
  }
  drain();
  analyse_depth();
  finish_objects();
  analyse_depth();
  finish_fits();
  for (const Draft& d : drafts_)
    if (d.arr.unique && (d.out->types & SchemaNode::kArray) && d.out->md_array != kUnsat &&
        d.out->arr->max_items > 1)
      fail(d.unique_path, "uniqueItems is enforced only where at most one item fits (maxItems 1)");
  if (root->out->md == kUnsat) {
    const uint8_t types = root->out->alts.empty() ? root->out->types : SchemaNode::kAllTypes;
    if (container_root && types == 0)
      fail(start_param, "the schema's top level must be an object (or an array)");
    if (!unsat_.empty()) fail(unsat_[0].first, unsat_[0].second + ": the schema admits no value");
    fail(start_param, container_root
                          ? "the schema admits no object or array (its keywords contradict "
                            "each other, or it nests deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels)"
                          : "the schema admits no value (its keywords contradict each other)");
  }
  return root->out;
}

}  // namespace cedar::text
