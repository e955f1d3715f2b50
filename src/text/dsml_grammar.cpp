#include "text/dsml_grammar.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "text/chat_request.h"

namespace cedar::text {

namespace {

std::string cat(std::string_view a, std::string_view b) { return std::string(a) + std::string(b); }

// The literal sets between the variable parts of the block (see render_tool_calls).
const std::vector<std::string>& opener() {  // the whole block opening, up to the first name
  static const std::vector<std::string> v{cat(cat(kDsmlCallsOpen, "\n"), kDsmlInvokeOpen)};
  return v;
}
const std::vector<std::string>& opener_rest() {  // after a free-text start matched the calls tag
  static const std::vector<std::string> v{cat("\n", kDsmlInvokeOpen)};
  return v;
}
const std::vector<std::string>& first_invoke() {  // inside a block the prompt opened
  static const std::vector<std::string> v{std::string(kDsmlInvokeOpen)};
  return v;
}
// After `NAME">\n` and after a parameter: [0] a parameter opening, [1] the invoke's end.
const std::vector<std::string>& invoke_body_lits() {
  static const std::vector<std::string> v{std::string(kDsmlParamOpen), cat("\n", kDsmlInvokeClose)};
  return v;
}
const std::vector<std::string>& after_param_lits() {
  static const std::vector<std::string> v{cat("\n", kDsmlParamOpen), cat("\n", kDsmlInvokeClose)};
  return v;
}
const std::vector<std::string>& param_close() {
  static const std::vector<std::string> v{std::string(kDsmlParamClose)};
  return v;
}
const std::vector<std::string>& after_invoke() {
  static const std::vector<std::string> v{cat("\n", kDsmlInvokeOpen), cat("\n", kDsmlCallsClose)};
  return v;
}

// The DSML tag marker, and the bytes of the calls opener up to and including it ("<｜DSML｜").
constexpr std::string_view kMarker = kDsmlMarker;
static_assert(kDsmlCallsOpen.substr(1, kMarker.size()) == kMarker);
constexpr size_t kOpenerMarkerEnd = 1 + kMarker.size();

// The marker matched so far (k bytes) and one more byte: how many bytes of it now end the text
// (Knuth-Morris-Pratt over the marker's borders).
uint16_t marker_step(uint16_t k, uint8_t c) {
  static const std::array<uint16_t, kMarker.size() + 1> fail = [] {
    std::array<uint16_t, kMarker.size() + 1> f{};
    for (size_t i = 1, b = 0; i < kMarker.size(); ++i) {
      while (b > 0 && kMarker[i] != kMarker[b]) b = f[b];
      if (kMarker[i] == kMarker[b]) ++b;
      f[i + 1] = uint16_t(b);
    }
    return f;
  }();
  for (;;) {
    if (k < kMarker.size() && uint8_t(kMarker[k]) == c) return uint16_t(k + 1);
    if (k == 0) return 0;
    k = fail[k];
  }
}

bool valid_tool_name(const std::string& s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

bool valid_param_name(const std::string& s) {
  return !s.empty() && std::none_of(s.begin(), s.end(), [](char c) {
    return c == '"' || c == '<' || static_cast<unsigned char>(c) < 0x20;
  });
}

// Whether a parameter schema admits a string value (written raw), and whether it admits others.
void value_kinds(const ojson& prop, bool* raw, bool* json) {
  if (!prop.is_object()) {
    *raw = *json = true;
    return;
  }
  const auto t = prop.find("type");
  if (t == prop.end()) {
    *raw = *json = true;
  } else if (t->is_string()) {
    *raw = *t == "string";
    *json = !*raw;
  } else {
    *raw = t->is_array() && std::find(t->begin(), t->end(), ojson("string")) != t->end();
    *json = !t->is_array() || t->size() > (*raw ? 1u : 0u);
  }
}

}  // namespace

// ---- LiteralTrie ------------------------------------------------------------------------------

LiteralTrie::LiteralTrie() : nodes_(1) {}

void LiteralTrie::add(std::string_view s, int32_t id, uint64_t tag) {
  int32_t at = 0;
  nodes_[0].below |= tag;
  for (const char ch : s) {
    const uint8_t c = uint8_t(ch);
    int32_t k = nodes_[size_t(at)].first_child;
    while (k >= 0 && nodes_[size_t(k)].byte != c) k = nodes_[size_t(k)].next_sibling;
    if (k < 0) {
      k = int32_t(nodes_.size());
      Node n;
      n.byte = c;
      n.next_sibling = nodes_[size_t(at)].first_child;
      nodes_.push_back(n);
      nodes_[size_t(at)].first_child = k;
    }
    nodes_[size_t(k)].below |= tag;
    at = k;
  }
  nodes_[size_t(at)].id = id;
}

int32_t LiteralTrie::child(int32_t node, uint8_t c, uint64_t tags) const {
  for (int32_t k = nodes_[size_t(node)].first_child; k >= 0; k = nodes_[size_t(k)].next_sibling)
    if (nodes_[size_t(k)].byte == c) return (nodes_[size_t(k)].below & tags) ? k : -1;
  return -1;
}

// ---- ToolGrammar ------------------------------------------------------------------------------

ToolGrammar ToolGrammar::compile(const ojson& tools, bool forced) {
  ToolGrammar g;
  if (!tools.is_array()) throw RequestError("tools must be an array", "tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "].function";
    const ojson& fn = tools[i].contains("function") ? tools[i]["function"] : tools[i];
    Tool t = g.compile_tool(fn, at, forced);
    for (const Tool& o : g.tools_)
      if (o.name == t.name) throw RequestError("two tools are named " + t.name, at + ".name");
    g.names_.add(t.name + "\">\n", int32_t(g.tools_.size()), 1);
    g.tools_.push_back(std::move(t));
  }
  if (g.tools_.empty())
    throw RequestError("constrained tool calls need at least one tool", "tools");
  return g;
}

// One tool: its name, and each parameter's spellings with the value schema it is held to (its
// own where the tool is strict or the call forced, any value else).
ToolGrammar::Tool ToolGrammar::compile_tool(const ojson& fn, const std::string& at, bool forced) {
  const auto st = fn.find("strict");
  const bool strict = st != fn.end() && st->is_boolean() && st->get<bool>();
  const bool schemas = strict || forced;  // else names only
  Tool t;
  t.name = fn.value("name", "");
  if (!valid_tool_name(t.name))
    throw RequestError("a tool name must be letters, digits, '_', '-' or '.'", at + ".name");
  const ojson params = fn.value("parameters", ojson::object());
  ojson props = params.is_object() ? params.value("properties", ojson::object()) : ojson();
  if (!props.is_object()) props = ojson::object();
  if (props.size() > kMaxParams)
    throw RequestError("a tool may have at most " + std::to_string(kMaxParams) +
                           " parameters for its calls to be constrained",
                       at + ".parameters");
  for (const auto& [name, prop] : props.items()) {
    const std::string path = at + ".parameters.properties." + name;
    if (!valid_param_name(name))
      throw RequestError("a parameter name may not hold '\"', '<' or control characters", path);
    t.params.push_back(name);
    if (schemas) {
      add_schema_spellings(&t, prop, params, at, path, strict);
    } else {  // names only: any value, raw or JSON
      spell(&t, int(t.params.size()) - 1, true, nullptr);
      spell(&t, int(t.params.size()) - 1, false, nullptr);
    }
  }
  if (schemas && params.is_object())
    for (const auto& r : params.value("required", ojson::array())) {
      const auto it =
          std::find(t.params.begin(), t.params.end(), r.is_string() ? r.get<std::string>() : "");
      if (it == t.params.end())
        throw RequestError("required names a parameter that is not declared", at + ".parameters");
      t.required |= uint64_t(1) << (it - t.params.begin());
    }
  return t;
}

void ToolGrammar::spell(Tool* t, int param, bool raw, const SchemaNode* schema) {
  t->spellings.add(
      t->params[size_t(param)] + (raw ? "\" string=\"true\">" : "\" string=\"false\">"),
      int32_t(t->entries.size()), uint64_t(1) << param);
  t->entries.push_back(Entry{param, raw, schema});
}

// The spellings of the last parameter of t under its schema: string values raw, others JSON of
// the schema; a schema that cannot be enforced takes any value either way (a strict tool's is
// refused instead).
void ToolGrammar::add_schema_spellings(Tool* t, const ojson& prop, const ojson& params,
                                       const std::string& at, const std::string& path,
                                       bool strict) {
  const int index = int(t->params.size()) - 1;
  bool raw = false, json = false;
  value_kinds(prop, &raw, &json);
  std::shared_ptr<JsonSchema> compiled;  // nullptr: any value
  try {
    compiled = std::make_shared<JsonSchema>(
        JsonSchema::compile_value(prop, path, params, at + ".parameters"));
  } catch (const RequestError&) {
    if (strict) throw;
    raw = true;  // not enforceable: raw text is allowed too
  }
  // raw text is checked by nothing: constrained strings (enum, pattern, format, lengths) are
  // written as JSON strings instead, through the matcher
  if (raw && compiled && !admits_any_string(compiled->root())) raw = false, json = true;
  if (raw) spell(t, index, true, nullptr);
  if (!json) return;
  const SchemaNode* schema = nullptr;  // any value
  if (compiled) {
    schemas_.push_back(compiled);
    schema = compiled->root();
  }
  spell(t, index, false, schema);
}

// ---- ToolCallMatcher --------------------------------------------------------------------------

ToolCallMatcher::ToolCallMatcher(const ToolGrammar* g, CallStart start)
    : g_(g), phase_(start == CallStart::kFree ? Phase::kFree : Phase::kLiteral) {
  if (start == CallStart::kBlock) expect(&opener(), 1, Then::kName);
  if (start == CallStart::kInsideBlock) expect(&first_invoke(), 1, Then::kName);
}

void ToolCallMatcher::expect(const std::vector<std::string>* lits, uint64_t alive, Then then) {
  phase_ = Phase::kLiteral;
  lits_ = lits;
  alive_ = alive;
  pos_ = 0;
  then_ = then;
}

bool ToolCallMatcher::feed(uint8_t c) {
  ToolCallMatcher next = *this;
  if (!next.step(c)) return false;
  *this = std::move(next);
  return true;
}

bool ToolCallMatcher::feed(std::string_view s) {
  ToolCallMatcher next = *this;
  for (char c : s)
    if (!next.step(uint8_t(c))) return false;
  *this = std::move(next);
  return true;
}

bool ToolCallMatcher::done() const {
  return phase_ == Phase::kDone || (phase_ == Phase::kFree && open_ < kOpenerMarkerEnd);
}

bool ToolCallMatcher::step(uint8_t c) {
  switch (phase_) {
    case Phase::kFree:
      return free_step(c);
    case Phase::kLiteral:
      return literal_step(c);
    case Phase::kName:
    case Phase::kSpelling:
      return trie_step(c);
    case Phase::kRawValue: {
      const std::string_view close = kDsmlParamClose;
      open_ = uint16_t(uint8_t(close[open_]) == c ? open_ + 1 : (c == '<' ? 1 : 0));
      if (open_ == close.size()) after_param();
      return true;
    }
    case Phase::kJsonValue:
      // a complete value ends at the close tag ('<' continues no complete value, and inside a
      // string the value is not complete)
      if (c == '<' && json_->can_end()) {
        json_.reset();
        expect(&param_close(), 1, Then::kAfterParam);
        pos_ = 1;
        return true;
      }
      return json_->step(c);
    case Phase::kDone:
      return false;
  }
  return false;
}

// Free text: anything, except that the DSML tag marker may only open a calls block -- once
// "<｜DSML｜" is written, " calls>" must follow.
bool ToolCallMatcher::free_step(uint8_t c) {
  const std::string_view open = kDsmlCallsOpen;
  if (open_ >= kOpenerMarkerEnd) {
    if (uint8_t(open[open_]) != c) return false;
    if (++open_ == open.size()) {
      open_ = marker_ = 0;
      expect(&opener_rest(), 1, Then::kName);
    }
    return true;
  }
  open_ = uint16_t(uint8_t(open[open_]) == c ? open_ + 1 : (c == '<' ? 1 : 0));
  marker_ = marker_step(marker_, c);
  return marker_ < kMarker.size() || open_ == kOpenerMarkerEnd;
}

// Any declared tool's name comes next.
void ToolCallMatcher::expect_name() {
  phase_ = Phase::kName;
  node_ = 0;
  tool_ = -1;
}

bool ToolCallMatcher::literal_step(uint8_t c) {
  uint64_t next = 0;
  size_t complete = SIZE_MAX;
  for (uint64_t bits = alive_; bits != 0; bits &= bits - 1) {
    const size_t i = size_t(__builtin_ctzll(bits));
    const std::string& l = (*lits_)[i];
    if (pos_ < l.size() && uint8_t(l[pos_]) == c) {
      next |= uint64_t(1) << i;
      if (pos_ + 1u == l.size()) complete = i;  // no literal of a set is a prefix of another
    }
  }
  if (next == 0) return false;
  alive_ = next;
  ++pos_;
  if (complete != SIZE_MAX) completed(complete);
  return true;
}

// A tool's name, or one of its unused parameters' spellings, byte by byte down its trie.
bool ToolCallMatcher::trie_step(uint8_t c) {
  const bool name = phase_ == Phase::kName;
  const LiteralTrie& trie = name ? g_->names() : g_->tools()[size_t(tool_)].spellings;
  const int32_t k = trie.child(node_, c, name ? ~uint64_t(0) : ~used_);
  if (k < 0) return false;
  node_ = k;
  const int32_t id = trie.id(k);
  if (id < 0) return true;
  if (name) {
    tool_ = int16_t(id);
    used_ = 0;
    invoke_body();
    return true;
  }
  const ToolGrammar::Entry& e = g_->tools()[size_t(tool_)].entries[size_t(id)];
  used_ |= uint64_t(1) << e.param;
  if (e.raw) {
    phase_ = Phase::kRawValue;
    open_ = 0;
  } else {
    phase_ = Phase::kJsonValue;
    json_.emplace(e.schema);
  }
  return true;
}

void ToolCallMatcher::completed(size_t which) {
  switch (then_) {
    case Then::kName:  // the opener: a tool name comes next
      expect_name();
      return;
    case Then::kInvokeBody:
      if (which == 0) {  // a parameter opening: which one
        phase_ = Phase::kSpelling;
        node_ = 0;
      } else {  // the invoke's end
        expect(&after_invoke(), 3, Then::kAfterInvoke);
      }
      return;
    case Then::kAfterParam:
      after_param();
      return;
    case Then::kAfterInvoke:
      if (which == 0)
        expect_name();
      else
        phase_ = Phase::kDone;
      return;
  }
}

// After the name: a parameter (if the tool has any) or the end (if none is required).
void ToolCallMatcher::invoke_body() {
  const auto& t = g_->tools()[size_t(tool_)];
  expect(&invoke_body_lits(), (t.params.empty() ? 0 : 1) | (t.required == 0 ? 2 : 0),
         Then::kInvokeBody);
}

// Which of "\n" + a parameter opening (bit 0: an unused parameter is left) and "\n" + the invoke's
// end (bit 1: every required parameter is there) may follow the parameter just closed.
uint64_t ToolCallMatcher::after_param_alive() const {
  const auto& t = g_->tools()[size_t(tool_)];
  const uint64_t all = t.params.size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << t.params.size()) - 1;
  return ((all & ~used_) != 0 ? 1 : 0) | ((t.required & ~used_) == 0 ? 2 : 0);
}

