#include "text/json_grammar.h"

#include <algorithm>
#include <cstring>

#include "text/chat_request.h"

namespace cedar::text {

namespace {

const std::vector<std::string> kBoolNull = {"true", "false", "null"};
const std::vector<std::string> kBool = {"true", "false"};
const std::vector<std::string> kNullOnly = {"null"};

bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Digits per part of a number: a random model's number must end, and an integer must fit in 64
// bits (a client's parser reads 19 digits and more as a float).
constexpr int kMaxDigits = 24;
constexpr int kMaxIntegerDigits = 18;

// The first bytes a value of `n` can start with, for picking a type-union alternative.
bool starts_with(const SchemaNode& n, uint8_t c) {
  using K = SchemaNode::Kind;
  switch (n.kind) {
    case K::kObject:
      return c == '{';
    case K::kArray:
      return c == '[';
    case K::kString:
      return c == '"';
    case K::kNumber:
    case K::kInteger:
      return c == '-' || is_digit(c);
    case K::kBoolean:
      return c == 't' || c == 'f';
    case K::kNull:
      return c == 'n';
    case K::kLiteral:
      for (const auto& l : n.literals)
        if (!l.empty() && uint8_t(l[0]) == c) return true;
      return false;
    default:
      return true;
  }
}

}  // namespace

// ---- schema compilation ---------------------------------------------------------------------

JsonSchema JsonSchema::any_object() {
  JsonSchema s;
  SchemaNode& n = s.nodes_.emplace_back();
  n.kind = SchemaNode::Kind::kObject;
  n.free_keys = true;
  s.root_ = &n;
  return s;
}

JsonSchema JsonSchema::compile_value(const ojson& schema, const std::string& param) {
  JsonSchema s;
  s.root_ = s.node(schema, param, 0);
  return s;
}

JsonSchema JsonSchema::compile(const ojson& schema, const std::string& param) {
  JsonSchema s = compile_value(schema, param);
  const auto k = s.root_->kind;
  if (k != SchemaNode::Kind::kObject && k != SchemaNode::Kind::kArray)
    throw RequestError(param + ": the schema's top level must be an object (or an array)", param);
  return s;
}

const SchemaNode* JsonSchema::node(const ojson& s, const std::string& path, int depth) {
  using K = SchemaNode::Kind;
  auto fail = [&](const std::string& why) -> const SchemaNode* {
    throw RequestError(path + ": " + why +
                           " (constrained decoding supports type, properties, "
                           "required, items, minItems, maxItems, enum and const)",
                       path);
  };
  if (depth > JsonMatcher::kMaxDepth)
    fail("nested deeper than " + std::to_string(JsonMatcher::kMaxDepth) + " levels");
  if (s.is_boolean() && s.get<bool>()) return &nodes_.emplace_back();  // true: anything
  if (!s.is_object()) fail("a schema must be an object");
  static const std::vector<std::string> kIgnored = {"description",
                                                    "title",
                                                    "default",
                                                    "examples",
                                                    "$schema",
                                                    "strict",
                                                    "additionalProperties",
                                                    "$id",
                                                    "$comment",
                                                    "type",
                                                    "properties",
                                                    "required",
                                                    "items",
                                                    "minItems",
                                                    "maxItems",
                                                    "enum",
                                                    "const",
                                                    "nullable"};
  for (const auto& [key, v] : s.items()) {
    bool known = false;
    for (const auto& k : kIgnored) known |= key == k;
    if (!known) fail("\"" + key + "\" is not supported");
  }
  SchemaNode& n = nodes_.emplace_back();
  if (s.contains("enum") || s.contains("const")) {
    n.kind = K::kLiteral;
    const ojson vals = s.contains("const") ? ojson::array({s["const"]}) : s["enum"];
    if (!vals.is_array() || vals.empty() || vals.size() > 64)
      fail("enum must be a non-empty array of at most 64 values");
    for (const auto& v : vals) {
      if (v.is_structured()) fail("enum/const values must be strings, numbers, booleans or null");
      n.literals.push_back(v.dump(-1, ' ', false, ojson::error_handler_t::strict));
    }
    return &n;
  }
  std::vector<std::string> types;
  if (const auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) {
      types.push_back(t->get<std::string>());
    } else if (t->is_array()) {
      for (const auto& e : *t)
        if (e.is_string()) types.push_back(e.get<std::string>());
    } else {
      fail("type must be a string or an array of strings");
    }
  }
  if (s.value("nullable", false)) types.push_back("null");
  if (types.empty()) {
    // untyped: an object when it has properties, else anything
    if (s.contains("properties"))
      types.push_back("object");
    else
      return &n;
  }
  auto one = [&](const std::string& t, SchemaNode& m) {
    if (t == "string") {
      m.kind = K::kString;
    } else if (t == "number") {
      m.kind = K::kNumber;
    } else if (t == "integer") {
      m.kind = K::kInteger;
    } else if (t == "boolean") {
      m.kind = K::kBoolean;
    } else if (t == "null") {
      m.kind = K::kNull;
    } else if (t == "object") {
      m.kind = K::kObject;
      const auto props = s.find("properties");
      if (props == s.end() || !props->is_object() || props->empty()) {
        m.free_keys = true;
        return;
      }
      if (props->size() > 64) fail("more than 64 properties");
      for (const auto& [name, ps] : props->items()) {
        m.names.push_back(ojson(name).dump(-1, ' ', false, ojson::error_handler_t::strict));
        m.props.push_back(node(ps, path + ".properties." + name, depth + 1));
      }
      if (const auto req = s.find("required"); req != s.end()) {
        if (!req->is_array()) fail("required must be an array of property names");
        for (const auto& r : *req) {
          bool found = false;
          for (size_t i = 0; i < m.names.size(); ++i)
            if (r.is_string() && m.names[i] == ojson(r).dump()) {
              m.required |= uint64_t(1) << i;
              found = true;
            }
          if (!found) fail("required names " + r.dump() + ", which is not a property");
        }
      }
    } else if (t == "array") {
      m.kind = K::kArray;
      if (const auto it = s.find("items"); it != s.end())
        m.items = node(*it, path + ".items", depth + 1);
      m.min_items = uint32_t(s.value("minItems", 0));
      m.max_items = uint32_t(s.value("maxItems", int64_t(UINT32_MAX)));
      if (m.min_items > m.max_items) fail("minItems is larger than maxItems");
    } else {
      fail("unknown type \"" + t + "\"");
    }
  };
  if (types.size() == 1) {
    one(types[0], n);
    return &n;
  }
  n.kind = K::kAny;
  for (const auto& t : types) {
    SchemaNode& alt = nodes_.emplace_back();
    one(t, alt);
    n.alternatives.push_back(&alt);
  }
  return &n;
}

