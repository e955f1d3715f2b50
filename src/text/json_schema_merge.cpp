// Conjunction of drafts (allOf, $ref with siblings, enum beside other keywords): exact merges of
// the per-type recipes, distributed over anyOf; and the disjointness proof oneOf needs.
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "text/json_schema_compiler.h"

namespace cedar::text {

namespace {

std::vector<std::string> sorted_union(const std::vector<std::string>& a,
                                      const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<std::string> sorted_intersection(const std::vector<std::string>& a,
                                             const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Literal sets: both given -> the common literals; one given -> it.
void merge_lits(bool ha, const std::vector<std::string>& a, bool hb,
                const std::vector<std::string>& b, bool* has, std::vector<std::string>* out) {
  *has = ha || hb;
  *out = ha && hb ? sorted_intersection(a, b) : ha ? a : b;
}

uint64_t lcm(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return a | b;
  const uint64_t g = std::gcd(a, b);
  if (a / g > UINT64_MAX / b) return UINT64_MAX;  // only 0 is a multiple within 15 digits
  return a / g * b;
}

void merge_numbers(NumRecipe* d, const NumRecipe& a, const NumRecipe& b) {
  d->integer = a.integer || b.integer;
  d->multiple = lcm(a.multiple, b.multiple);
  for (const NumRecipe* x : {&a, &b}) {  // the tighter bound; at a tie, the exclusive one
    if (x->has_lo) {
      if (!d->has_lo || x->lo > d->lo) {
        d->lo = x->lo;
        d->lo_excl = x->lo_excl;
      } else if (x->lo == d->lo) {
        d->lo_excl = d->lo_excl || x->lo_excl;
      }
      d->has_lo = true;
    }
    if (x->has_hi) {
      if (!d->has_hi || x->hi < d->hi) {
        d->hi = x->hi;
        d->hi_excl = x->hi_excl;
      } else if (x->hi == d->hi) {
        d->hi_excl = d->hi_excl || x->hi_excl;
      }
      d->has_hi = true;
    }
  }
  merge_lits(a.has_lits, a.lits, b.has_lits, b.lits, &d->has_lits, &d->lits);
}

bool number_lits_meet(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const auto& x : a)
    for (const auto& y : b)
      if (std::strtod(x.c_str(), nullptr) == std::strtod(y.c_str(), nullptr)) return true;
  return false;
}

bool ranges_apart(const NumRecipe& a, const NumRecipe& b) {
  auto below = [](const NumRecipe& x, const NumRecipe& y) {  // every x under every y
    return x.has_hi && y.has_lo && (x.hi < y.lo || (x.hi == y.lo && (x.hi_excl || y.lo_excl)));
  };
  return below(a, b) || below(b, a);
}

// The schemas a facet list gives a declared name (facets without it give none here).
std::vector<Draft*> declared(const ObjRecipe& o, const std::string& name) {
  std::vector<Draft*> out;
  for (const Facet& f : o.facets)
    for (const auto& [n, d] : f.props)
      if (n == name) out.push_back(d);
  return out;
}

}  // namespace

// Conjunctions are keyed by the set of drafts they join, so that a & (a & b) is a & b: merging
// recursive schemas (a property of a & b is again a & b) then reaches a fixpoint.
Draft* SchemaCompiler::conj(Draft* a, Draft* b) {
  if (a == b || b == any_) return a;
  if (a == any_) return b;
  if (a == false_ || b == false_) return false_;
  std::vector<Draft*> set;
  const std::vector<Draft*> one_a{a}, one_b{b};
  const auto& sa = a->atoms.empty() ? one_a : a->atoms;
  const auto& sb = b->atoms.empty() ? one_b : b->atoms;
  std::set_union(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(set));
  if (set.size() == 1) return set[0];
  if (const auto it = conj_memo_.find(set); it != conj_memo_.end()) return it->second;
  Draft* d = make(a->path);
  d->atoms = set;
  conj_memo_.emplace(std::move(set), d);
  return d;
}

void SchemaCompiler::resolve_conj(Draft* d) {
  // one draft, and the conjunction of the others: one already resolved if there is one (allOf
  // folds one branch at a time), so that long conjunctions do not nest
  Draft *left = nullptr, *right = nullptr;
  for (size_t i = d->atoms.size(); i-- > 0 && !left;) {
    std::vector<Draft*> rest = d->atoms;
    rest.erase(rest.begin() + std::ptrdiff_t(i));
    const auto it = conj_memo_.find(rest);
    Draft* r = rest.size() == 1 ? rest[0] : it == conj_memo_.end() ? nullptr : it->second;
    if (r && r->state == Draft::State::kDone) left = r, right = d->atoms[i];
  }
  if (!left) {
    left = d->atoms[0];
    for (size_t i = 1; i + 1 < d->atoms.size(); ++i) left = conj(left, d->atoms[i]);
    right = d->atoms.back();
  }
  resolve(left);
  resolve(right);
  const Draft& a = *left;
  const Draft& b = *right;
  if (a.alts.empty() && b.alts.empty()) {
    merge_simple(d, a, b);
    return;
  }
  // (a1 | a2) & (b1 | b2) = a1&b1 | a1&b2 | a2&b1 | a2&b2
  const std::vector<Draft*> la = a.alts.empty() ? std::vector<Draft*>{left} : a.alts;
  const std::vector<Draft*> lb = b.alts.empty() ? std::vector<Draft*>{right} : b.alts;
  for (Draft* x : la)
    for (Draft* y : lb) {
      Draft* c = conj(x, y);
      if (c == false_ || std::find(d->alts.begin(), d->alts.end(), c) != d->alts.end()) continue;
      d->alts.push_back(c);
      if (d->alts.size() > SchemaLimits::kMaxAlternatives)
        fail(d->path, "allOf over anyOf expands to more than " +
                          std::to_string(SchemaLimits::kMaxAlternatives) + " alternatives");
    }
  if (d->alts.empty()) d->types = 0;  // no pair is satisfiable
}

void SchemaCompiler::merge_simple(Draft* d, const Draft& a, const Draft& b) {
  d->types = a.types & b.types;
  d->bools = a.bools & b.bools;
  if (d->types & SchemaNode::kString) {
    d->str.patterns = sorted_union(a.str.patterns, b.str.patterns);
    d->str.min_len = std::max(a.str.min_len, b.str.min_len);
    d->str.max_len = std::min(a.str.max_len, b.str.max_len);
    merge_lits(a.str.has_lits, a.str.lits, b.str.has_lits, b.str.lits, &d->str.has_lits,
               &d->str.lits);
  }
  if (d->types & SchemaNode::kNumber) merge_numbers(&d->num, a.num, b.num);
  if (d->types & SchemaNode::kObject) {
    ObjRecipe& o = d->obj;
    o.facets = a.obj.facets;
    o.facets.insert(o.facets.end(), b.obj.facets.begin(), b.obj.facets.end());
    o.required = sorted_union(a.obj.required, b.obj.required);
    o.min_props = std::max(a.obj.min_props, b.obj.min_props);
    o.max_props = std::min(a.obj.max_props, b.obj.max_props);
    o.name_patterns = sorted_union(a.obj.name_patterns, b.obj.name_patterns);
    o.name_min = std::max(a.obj.name_min, b.obj.name_min);
    o.name_max = std::min(a.obj.name_max, b.obj.name_max);
  }
  if (d->types & SchemaNode::kArray) {
    ArrRecipe& r = d->arr;
    const size_t n = std::max(a.arr.prefix.size(), b.arr.prefix.size());
    auto item = [](const ArrRecipe& x, size_t i) {
      return i < x.prefix.size() ? x.prefix[i] : x.rest;
    };
    for (size_t i = 0; i < n; ++i) r.prefix.push_back(conj(item(a.arr, i), item(b.arr, i)));
    r.rest = conj(a.arr.rest, b.arr.rest);
    r.min_items = std::max(a.arr.min_items, b.arr.min_items);
    r.max_items = std::min(a.arr.max_items, b.arr.max_items);
    r.unique = a.arr.unique || b.arr.unique;
    d->unique_path = a.unique_path.empty() ? b.unique_path : a.unique_path;
  }
}

// No value satisfies both a and b, provably: different types, disjoint literal sets, number
// ranges apart, or objects that require one property with disjoint schemas (a discriminator).
bool SchemaCompiler::disjoint(Draft* a, Draft* b, int depth) {
  if (depth > 8) return false;
  for (Draft* x : {a, b}) {
    if (x->state == Draft::State::kActive) return false;
    resolve(x);
  }
  if (!a->alts.empty() || !b->alts.empty()) {
    const std::vector<Draft*> la = a->alts.empty() ? std::vector<Draft*>{a} : a->alts;
    const std::vector<Draft*> lb = b->alts.empty() ? std::vector<Draft*>{b} : b->alts;
    for (Draft* x : la)
      for (Draft* y : lb)
        if (!disjoint(x, y, depth + 1)) return false;
    return true;
  }
  const uint8_t common = a->types & b->types;
  if (common & SchemaNode::kNull) return false;
  if ((common & SchemaNode::kBool) && (a->bools & b->bools)) return false;
  if (common & SchemaNode::kString) {
    if (!a->str.has_lits || !b->str.has_lits ||
        !sorted_intersection(a->str.lits, b->str.lits).empty())
      return false;
  }
  if (common & SchemaNode::kNumber) {
    const bool lits =
        a->num.has_lits && b->num.has_lits && !number_lits_meet(a->num.lits, b->num.lits);
    if (!lits && !ranges_apart(a->num, b->num)) return false;
  }
  if ((common & SchemaNode::kObject) && !objects_disjoint(a, b, depth)) return false;
  if (common & SchemaNode::kArray) return false;
  return true;
}

bool SchemaCompiler::objects_disjoint(Draft* a, Draft* b, int depth) {
  // a property one requires and the other forbids outright
  auto forbids = [&](const Draft* x, const std::string& name) {
    for (const Facet& f : x->obj.facets)
      if (f.additional == false_ && f.patterns.empty() &&
          std::none_of(f.props.begin(), f.props.end(),
                       [&](const auto& p) { return p.first == name; }))
        return true;
    return false;
  };
  for (const auto& n : a->obj.required)
    if (forbids(b, n)) return true;
  for (const auto& n : b->obj.required)
    if (forbids(a, n)) return true;
  for (const auto& name : sorted_intersection(a->obj.required, b->obj.required))
    for (Draft* x : declared(a->obj, name))
      for (Draft* y : declared(b->obj, name))
        if (disjoint(x, y, depth + 1)) return true;
  return false;
}

}  // namespace cedar::text
