// Reading a JSON Schema document into Drafts (text/json_schema_compiler.h): keywords, $ref,
// allOf / anyOf / oneOf, enum / const. The public entry points are at the end.
#include "text/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include "text/chat_request.h"
#include "text/json_formats.h"
#include "text/json_schema_compiler.h"

namespace cedar::text {

namespace {

// Assertions constrained decoding cannot enforce: a request using one is refused by name.
// ("if" only with "then" / "else", the dependency keywords only when not empty, the unevaluated
// ones only when not true: otherwise they assert nothing.)
constexpr std::array<std::string_view, 12> kRefused = {"not",
                                                       "if",
                                                       "dependencies",
                                                       "dependentRequired",
                                                       "dependentSchemas",
                                                       "contains",
                                                       "minContains",
                                                       "maxContains",
                                                       "$dynamicRef",
                                                       "$recursiveRef",
                                                       "unevaluatedProperties",
                                                       "unevaluatedItems"};

bool asserts(std::string_view key, const ojson& s) {
  const ojson& v = s.at(std::string(key));
  if (key == "if") return s.contains("then") || s.contains("else");
  if (key == "dependencies" || key == "dependentRequired" || key == "dependentSchemas")
    return !(v.is_object() && v.empty());
  if (key == "unevaluatedProperties" || key == "unevaluatedItems")
    return !(v.is_boolean() && v.get<bool>());
  if (key == "minContains" || key == "maxContains") return s.contains("contains");
  return true;
}

std::string percent_decode(std::string_view s) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += char(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A count keyword (minLength, maxItems, ...): a non-negative integer. Lower bounds past kMaxCount
// are refused (no answer can hold them); upper bounds past 2^32 bound nothing an answer reaches.
uint64_t read_count(const ojson& s, const char* key, const std::string& path, bool lower) {
  const ojson& v = s.at(key);
  if (!v.is_number()) SchemaCompiler::fail(path, std::string(key) + " must be a number");
  const double d = v.get<double>();
  if (!(d >= 0) || d != std::floor(d))
    SchemaCompiler::fail(path, std::string(key) + " must be a non-negative integer");
  if (lower && d > double(SchemaLimits::kMaxCount))
    SchemaCompiler::fail(path, std::string(key) + " " + v.dump() +
                                   " is beyond what any answer can hold (at most " +
                                   std::to_string(SchemaLimits::kMaxCount) + ")");
  if (d >= 4294967296.0) return UINT64_MAX;
  return uint64_t(d);
}

double read_number_value(const ojson& v, const char* key, const std::string& path) {
  if (!v.is_number()) SchemaCompiler::fail(path, std::string(key) + " must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) SchemaCompiler::fail(path, std::string(key) + " must be finite");
  return d;
}

void sort_unique(std::vector<std::string>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

void SchemaCompiler::fail(const std::string& path, const std::string& why) {
  throw RequestError(path + ": " + why, path);
}

SchemaCompiler::SchemaCompiler(JsonSchema* out, const ojson& doc, std::string param)
    : out_(out), doc_(doc), param_(std::move(param)) {
  any_ = make(param_);
  any_->state = Draft::State::kDone;
  false_ = make(param_);
  false_->state = Draft::State::kDone;
  false_->types = 0;
  any_->arr.rest = any_;
  false_->arr.rest = any_;
  scan_document(doc_);
}

Draft* SchemaCompiler::make(const std::string& path) {
  if (drafts_.size() >= SchemaLimits::kMaxNodes)
    fail(path,
         "the schema expands to more than " + std::to_string(SchemaLimits::kMaxNodes) + " nodes");
  Draft& d = drafts_.emplace_back();
  d.path = path;
  d.out = &out_->nodes_.emplace_back();
  d.arr.rest = any_;
  return &d;
}

// Whether '#' pointers mean this document: not when a nested $id / id moves the base URI (the
// references below it would then be relative to another resource). Checked once, by a walk
// that skips the keywords holding plain JSON values.
void SchemaCompiler::scan_document(const ojson& doc) {
  bool refs = false, ids = false;
  std::vector<std::pair<const ojson*, int>> stack{{&doc, 0}};
  while (!stack.empty()) {
    auto [v, depth] = stack.back();
    stack.pop_back();
    if (v->is_array()) {
      for (const auto& x : *v) stack.emplace_back(&x, depth + 1);
      continue;
    }
    if (!v->is_object()) continue;
    for (const auto& [k, x] : v->items()) {
      if (k == "enum" || k == "const" || k == "default" || k == "examples" || k == "example")
        continue;
      if (k == "$ref" && x.is_string()) refs = true;
      if ((k == "$id" || k == "id") && x.is_string() && depth > 0 &&
          !x.get_ref<const std::string&>().starts_with("#"))
        ids = true;
      stack.emplace_back(&x, depth + 1);
    }
  }
  refs_ |= refs;
  ids_ |= ids;
  ids_move_base_ = refs_ && ids_;
}

void SchemaCompiler::add_literal_bytes(size_t n, const std::string& path) {
  literal_bytes_ += n;
  if (literal_bytes_ > SchemaLimits::kMaxLiteralBytes)
    fail(path, "enum / const values and property names hold more than " +
                   std::to_string(SchemaLimits::kMaxLiteralBytes) + " bytes");
}

Draft* SchemaCompiler::from_json(const ojson& s, const std::string& path) {
  if (s.is_boolean()) return s.get<bool>() ? any_ : false_;
  if (auto it = by_json_.find(&s); it != by_json_.end()) return it->second;
  Draft* d = make(path);
  d->json = &s;
  by_json_.emplace(&s, d);
  return d;
}

void SchemaCompiler::resolve(Draft* d) {
  if (d->state == Draft::State::kDone) return;
  if (d->state == Draft::State::kActive)
    fail(d->path, "a $ref / allOf / anyOf cycle: the schema is a part of its own conjunction");
  if (++inline_depth_ > SchemaLimits::kMaxInlineDepth)
    fail(d->path, "allOf / anyOf / oneOf / $ref nested more than " +
                      std::to_string(SchemaLimits::kMaxInlineDepth) + " levels in place");
  d->state = Draft::State::kActive;
  if (d->json)
    resolve_json(d);
  else
    resolve_conj(d);
  d->state = Draft::State::kDone;
  --inline_depth_;
}

void SchemaCompiler::resolve_json(Draft* d) {
  const ojson& s = *d->json;
  const std::string& path = d->path;
  if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
  for (const auto& [key, v] : s.items())
    for (const std::string_view r : kRefused)
      if (key == r && asserts(r, s))
        fail(path, "\"" + key + "\" is not supported (constrained decoding cannot enforce it)");
  // the conjuncts besides the object's own keywords
  std::vector<Draft*> parts;
  if (const auto it = s.find("$ref"); it != s.end()) parts.push_back(ref_target(*it, path));
  if (const auto it = s.find("allOf"); it != s.end()) {
    if (!it->is_array() || it->empty()) fail(path, "allOf must be a non-empty array");
    for (size_t i = 0; i < it->size(); ++i)
      parts.push_back(from_json((*it)[i], path + ".allOf[" + std::to_string(i) + "]"));
  }
  if (const auto it = s.find("anyOf"); it != s.end())
    parts.push_back(any_of(*it, path + ".anyOf", false));
  if (const auto it = s.find("oneOf"); it != s.end())
    parts.push_back(any_of(*it, path + ".oneOf", true));
  if (const auto it = s.find("const"); it != s.end())
    parts.push_back(const_of(*it, path + ".const"));
  if (const auto it = s.find("enum"); it != s.end()) parts.push_back(enum_of(*it, path + ".enum"));
  if (parts.empty()) {
    read_keywords(s, path, d);
    return;
  }
  Draft* acc = make(path);  // the object's own keywords
  read_keywords(s, path, acc);
  acc->state = Draft::State::kDone;
  for (Draft* p : parts) {
    resolve(p);
    acc = conj(acc, p);
    resolve(acc);
  }
  if (acc->alts.empty())
    d->alts = {acc};
  else
    d->alts = acc->alts;
}

void SchemaCompiler::read_keywords(const ojson& s, const std::string& path, Draft* d) {
  read_type(s, path, d);
  read_string(s, path, d);
  read_number(s, path, d);
  read_object(s, path, d);
  read_array(s, path, d);
}

void SchemaCompiler::read_type(const ojson& s, const std::string& path, Draft* d) {
  const auto t = s.find("type");
  if (t == s.end()) return;
  std::vector<std::string> names;
  if (t->is_string()) {
    names.push_back(t->get<std::string>());
  } else if (t->is_array()) {
    for (const auto& e : *t) {
      if (!e.is_string()) fail(path, "type must be a string or an array of strings");
      names.push_back(e.get<std::string>());
    }
  } else {
    fail(path, "type must be a string or an array of strings");
  }
  uint8_t types = 0;
  bool integer = false, number = false;
  for (const auto& n : names) {
    if (n == "null") {
      types |= SchemaNode::kNull;
    } else if (n == "boolean") {
      types |= SchemaNode::kBool;
    } else if (n == "object") {
      types |= SchemaNode::kObject;
    } else if (n == "array") {
      types |= SchemaNode::kArray;
    } else if (n == "string") {
      types |= SchemaNode::kString;
    } else if (n == "number") {
      number = true;
    } else if (n == "integer") {
      integer = true;
    } else {
      fail(path, "unknown type \"" + n + "\"");
    }
  }
  if (number || integer) types |= SchemaNode::kNumber;
  d->num.integer = integer && !number;
  if (const auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>())
    types |= SchemaNode::kNull;  // OpenAPI 3.0
  d->types = types;
}

void SchemaCompiler::read_string(const ojson& s, const std::string& path, Draft* d) {
  if (s.contains("minLength")) d->str.min_len = read_count(s, "minLength", path, true);
  if (s.contains("maxLength")) d->str.max_len = read_count(s, "maxLength", path, false);
  if (const auto p = s.find("pattern"); p != s.end()) {
    if (!p->is_string()) fail(path, "pattern must be a string");
    add_literal_bytes(p->get_ref<const std::string&>().size(), path);
    pattern_dfa({p->get<std::string>()}, path + ".pattern");  // refused here, by its path
    d->str.patterns.push_back(p->get<std::string>());
  }
  if (const auto f = s.find("format"); f != s.end() && f->is_string()) {
    if (const JsonFormat* fmt = find_format(f->get_ref<const std::string&>())) {
      d->str.patterns.push_back(fmt->pattern);
      d->str.max_len = std::min<uint64_t>(d->str.max_len, fmt->max_length);
    }
  }
  sort_unique(&d->str.patterns);
}

void SchemaCompiler::read_number(const ojson& s, const std::string& path, Draft* d) {
  NumRecipe& n = d->num;
  auto lower = [&](double v, bool excl) {
    if (!n.has_lo || v > n.lo || (v == n.lo && excl)) {
      n.lo = v;
      n.lo_excl = excl;
    }
    n.has_lo = true;
  };
  auto upper = [&](double v, bool excl) {
    if (!n.has_hi || v < n.hi || (v == n.hi && excl)) {
      n.hi = v;
      n.hi_excl = excl;
    }
    n.has_hi = true;
  };
  auto flag = [&](const char* key) {  // draft 4: a boolean beside minimum / maximum
    const auto it = s.find(key);
    return it != s.end() && it->is_boolean() && it->get<bool>();
  };
  if (const auto it = s.find("minimum"); it != s.end())
    lower(read_number_value(*it, "minimum", path), flag("exclusiveMinimum"));
  if (const auto it = s.find("maximum"); it != s.end())
    upper(read_number_value(*it, "maximum", path), flag("exclusiveMaximum"));
  if (const auto it = s.find("exclusiveMinimum"); it != s.end() && !it->is_boolean())
    lower(read_number_value(*it, "exclusiveMinimum", path), true);
  if (const auto it = s.find("exclusiveMaximum"); it != s.end() && !it->is_boolean())
    upper(read_number_value(*it, "exclusiveMaximum", path), true);
  if (const auto it = s.find("multipleOf"); it != s.end()) {
    const double m = read_number_value(*it, "multipleOf", path);
    if (!(m > 0)) fail(path, "multipleOf must be above 0");
    if (m != std::floor(m) || m > 9007199254740992.0)
      fail(path, "multipleOf " + it->dump() +
                     " is not enforced: only integer divisors (up to 2^53) are supported");
    n.multiple = uint64_t(m);
    n.integer = true;  // a multiple of an integer is an integer
  }
}

void SchemaCompiler::read_object(const ojson& s, const std::string& path, Draft* d) {
  ObjRecipe& o = d->obj;
  const auto props = s.find("properties");
  const auto pats = s.find("patternProperties");
  const auto addl = s.find("additionalProperties");
  if (props != s.end() || pats != s.end() || addl != s.end()) {
    Facet f;
    if (props != s.end()) {
      if (!props->is_object()) fail(path, "properties must be an object");
      for (const auto& [name, ps] : props->items()) {
        add_literal_bytes(name.size(), path);
        f.props.emplace_back(name, from_json(ps, path + ".properties." + name));
      }
    }
    if (pats != s.end()) {
      if (!pats->is_object()) fail(path, "patternProperties must be an object");
      for (const auto& [re, ps] : pats->items()) {
        add_literal_bytes(re.size(), path);
        pattern_dfa({re}, path + ".patternProperties");
        f.patterns.emplace_back(re, from_json(ps, path + ".patternProperties." + re));
      }
    }
    f.additional = any_;
    if (addl != s.end()) {
      f.additional = from_json(*addl, path + ".additionalProperties");
      f.additional_given = f.additional != false_;
    }
    o.facets.push_back(std::move(f));
  }
  if (const auto req = s.find("required"); req != s.end()) {
    if (!req->is_array()) fail(path, "required must be an array of property names");
    for (const auto& r : *req) {
      if (!r.is_string()) fail(path, "required must be an array of property names");
      add_literal_bytes(r.get_ref<const std::string&>().size(), path);
      o.required.push_back(r.get<std::string>());
    }
    sort_unique(&o.required);
  }
  if (s.contains("minProperties")) o.min_props = read_count(s, "minProperties", path, true);
  if (s.contains("maxProperties")) o.max_props = read_count(s, "maxProperties", path, false);
  if (const auto pn = s.find("propertyNames"); pn != s.end())
    read_property_names(*pn, path + ".propertyNames", d);
}

// propertyNames: the string keywords only (a key is a string); they constrain every key.
void SchemaCompiler::read_property_names(const ojson& s, const std::string& path, Draft* d) {
  ObjRecipe& o = d->obj;
  if (s.is_boolean()) {
    if (!s.get<bool>()) o.max_props = 0;  // no name is valid: only {}
    return;
  }
  if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
  // other assertions apply to other types than strings: they do not touch a key
  for (const auto& [key, v] : s.items())
    if (key == "$ref" || key == "allOf" || key == "anyOf" || key == "oneOf" || key == "not" ||
        key == "if")
      fail(path,
           "propertyNames supports type, pattern, format, minLength, maxLength, enum and "
           "const (\"" +
               key + "\" is not)");
  Draft tmp;
  read_type(s, path, &tmp);
  if (s.contains("type") && !(tmp.types & SchemaNode::kString)) o.max_props = 0;
  read_string(s, path, &tmp);
  o.name_patterns.insert(o.name_patterns.end(), tmp.str.patterns.begin(), tmp.str.patterns.end());
  o.name_min = std::max(o.name_min, tmp.str.min_len);
  o.name_max = std::min(o.name_max, tmp.str.max_len);
  ojson names = ojson::array();
  if (const auto e = s.find("enum"); e != s.end() && e->is_array()) names = *e;
  if (const auto c = s.find("const"); c != s.end()) names = ojson::array({*c});
  if (s.contains("enum") || s.contains("const")) {  // keys from a set: one alternation
    std::string alt;
    for (const auto& n : names)
      if (n.is_string()) {
        add_literal_bytes(n.get_ref<const std::string&>().size(), path);
        alt += (alt.empty() ? "" : "|") + regex_quote(n.get_ref<const std::string&>());
      }
    if (alt.empty())
      o.max_props = 0;
    else
      o.name_patterns.push_back("^(?:" + alt + ")$");
  }
  sort_unique(&o.name_patterns);
}

void SchemaCompiler::read_array(const ojson& s, const std::string& path, Draft* d) {
  ArrRecipe& a = d->arr;
  const auto items = s.find("items");
  const auto prefix = s.find("prefixItems");
  if (prefix != s.end()) {
    if (!prefix->is_array()) fail(path, "prefixItems must be an array");
    if (items != s.end() && items->is_array())
      fail(path, "items is an array (draft 4) and prefixItems is given too");
    for (size_t i = 0; i < prefix->size(); ++i)
      a.prefix.push_back(from_json((*prefix)[i], path + ".prefixItems[" + std::to_string(i) + "]"));
    if (items != s.end()) a.rest = from_json(*items, path + ".items");
  } else if (items != s.end() && items->is_array()) {  // draft 4 tuple + additionalItems
    for (size_t i = 0; i < items->size(); ++i)
      a.prefix.push_back(from_json((*items)[i], path + ".items[" + std::to_string(i) + "]"));
    if (const auto ai = s.find("additionalItems"); ai != s.end())
      a.rest = from_json(*ai, path + ".additionalItems");
  } else if (items != s.end()) {
    a.rest = from_json(*items, path + ".items");
  }
  if (s.contains("minItems")) a.min_items = read_count(s, "minItems", path, true);
  if (s.contains("maxItems")) a.max_items = read_count(s, "maxItems", path, false);
  if (const auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>()) {
    a.unique = true;
    d->unique_path = path;
  }
}

Draft* SchemaCompiler::ref_target(const ojson& ref, const std::string& path) {
  if (!ref.is_string()) fail(path, "$ref must be a string");
  const std::string& r = ref.get_ref<const std::string&>();
  if (r.empty() || r[0] != '#')
    fail(path, "$ref \"" + r + "\" is not followed: only references into this schema (\"#...\")");
  if (ids_move_base_)
    fail(path,
         "$ref with a nested $id / id: references relative to another base URI are not "
         "followed");
  const std::string frag = percent_decode(std::string_view(r).substr(1));
  if (!frag.empty() && frag[0] != '/')
    fail(path, "$ref \"" + r + "\": anchors (#name) are not supported, only JSON pointers");
  const ojson* at = &doc_;
  std::string where = param_;
  for (size_t i = 1; i <= frag.size() && !frag.empty();) {
    size_t j = frag.find('/', i);
    if (j == std::string::npos) j = frag.size();
    std::string seg;
    for (size_t k = i; k < j; ++k) {  // ~1 is '/', ~0 is '~'
      if (frag[k] == '~' && k + 1 < j && (frag[k + 1] == '0' || frag[k + 1] == '1')) {
        seg += frag[k + 1] == '0' ? '~' : '/';
        ++k;
      } else {
        seg += frag[k];
      }
    }
    if (at->is_object() && at->contains(seg)) {
      at = &(*at)[seg];
    } else if (at->is_array() && !seg.empty() && seg.size() < 10 &&
               std::all_of(seg.begin(), seg.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               std::stoul(seg) < at->size()) {
      at = &(*at)[std::stoul(seg)];
    } else {
      fail(path, "$ref \"" + r + "\" does not resolve in this schema");
    }
    where += "." + seg;
    i = j + 1;
  }
  return from_json(*at, where);
}

Draft* SchemaCompiler::any_of(const ojson& list, const std::string& path, bool one_of) {
  const char* kw = one_of ? "oneOf" : "anyOf";
  if (!list.is_array() || list.empty())
    fail(path, std::string(kw) + " must be a non-empty array of schemas");
  std::vector<Draft*> branches;
  for (size_t i = 0; i < list.size(); ++i) {
    Draft* b = from_json(list[i], path + "[" + std::to_string(i) + "]");
    resolve(b);
    branches.push_back(b);
  }
  if (one_of)  // exactly one branch: only where no value can match two
    for (size_t i = 0; i < branches.size(); ++i)
      for (size_t j = i + 1; j < branches.size(); ++j)
        if (!disjoint(branches[i], branches[j], 0))
          fail(path, "oneOf branches " + std::to_string(i) + " and " + std::to_string(j) +
                         " may both match a value (constrained decoding enforces oneOf only "
                         "where the branches differ in type or in a required const / enum "
                         "property; anyOf may be what is meant)");
  if (branches.size() == 1) return branches[0];
  Draft* d = make(path);
  d->state = Draft::State::kDone;
  for (Draft* b : branches) {
    const std::vector<Draft*> one{b};
    for (Draft* a : b->alts.empty() ? one : b->alts)
      if (std::find(d->alts.begin(), d->alts.end(), a) == d->alts.end()) d->alts.push_back(a);
  }
  if (d->alts.size() > SchemaLimits::kMaxAlternatives)
    fail(path, std::string(kw) + " expands to more than " +
                   std::to_string(SchemaLimits::kMaxAlternatives) + " alternatives");
  return d;
}

// enum: the scalars in one draft (literal sets per type), each object / array its own branch.
Draft* SchemaCompiler::enum_of(const ojson& values, const std::string& path) {
  if (!values.is_array() || values.empty()) fail(path, "enum must be a non-empty array");
  Draft* scalars = make(path);
  scalars->state = Draft::State::kDone;
  scalars->types = 0;
  scalars->bools = 0;
  scalars->str.has_lits = scalars->num.has_lits = true;
  std::vector<Draft*> alts;
  for (const auto& v : values) {
    if (v.is_structured()) {
      alts.push_back(const_of(v, path));
      continue;
    }
    if (v.is_null()) {
      scalars->types |= SchemaNode::kNull;
    } else if (v.is_boolean()) {
      scalars->types |= SchemaNode::kBool;
      scalars->bools |= v.get<bool>() ? 2 : 1;
    } else if (v.is_string()) {
      scalars->types |= SchemaNode::kString;
      add_literal_bytes(v.get_ref<const std::string&>().size(), path);
      scalars->str.lits.push_back(v.get<std::string>());
    } else {
      scalars->types |= SchemaNode::kNumber;
      scalars->num.lits.push_back(v.dump(-1, ' ', false, ojson::error_handler_t::replace));
      add_literal_bytes(scalars->num.lits.back().size(), path);
    }
  }
  sort_unique(&scalars->str.lits);
  sort_unique(&scalars->num.lits);
  if (scalars->types != 0) alts.insert(alts.begin(), scalars);
  if (alts.size() == 1) return alts[0];
  if (alts.size() > SchemaLimits::kMaxAlternatives)
    fail(path, "enum holds more than " + std::to_string(SchemaLimits::kMaxAlternatives) +
                   " objects and arrays");
  Draft* d = make(path);
  d->state = Draft::State::kDone;
  d->alts = std::move(alts);
  return d;
}

// const: scalars as literal sets; an object as exactly its keys, an array as exactly its items.
Draft* SchemaCompiler::const_of(const ojson& v, const std::string& path) {
  if (!v.is_structured()) return enum_of(ojson::array({v}), path);
  Draft* d = make(path);
  d->state = Draft::State::kDone;
  if (v.is_object()) {
    d->types = SchemaNode::kObject;
    Facet f;
    for (const auto& [k, x] : v.items()) {
      add_literal_bytes(k.size(), path);
      f.props.emplace_back(k, const_of(x, path));
      d->obj.required.push_back(k);
    }
    f.additional = false_;
    d->obj.facets.push_back(std::move(f));
    sort_unique(&d->obj.required);
  } else {
    d->types = SchemaNode::kArray;
    for (const auto& x : v) d->arr.prefix.push_back(const_of(x, path));
    d->arr.rest = false_;
    d->arr.min_items = d->arr.max_items = v.size();
  }
  return d;
}

// ---- the public entry points -----------------------------------------------------------------

bool admits_any_string(const SchemaNode* node) {
  if (!node->alts.empty())
    return std::any_of(node->alts.begin(), node->alts.end(), admits_any_string);
  const StringRule& r = node->str;
  return (node->types & SchemaNode::kString) && r.sat && !r.dfa && r.min_len == 0 &&
         r.max_len == UINT32_MAX;
}

JsonSchema JsonSchema::compile_value(const ojson& schema, const std::string& param) {
  JsonSchema s;
  s.root_ = SchemaCompiler(&s, schema, param).run(schema, param, false);
  return s;
}

JsonSchema JsonSchema::compile_value(const ojson& schema, const std::string& param,
                                     const ojson& document, const std::string& document_param) {
  JsonSchema s;
  s.root_ = SchemaCompiler(&s, document, document_param).run(schema, param, false);
  return s;
}

JsonSchema JsonSchema::compile(const ojson& schema, const std::string& param) {
  JsonSchema s;
  s.root_ = SchemaCompiler(&s, schema, param).run(schema, param, true);
  return s;
}

JsonSchema JsonSchema::any_object() {
  static const ojson kObject = ojson::parse(R"({"type": "object"})");
  return compile(kObject, "response_format");
}

}  // namespace cedar::text