// ---- the matcher ----------------------------------------------------------------------------

JsonMatcher::JsonMatcher(const SchemaNode* root) : expect_(root) {}

bool JsonMatcher::feed(uint8_t c) {
  const JsonMatcher saved = *this;
  if (feed_byte(c)) return true;
  *this = saved;
  return false;
}

bool JsonMatcher::step(uint8_t c) { return feed_byte(c); }

bool JsonMatcher::feed(std::string_view s) {
  const JsonMatcher saved = *this;
  for (const char ch : s)
    if (!feed_byte(uint8_t(ch))) {
      *this = saved;
      return false;
    }
  return true;
}

bool JsonMatcher::close_allowed(const Frame& f) const {
  if (f.any) return true;
  if (f.array) return f.count >= f.node->min_items;
  return (f.node->required & ~f.used) == 0;
}

void JsonMatcher::value_done() {
  if (depth_ == 0) {
    mode_ = Mode::kDone;
    return;
  }
  Frame& f = frames_[depth_ - 1];
  if (f.array) ++f.count;
  f.empty = false;
  mode_ = Mode::kAfter;
}

void JsonMatcher::begin_literals(const std::vector<std::string>* set, bool key) {
  mode_ = Mode::kLiteral;
  lit_ = set;
  lit_pos_ = 0;
  lit_key_ = key;
  lit_alive_ = set->size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << set->size()) - 1;
}

bool JsonMatcher::start_value(uint8_t c) {
  using K = SchemaNode::Kind;
  const SchemaNode* n = expect_;
  if (n && !n->alternatives.empty()) {
    const SchemaNode* pick = nullptr;
    for (const SchemaNode* a : n->alternatives)
      if (starts_with(*a, c)) {
        // number and integer both start with a digit: the wider one wins
        if (!pick || (pick->kind == K::kInteger && a->kind == K::kNumber)) pick = a;
      }
    if (!pick) return false;
    n = pick;
  }
  const K kind = n ? n->kind : K::kAny;
  auto push = [&](bool array, bool any) {
    if (depth_ >= kMaxDepth) return false;
    frames_[depth_++] = Frame{n, array, any, true, -1, 0, 0};
    mode_ = array ? Mode::kValue : Mode::kObjKey;
    expect_ = array ? (any ? nullptr : n->items) : nullptr;
    return true;
  };
  switch (kind) {
    case K::kAny:
      if (c == '{') return push(false, true);
      if (c == '[') return push(true, true);
      if (c == '"') {
        mode_ = Mode::kString;
        key_string_ = false;
        return true;
      }
      if (c == '-' || is_digit(c)) {
        mode_ = Mode::kNumber;
        integer_ = false;
        num_ = 0;
        return number_byte(c);
      }
      begin_literals(&kBoolNull, false);
      return literal_byte(c);
    case K::kObject:
      return c == '{' && push(false, n->free_keys);
    case K::kArray:
      return c == '[' && push(true, false);
    case K::kString:
      if (c != '"') return false;
      mode_ = Mode::kString;
      key_string_ = false;
      return true;
    case K::kNumber:
    case K::kInteger:
      if (c != '-' && !is_digit(c)) return false;
      mode_ = Mode::kNumber;
      integer_ = kind == K::kInteger;
      num_ = 0;
      return number_byte(c);
    case K::kBoolean:
      begin_literals(&kBool, false);
      return literal_byte(c);
    case K::kNull:
      begin_literals(&kNullOnly, false);
      return literal_byte(c);
    case K::kLiteral:
      begin_literals(&n->literals, false);
      return literal_byte(c);
    default:
      return false;
  }
}

