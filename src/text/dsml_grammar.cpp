#include "text/dsml_grammar.h"

#include <algorithm>
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
const std::vector<std::string>& invoke_body() {  // after `NAME">\n`: a parameter or the end
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

ToolGrammar ToolGrammar::compile(const ojson& tools) {
  ToolGrammar g;
  if (!tools.is_array()) throw RequestError("tools must be an array", "tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "].function";
    const ojson& fn = tools[i].contains("function") ? tools[i]["function"] : tools[i];
    const auto st = fn.find("strict");
    const bool strict = st != fn.end() && st->is_boolean() && st->get<bool>();
    Tool t;
    t.name = fn.value("name", "");
    if (!valid_tool_name(t.name))
      throw RequestError("a strict tool needs a name of letters, digits, '_', '-' or '.'",
                         at + ".name");
    for (const Tool& o : g.tools_)
      if (o.name == t.name) throw RequestError("two tools are named " + t.name, at + ".name");
    const ojson params = fn.value("parameters", ojson::object());
    const ojson props = params.value("properties", ojson::object());
    for (const auto& [name, prop] : props.items()) {
      const std::string path = at + ".parameters.properties." + name;
      if (!valid_param_name(name))
        throw RequestError("a parameter name may not hold '\"', '<' or control characters", path);
      const int index = int(t.params.size());
      t.params.push_back(name);
      bool raw = false, json = false;
      value_kinds(prop, &raw, &json);
      std::shared_ptr<JsonSchema> compiled;  // nullptr: not enforceable
      try {
        compiled = std::make_shared<JsonSchema>(
            JsonSchema::compile_value(prop, path, params, at + ".parameters"));
      } catch (const RequestError&) {
        if (strict) throw;
      }
      // raw text is checked by nothing: constrained strings (enum, pattern, format, lengths)
      // are written as JSON strings instead, through the matcher
      if (raw && compiled && !admits_any_string(compiled->root())) raw = false, json = true;
      if (raw) {
        t.entries.push_back(Entry{index, true, nullptr});
        t.lits.push_back(name + "\" string=\"true\">");
      }
      if (json) {
        const SchemaNode* schema = nullptr;  // any value
        if (compiled) {
          g.schemas_.push_back(compiled);
          schema = compiled->root();
        } else if (!raw) {  // not enforceable: raw text is allowed too
          t.entries.push_back(Entry{index, true, nullptr});
          t.lits.push_back(name + "\" string=\"true\">");
        }
        t.entries.push_back(Entry{index, false, schema});
        t.lits.push_back(name + "\" string=\"false\">");
      }
    }
    if (t.entries.size() > 64)
      throw RequestError("a strict tool may have at most 64 parameter spellings", at);
    for (const auto& r : params.value("required", ojson::array())) {
      const auto it =
          std::find(t.params.begin(), t.params.end(), r.is_string() ? r.get<std::string>() : "");
      if (it == t.params.end())
        throw RequestError("required names a parameter that is not declared", at + ".parameters");
      t.required |= uint64_t(1) << (it - t.params.begin());
    }
    g.name_lits_.push_back(t.name + "\">\n");
    g.tools_.push_back(std::move(t));
  }
  if (g.tools_.empty()) throw RequestError("strict tool calls need at least one tool", "tools");
  if (g.tools_.size() > 64) throw RequestError("at most 64 strict tools", "tools");
  return g;
}

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

bool ToolCallMatcher::step(uint8_t c) {
  switch (phase_) {
    case Phase::kFree: {
      const std::string_view open = kDsmlCallsOpen;
      close_pos_ = uint16_t(uint8_t(open[close_pos_]) == c ? close_pos_ + 1 : (c == '<' ? 1 : 0));
      if (close_pos_ == open.size()) expect(&opener_rest(), 1, Then::kName);
      return true;
    }
    case Phase::kLiteral:
      return literal_step(c);
    case Phase::kRawValue: {
      const std::string_view close = kDsmlParamClose;
      close_pos_ = uint16_t(uint8_t(close[close_pos_]) == c ? close_pos_ + 1 : (c == '<' ? 1 : 0));
      if (close_pos_ == close.size()) after_param();
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

// Any declared tool's name comes next (the grammar has at most 64 tools).
void ToolCallMatcher::expect_name() {
  const size_t n = g_->tools().size();
  expect(&g_->name_lits(), n >= 64 ? ~0ull : (1ull << n) - 1, Then::kInvokeBody);
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

void ToolCallMatcher::completed(size_t which) {
  switch (then_) {
    case Then::kName:  // the opener: a tool name comes next
      expect_name();
      return;
    case Then::kInvokeBody:
      if (tool_ < 0) {  // the name just completed
        tool_ = int16_t(which);
        used_ = 0;
        const auto& t = g_->tools()[size_t(tool_)];
        expect(&invoke_body(), (t.entries.empty() ? 0 : 1) | (t.required == 0 ? 2 : 0),
               Then::kParamName);
        return;
      }
      break;
    case Then::kParamName: {
      const auto& t = g_->tools()[size_t(tool_)];
      if (lits_ == &t.lits) {  // a parameter's spelling: its value follows
        const ToolGrammar::Entry& e = t.entries[which];
        used_ |= uint64_t(1) << e.param;
        if (e.raw) {
          phase_ = Phase::kRawValue;
          close_pos_ = 0;
        } else {
          phase_ = Phase::kJsonValue;
          json_.emplace(e.schema);
        }
        return;
      }
      if (which == 0) {  // the parameter opening: which one
        uint64_t unused = 0;
        for (size_t i = 0; i < t.entries.size(); ++i)
          if (!(used_ >> t.entries[i].param & 1)) unused |= uint64_t(1) << i;
        expect(&t.lits, unused, Then::kParamName);
      } else {  // the invoke's end
        expect(&after_invoke(), 3, Then::kAfterInvoke);
      }
      return;
    }
    case Then::kAfterParam:
      after_param();
      return;
    case Then::kAfterInvoke:
      if (which == 0) {
        expect_name();
      } else {
        phase_ = Phase::kDone;
      }
      return;
    default:
      break;
  }
}

void ToolCallMatcher::after_param() {
  const auto& t = g_->tools()[size_t(tool_)];
  bool more = false;
  for (const auto& e : t.entries) more |= !(used_ >> e.param & 1);
  const bool may_end = (t.required & ~used_) == 0;
  expect(&after_param_lits(), (more ? 1 : 0) | (may_end ? 2 : 0), Then::kParamName);
}

std::string ToolCallMatcher::key() const {
  std::string k;
  auto put = [&k](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  const uint8_t head[] = {uint8_t(phase_), uint8_t(then_)};
  put(head, sizeof head);
  put(&lits_, sizeof lits_);
  put(&alive_, sizeof alive_);
  put(&pos_, sizeof pos_);
  put(&close_pos_, sizeof close_pos_);
  put(&tool_, sizeof tool_);
  put(&used_, sizeof used_);
  if (json_) k += json_->key();
  return k;
}

}  // namespace cedar::text