void ToolCallMatcher::after_param() {
  expect(&after_param_lits(), after_param_alive(), Then::kInvokeBody);
}

std::string ToolCallMatcher::key() const {
  std::string k;
  auto put = [&k](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  const uint8_t head[] = {uint8_t(phase_), uint8_t(then_)};
  put(head, sizeof head);
  if (phase_ == Phase::kRawValue || phase_ == Phase::kJsonValue) {
    // Inside a value, one token reaches at most the marker of the tag after it (no token but
    // the marker token holds the marker: runtime/token_constraint.h), so what lies beyond the
    // parameter's close -- which tool, which parameters are left -- matters only as the two
    // endings it allows. A value of one tool and of another share their (whole-trie) mask.
    const uint64_t alive = after_param_alive();
    put(&alive, sizeof alive);
    put(&open_, sizeof open_);
    if (json_) k += json_->key();
    return k;
  }
  put(&lits_, sizeof lits_);
  put(&alive_, sizeof alive_);
  put(&pos_, sizeof pos_);
  put(&open_, sizeof open_);
  put(&marker_, sizeof marker_);
  put(&node_, sizeof node_);
  put(&tool_, sizeof tool_);
  put(&used_, sizeof used_);
  if (json_) k += json_->key();
  return k;
}

}  // namespace cedar::text