bool JsonMatcher::string_byte(uint8_t c) {
  if (utf8_ > 0) {
    // the first continuation byte of E0/ED/F0/F4 sequences has a narrower range (no overlong
    // forms, no surrogates, nothing above U+10FFFF)
    uint8_t lo = 0x80, hi = 0xBF;
    if (utf8_lead_ == 0xE0) lo = 0xA0;
    if (utf8_lead_ == 0xED) hi = 0x9F;
    if (utf8_lead_ == 0xF0) lo = 0x90;
    if (utf8_lead_ == 0xF4) hi = 0x8F;
    if (c < lo || c > hi) return false;
    utf8_lead_ = 0;
    --utf8_;
    return true;
  }
  if (esc_ == 1) {
    if (c == 'u') {
      esc_ = 2;
      return true;
    }
    if (!std::strchr("\"\\/bfnrt", c) || c == 0) return false;
    esc_ = 0;
    return true;
  }
  if (esc_ >= 2) {
    if (!is_hex(c)) return false;
    esc_ = esc_ == 5 ? 0 : uint8_t(esc_ + 1);
    return true;
  }
  if (c == '\\') {
    esc_ = 1;
    return true;
  }
  if (c == '"') {
    if (key_string_) {
      mode_ = Mode::kColon;
      frames_[depth_ - 1].prop = -1;
    } else {
      value_done();
    }
    return true;
  }
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x80) return true;
  if (c >= 0xC2 && c <= 0xDF)
    utf8_ = 1;
  else if (c >= 0xE0 && c <= 0xEF)
    utf8_ = 2;
  else if (c >= 0xF0 && c <= 0xF4)
    utf8_ = 3;
  else
    return false;
  utf8_lead_ = c;
  return true;
}

// Number states: 0 start, 1 after '-', 2 after a leading 0, 3 integer digits, 4 after '.',
// 5 fraction digits, 6 after e/E, 7 after the exponent's sign, 8 exponent digits. A number can
// end in 2, 3, 5 and 8; then the byte that ended it is read as what follows the value.
bool JsonMatcher::number_byte(uint8_t c) {
  auto digit = [&](uint8_t next) {
    // ws_ counts digits while in a number
    if (++ws_ > (integer_ ? kMaxIntegerDigits : kMaxDigits)) return false;
    num_ = next;
    return true;
  };
  switch (num_) {
    case 0:
      ws_ = 0;
      if (c == '-') {
        num_ = 1;
        return true;
      }
      [[fallthrough]];
    case 1:
      if (c == '0') return digit(2);
      if (is_digit(c)) return digit(3);
      return false;
    case 3:
      if (is_digit(c)) return digit(3);
      [[fallthrough]];
    case 2:
      if (!integer_ && c == '.') {
        num_ = 4;
        ws_ = 0;
        return true;
      }
      if (!integer_ && (c == 'e' || c == 'E')) {
        num_ = 6;
        ws_ = 0;
        return true;
      }
      break;
    case 4:
    case 5:
      if (is_digit(c)) return digit(5);
      if (num_ == 5 && (c == 'e' || c == 'E')) {
        num_ = 6;
        ws_ = 0;
        return true;
      }
      if (num_ == 4) return false;
      break;
    case 6:
      if (c == '+' || c == '-') {
        num_ = 7;
        return true;
      }
      [[fallthrough]];
    case 7:
      return is_digit(c) && digit(8);
    case 8:
      if (is_digit(c)) return digit(8);
      break;
    default:
      return false;
  }
  // c ends the number (states 2, 3, 5, 8)
  ws_ = 0;
  value_done();
  if (mode_ == Mode::kDone) return false;  // nothing follows a top-level value
  return feed_byte(c);
}

bool JsonMatcher::literal_byte(uint8_t c) {
  const auto& set = *lit_;
  uint64_t next = 0, complete = 0;
  for (size_t i = 0; i < set.size() && i < 64; ++i) {
    if (!(lit_alive_ >> i & 1)) continue;
    if (set[i].size() > lit_pos_ && uint8_t(set[i][lit_pos_]) == c) next |= uint64_t(1) << i;
    if (set[i].size() == lit_pos_) complete |= uint64_t(1) << i;
  }
  if (next == 0) {
    // c follows a finished literal (a number enum: "1" of {"1", "10"})
    if (complete == 0 || lit_key_) return false;
    value_done();
    if (mode_ == Mode::kDone) return false;
    return feed_byte(c);
  }
  lit_alive_ = next;
  ++lit_pos_;
  // finished when every candidate still alive ends here
  for (size_t i = 0; i < set.size() && i < 64; ++i)
    if ((next >> i & 1) && set[i].size() != lit_pos_) return true;
  if (lit_key_) {
    int idx = 0;
    while (!(next >> idx & 1)) ++idx;
    Frame& f = frames_[depth_ - 1];
    f.prop = int16_t(idx);
    f.used |= uint64_t(1) << idx;
    mode_ = Mode::kColon;
  } else {
    value_done();
  }
  return true;
}

bool JsonMatcher::feed_byte(uint8_t c) {
  switch (mode_) {
    case Mode::kString:
      return string_byte(c);
    case Mode::kNumber:
      return number_byte(c);
    case Mode::kLiteral:
      return literal_byte(c);
    case Mode::kDone:
      return false;
    default:
      break;
  }
  if (is_ws(c)) return ++ws_ <= kMaxWhitespace;
  ws_ = 0;
  switch (mode_) {
    case Mode::kValue: {
      if (depth_ > 0) {
        Frame& f = frames_[depth_ - 1];
        if (f.array && f.empty && c == ']') {
          if (!close_allowed(f)) return false;
          --depth_;
          value_done();
          return true;
        }
      }
      return start_value(c);
    }
    case Mode::kObjKey: {
      Frame& f = frames_[depth_ - 1];
      if (c == '}') {
        if (!f.empty || !close_allowed(f)) return false;
        --depth_;
        value_done();
        return true;
      }
      if (c != '"') return false;
      if (f.any) {
        mode_ = Mode::kString;
        key_string_ = true;
        return true;
      }
      begin_literals(&f.node->names, true);
      lit_alive_ &= ~f.used;
      return literal_byte(c);
    }
    case Mode::kColon: {
      if (c != ':') return false;
      const Frame& f = frames_[depth_ - 1];
      expect_ = f.any ? nullptr : f.node->props[size_t(f.prop)];
      mode_ = Mode::kValue;
      return true;
    }
    case Mode::kAfter: {
      Frame& f = frames_[depth_ - 1];
      if (c == ',') {
        if (f.array) {
          if (!f.any && f.count >= f.node->max_items) return false;
          expect_ = f.any ? nullptr : f.node->items;
          mode_ = Mode::kValue;
          return true;
        }
        if (!f.any) {
          const uint64_t all =
              f.node->names.size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << f.node->names.size()) - 1;
          if ((all & ~f.used) == 0) return false;  // no property left to add
        }
        mode_ = Mode::kObjKey;
        return true;
      }
      if (c != (f.array ? ']' : '}') || !close_allowed(f)) return false;
      --depth_;
      value_done();
      return true;
    }
    default:
      return false;
  }
}

bool JsonMatcher::can_end() const {
  // number_byte's states 2, 3, 5 and 8 end a complete number
  return done() || (mode_ == Mode::kNumber && depth_ == 0 &&
                    (num_ == 2 || num_ == 3 || num_ == 5 || num_ == 8));
}

std::string JsonMatcher::key() const {
  std::string k;
  auto put = [&k](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  const uint8_t head[] = {
      uint8_t(mode_), uint8_t(depth_), ws_,  uint8_t(key_string_), esc_,
      utf8_,          utf8_lead_,      num_, uint8_t(integer_),    uint8_t(lit_key_)};
  put(head, sizeof head);
  put(&expect_, sizeof expect_);
  put(&lit_, sizeof lit_);
  put(&lit_alive_, sizeof lit_alive_);
  put(&lit_pos_, sizeof lit_pos_);
  for (int d = 0; d < depth_; ++d) {
    const Frame& f = frames_[d];
    put(&f.node, sizeof f.node);
    const uint8_t b[] = {uint8_t(f.array), uint8_t(f.any), uint8_t(f.empty)};
    put(b, sizeof b);
    put(&f.prop, sizeof f.prop);
    put(&f.used, sizeof f.used);
    // an array's count matters only against its bounds
    uint32_t c = 0;
    if (f.array && !f.any) {
      const uint32_t mn = f.node->min_items, mx = f.node->max_items;
      c = f.count >= mx ? mx : f.count < mn ? f.count : mn;
    }
    put(&c, sizeof c);
  }
  return k;
}

}  // namespace cedar::text
