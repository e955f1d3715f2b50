#include "text/output_parser.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "base/json_limits.h"
#include "text/utf8.h"

namespace cedar::text {

namespace {

constexpr std::size_t kMaxName = 256;  // longer "names" mean the tag is not what it seemed

enum class Match { kYes, kNeedMore, kNo };

// Does buf start with one of `alts`? kNeedMore when buf is a proper prefix of one of them.
Match match_any(std::string_view buf, const std::vector<std::string_view>& alts,
                std::size_t* which) {
  bool more = false;
  for (std::size_t k = 0; k < alts.size(); ++k) {
    if (buf.starts_with(alts[k])) {
      *which = k;
      return Match::kYes;
    }
    if (buf.size() < alts[k].size() && alts[k].starts_with(buf)) more = true;
  }
  return more ? Match::kNeedMore : Match::kNo;
}

// Where the earliest of `tags` stands in buf (npos if none); *which: that tag's index.
std::size_t find_first(std::string_view buf, const std::vector<std::string_view>& tags,
                       std::size_t* which) {
  std::size_t best = std::string::npos;
  for (std::size_t k = 0; k < tags.size(); ++k) {
    const std::size_t p = buf.find(tags[k]);
    if (p < best) {
      best = p;
      *which = k;
    }
  }
  return best;
}

// Start of the earliest suffix of buf that is a proper prefix of one of `tags`, or buf.size().
// Bytes from there on must be held back.
std::size_t hold_start(std::string_view buf, const std::vector<std::string_view>& tags) {
  std::size_t longest = 0;
  for (const auto& t : tags) longest = std::max(longest, t.size());
  const std::size_t from = buf.size() > longest ? buf.size() - longest : 0;
  for (std::size_t p = from; p < buf.size(); ++p) {
    const std::string_view tail = buf.substr(p);
    for (const auto& t : tags)
      if (tail.size() < t.size() && t.front() == tail.front() && t.starts_with(tail)) return p;
  }
  return buf.size();
}

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

// Valid UTF-8 for a delta: ill-formed bytes (only in ill-formed input) become U+FFFD.
std::string sanitize(std::string_view s) {
  if (utf8_valid(s)) return std::string(s);
  return utf8_lossy(s);
}

std::set<std::string> types_of(const ojson& schema) {
  std::set<std::string> t;
  if (!schema.is_object()) return t;
  auto name_of = [](const ojson& v) -> std::string {
    if (v.is_string()) return "string";
    if (v.is_boolean()) return "boolean";
    if (v.is_null()) return "null";
    if (v.is_number_integer()) return "integer";
    if (v.is_number()) return "number";
    if (v.is_array()) return "array";
    return "object";
  };
  if (schema.contains("type")) {
    const ojson& ty = schema["type"];
    if (ty.is_string())
      t.insert(ty.get<std::string>());
    else if (ty.is_array())
      for (const auto& e : ty)
        if (e.is_string()) t.insert(e.get<std::string>());
  } else if (schema.contains("enum") && schema["enum"].is_array()) {
    for (const auto& e : schema["enum"]) t.insert(name_of(e));
  } else if (schema.contains("const")) {
    t.insert(name_of(schema["const"]));
  } else {
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key) || !schema[key].is_array()) continue;
      for (const auto& sub : schema[key]) {
        const auto st = types_of(sub);
        if (st.empty()) return {};  // an untyped branch: anything goes
        t.insert(st.begin(), st.end());
      }
    }
  }
  return t;
}

// A float JSON value that is a whole number ("2.0", "1e60") satisfies "integer" as JSON Schema
// says; tested without a cast to int64, which is undefined for values beyond its range.
bool integral(const ojson& v) {
  const double d = v.get<double>();
  return std::isfinite(d) && std::trunc(d) == d;
}

bool matches(const ojson& v, const std::set<std::string>& types) {
  for (const auto& t : types) {
    if (t == "string" && v.is_string()) return true;
    if (t == "number" && v.is_number()) return true;
    if (t == "integer" && (v.is_number_integer() || (v.is_number_float() && integral(v))))
      return true;
    if (t == "boolean" && v.is_boolean()) return true;
    if (t == "null" && v.is_null()) return true;
    if (t == "array" && v.is_array()) return true;
    if (t == "object" && v.is_object()) return true;
  }
  return false;
}

// What ends a run of reasoning or answer text: the reasoning's end, the end of the output, a calls
// block, or the DSML tag marker anywhere else (a stray tag, dropped).
const std::vector<std::string_view> kTextTags = {kThinkEnd, kEos, kDsmlCallsOpen, kDsmlV4CallsOpen,
                                                 kDsmlMarker};
// What text must be held back while it may still become one of kTextTags, including the "</"
// before a marker (a closing tag's start).
const std::vector<std::string_view> kTextHolds = {kThinkEnd,        kEos,        kDsmlCallsOpen,
                                                  kDsmlV4CallsOpen, kDsmlMarker, kDsmlCallsClose};
// What ends a dropped stretch of DSML: a calls block's end, a new calls block, the reasoning's
// end, the end of the output.
const std::vector<std::string_view> kDropEnds = {
    kDsmlCallsClose, kDsmlV4CallsClose, kDsmlCallsOpen, kDsmlV4CallsOpen, kThinkEnd, kEos};

const std::vector<std::string_view> kValueEnds = {kDsmlParamClose, kDsmlV4ParamClose, kEos};

}  // namespace

ojson ParsedMessage::to_openai() const {
  ojson m = ojson::object();
  m["role"] = "assistant";
  m["content"] = content.empty() && !tool_calls.empty() ? ojson() : ojson(content);
  m["reasoning_content"] = thinking ? ojson(reasoning_content) : ojson();
  ojson calls = ojson::array();
  for (const auto& c : tool_calls) {
    ojson f = ojson::object();
    f["name"] = c.name;
    f["arguments"] = c.arguments_json;
    ojson tc = ojson::object();
    tc["id"] = c.id;
    tc["type"] = "function";
    tc["function"] = std::move(f);
    calls.push_back(std::move(tc));
  }
  m["tool_calls"] = std::move(calls);
  return m;
}

OutputParser::OutputParser(ParserOptions opts) : opts_(std::move(opts)) {
  switch (opts_.start) {
    case GenerationStart::kReasoning:
      state_ = State::kReasoning;
      break;
    case GenerationStart::kContent:
      state_ = State::kContent;
      break;
    case GenerationStart::kToolCalls:
      state_ = State::kBlock;
      break;
  }
  msg_.thinking = opts_.start == GenerationStart::kReasoning;
  if (opts_.tools.is_array()) {
    for (const auto& t : opts_.tools) {
      const ojson& f = t.is_object() && t.contains("function") ? t["function"] : t;
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
      auto& params = schema_[f["name"].get<std::string>()];
      if (!f.contains("parameters") || !f["parameters"].is_object()) continue;
      const ojson& p = f["parameters"];
      if (!p.contains("properties") || !p["properties"].is_object()) continue;
      for (const auto& [k, s] : p["properties"].items()) params[k] = types_of(s);
    }
  }
}

ParsedMessage OutputParser::parse(std::string_view text, ParserOptions opts) {
  OutputParser p(std::move(opts));
  std::vector<ParseEvent> ev;
  p.feed(text, &ev);
  p.finish(&ev);
  return p.message();
}

void OutputParser::feed(std::string_view chunk, std::vector<ParseEvent>* ev) {
  if (state_ == State::kDone) return;
  buf_.append(chunk);
  while (step(false, ev)) {
  }
}

void OutputParser::finish(std::vector<ParseEvent>* ev) {
  while (step(true, ev)) {
  }
  buf_.clear();
  state_ = State::kDone;
}

bool OutputParser::step(bool final, std::vector<ParseEvent>* ev) {
  switch (state_) {
    case State::kReasoning:
    case State::kContent:
      return step_text(final, ev);
    case State::kBlock:
    case State::kInvoke:
    case State::kAfterBlock:
      return step_tags(final, ev);
    case State::kValue:
      return step_value(final, ev);
    case State::kDropped:
      return step_dropped(final, ev);
    case State::kDone:
      buf_.clear();
      return false;
  }
  return false;
}

void OutputParser::emit_text(std::string_view s, std::vector<ParseEvent>* ev) {
  if (s.empty()) return;
  const bool reasoning = state_ == State::kReasoning;
  const auto kind = reasoning ? ParseEvent::Kind::kReasoningDelta : ParseEvent::Kind::kContentDelta;
  const std::string t = sanitize(s);
  (reasoning ? msg_.reasoning_content : msg_.content) += t;
  if (!ev->empty() && ev->back().kind == kind) {
    ev->back().text += t;
  } else {
    ParseEvent e;
    e.kind = kind;
    e.text = t;
    ev->push_back(std::move(e));
  }
}

void OutputParser::emit_args(std::string_view s, std::vector<ParseEvent>* ev) {
  if (s.empty()) return;
  const int index = static_cast<int>(msg_.tool_calls.size()) - 1;
  const std::string t = sanitize(s);
  msg_.tool_calls.back().arguments_json += t;
  if (!ev->empty() && ev->back().kind == ParseEvent::Kind::kToolCallArguments &&
      ev->back().index == index) {
    ev->back().text += t;
  } else {
    ParseEvent e;
    e.kind = ParseEvent::Kind::kToolCallArguments;
    e.index = index;
    e.text = t;
    ev->push_back(std::move(e));
  }
}

// Reasoning / content: text up to the first tag; everything that might still become a tag (and
// up to two newlines before it, which belong to a following "\n\n<｜DSML｜ calls>") is held.
bool OutputParser::step_text(bool final, std::vector<ParseEvent>* ev) {
  if (buf_.empty()) return false;
  std::size_t which = 0;
  const std::size_t best = find_first(buf_, kTextTags, &which);
  if (best != std::string::npos && kTextTags[which] == kDsmlMarker)
    return stray_marker(best, final, ev);
  if (best != std::string::npos) {
    const std::string_view tag = kTextTags[which];
    std::size_t text_end = best;
    const bool calls = tag == kDsmlCallsOpen || tag == kDsmlV4CallsOpen;
    // The template writes content + "\n\n" + block: those two newlines are not content.
    for (int n = 0; calls && n < 2 && text_end > 0 && buf_[text_end - 1] == '\n'; ++n) --text_end;
    emit_text(std::string_view(buf_).substr(0, text_end), ev);
    buf_.erase(0, best + tag.size());
    if (tag == kEos) {
      msg_.saw_eos = true;
      state_ = State::kDone;
    } else if (calls) {
      resume_ = state_;
      state_ = State::kBlock;
      if (!opts_.parse_tool_calls) malformed("a DSML calls block, but no tools were offered", ev);
    } else if (state_ == State::kReasoning) {  // "</think>"
      state_ = State::kContent;
    }  // a stray "</think>" in content is dropped
    return true;
  }
  if (final) {
    emit_text(buf_, ev);
    buf_.clear();
    return false;
  }
  std::size_t h = hold_start(buf_, kTextHolds);
  for (int n = 0; n < 2 && h > 0 && buf_[h - 1] == '\n'; ++n) --h;
  h -= utf8_incomplete_tail(std::string_view(buf_).substr(0, h));
  emit_text(std::string_view(buf_).substr(0, h), ev);
  buf_.erase(0, h);
  return false;
}

// The DSML tag marker at `at`, not (yet) part of a calls opener: text up to its tag's "<" or "</"
// is kept, the tag and what follows it are dropped -- unless a calls opener may still complete.
bool OutputParser::stray_marker(std::size_t at, bool final, std::vector<ParseEvent>* ev) {
  std::size_t start = at;
  if (at > 0 && buf_[at - 1] == '<')
    start = at - 1;
  else if (at > 1 && buf_.compare(at - 2, 2, "</") == 0)
    start = at - 2;
  const std::string_view tail = std::string_view(buf_).substr(start);
  if (!final && start + 1 == at)
    for (const std::string_view open : {kDsmlCallsOpen, kDsmlV4CallsOpen})
      if (tail.size() < open.size() && open.starts_with(tail)) {
        std::size_t h = start;
        for (int n = 0; n < 2 && h > 0 && buf_[h - 1] == '\n'; ++n) --h;
        emit_text(std::string_view(buf_).substr(0, h), ev);
        buf_.erase(0, h);
        return false;  // it may still become a calls block
      }
  emit_text(std::string_view(buf_).substr(0, start), ev);
  buf_.erase(0, at + kDsmlMarker.size());
  resume_ = state_;
  malformed("a DSML tag outside a calls block", ev);
  return true;
}

// Inside dropped DSML: nothing is shown until the calls block closes (then the text it
// interrupted goes on), a new calls block opens, the reasoning ends or the output does.
bool OutputParser::step_dropped(bool final, std::vector<ParseEvent>* ev) {
  std::size_t which = 0;
  const std::size_t best = find_first(buf_, kDropEnds, &which);
  if (best == std::string::npos) {
    buf_.erase(0, final ? buf_.size() : hold_start(buf_, kDropEnds));
    return false;
  }
  const std::string_view end = kDropEnds[which];
  buf_.erase(0, best + end.size());
  if (end == kEos) {
    msg_.saw_eos = true;
    state_ = State::kDone;
  } else if (end == kThinkEnd) {
    state_ = resume_ == State::kReasoning ? State::kContent : State::kDropped;
    resume_ = State::kContent;
  } else if (end == kDsmlCallsOpen || end == kDsmlV4CallsOpen) {
    state_ = State::kBlock;
    if (!opts_.parse_tool_calls) malformed("a DSML calls block, but no tools were offered", ev);
  } else {
    state_ = resume_;
  }
  return true;
}

// Between tags of a calls block: whitespace, then one of the tags allowed here.
bool OutputParser::step_tags(bool final, std::vector<ParseEvent>* ev) {
  std::size_t i = 0;
  while (i < buf_.size() && is_ws(buf_[i])) ++i;
  buf_.erase(0, i);
  if (buf_.empty()) {
    if (final && state_ != State::kAfterBlock) {
      malformed("output ended inside a DSML calls block", ev);
      state_ = State::kDone;
    }
    return false;
  }
  static const std::vector<std::string_view> kBlockAlts = {
      kDsmlInvokeOpen, kDsmlV4InvokeOpen, kDsmlCallsClose, kDsmlV4CallsClose, kEos};
  static const std::vector<std::string_view> kInvokeAlts = {
      kDsmlParamOpen, kDsmlV4ParamOpen, kDsmlInvokeClose, kDsmlV4InvokeClose, kEos};
  static const std::vector<std::string_view> kAfterAlts = {kDsmlCallsOpen, kDsmlV4CallsOpen,
                                                           kThinkEnd, kEos};
  const auto& alts = state_ == State::kBlock    ? kBlockAlts
                     : state_ == State::kInvoke ? kInvokeAlts
                                                : kAfterAlts;
  std::size_t k = 0;
  const Match m = match_any(buf_, alts, &k);
  if (m == Match::kNeedMore) {
    if (!final) return false;
    if (state_ != State::kAfterBlock) malformed("output ended inside a DSML tag", ev);
    state_ = State::kDone;
    return false;
  }
  if (m == Match::kNo) {
    if (state_ == State::kAfterBlock) {  // plain text after the block: shown, but noted
      if (!msg_.malformed) msg_.problem = "text after a DSML calls block";
      msg_.malformed = true;
      state_ = State::kContent;
    } else {
      malformed("unexpected text inside a DSML calls block", ev);
    }
    return true;
  }
  const std::string_view tag = alts[k];
  if (tag == kEos) {
    if (state_ != State::kAfterBlock) malformed("end of sentence inside a DSML calls block", ev);
    msg_.saw_eos = true;
    state_ = State::kDone;
    return true;
  }
  if (tag == kDsmlInvokeOpen || tag == kDsmlV4InvokeOpen)
    return parse_invoke_header(tag.size(), final, ev);
  if (tag == kDsmlParamOpen || tag == kDsmlV4ParamOpen)
    return parse_param_header(tag.size(), final, ev);
  buf_.erase(0, tag.size());
  if (tag == kDsmlInvokeClose || tag == kDsmlV4InvokeClose) {
    close_call(ev);
    state_ = State::kBlock;
  } else if (tag == kDsmlCallsClose || tag == kDsmlV4CallsClose) {
    state_ = State::kAfterBlock;
  } else if (tag == kDsmlCallsOpen || tag == kDsmlV4CallsOpen) {
    state_ = State::kBlock;  // a second calls block
  }  // "</think>" after a block (calls written inside the reasoning) is dropped
  return true;
}

// `NAME">` after `<｜DSML｜ invoke name="`.
bool OutputParser::parse_invoke_header(std::size_t lit, bool final, std::vector<ParseEvent>* ev) {
  const std::size_t q = buf_.find('"', lit);
  const std::string_view name =
      std::string_view(buf_).substr(lit, q == std::string::npos ? std::string::npos : q - lit);
  if (name.size() > kMaxName || name.find_first_of("\n<>") != std::string_view::npos ||
      (q != std::string::npos && name.empty())) {
    malformed("invalid tool name in a DSML invoke tag", ev);
    return true;
  }
  if (q == std::string::npos || buf_.size() < q + 2) {
    if (final) {
      malformed("output ended inside a DSML invoke tag", ev);
      state_ = State::kDone;
    }
    return false;
  }
  if (buf_[q + 1] != '>') {
    malformed("invalid DSML invoke tag", ev);
    return true;
  }
  ToolCall call;
  call.id = opts_.id_prefix + std::to_string(msg_.tool_calls.size());
  call.name = std::string(name);
  buf_.erase(0, q + 2);
  ParseEvent e;
  e.kind = ParseEvent::Kind::kToolCallBegin;
  e.index = static_cast<int>(msg_.tool_calls.size());
  e.id = call.id;
  e.name = call.name;
  ev->push_back(std::move(e));
  msg_.tool_calls.push_back(std::move(call));
  call_open_ = true;
  params_ = 0;
  keys_.clear();
  emit_args("{", ev);
  state_ = State::kInvoke;
  return true;
}

// `KEY" string="true|false">` (or `KEY">`) after `<｜DSML｜ parameter name="`.
bool OutputParser::parse_param_header(std::size_t lit, bool final, std::vector<ParseEvent>* ev) {
  const std::size_t q = buf_.find('"', lit);
  const std::string_view key =
      std::string_view(buf_).substr(lit, q == std::string::npos ? std::string::npos : q - lit);
  if (key.size() > kMaxName || key.find_first_of("\n<>") != std::string_view::npos ||
      (q != std::string::npos && key.empty())) {
    malformed("invalid parameter name in a DSML parameter tag", ev);
    return true;
  }
  if (q == std::string::npos) {
    if (final) {
      malformed("output ended inside a DSML parameter tag", ev);
      state_ = State::kDone;
    }
    return false;
  }
  static const std::vector<std::string_view> kAttrs = {" string=\"true\">", " string=\"false\">",
                                                       ">"};
  std::size_t k = 0;
  const Match m = match_any(std::string_view(buf_).substr(q + 1), kAttrs, &k);
  if (m == Match::kNeedMore) {
    if (final) {
      malformed("output ended inside a DSML parameter tag", ev);
      state_ = State::kDone;
    }
    return false;
  }
  if (m == Match::kNo) {
    malformed("invalid DSML parameter tag", ev);
    return true;
  }
  if (keys_.count(std::string(key))) {
    malformed("duplicate parameter \"" + std::string(key) + "\" in a DSML invoke", ev);
    return true;
  }
  key_ = std::string(key);
  attr_ = k == 0 ? Attr::kTrue : k == 1 ? Attr::kFalse : Attr::kMissing;
  buf_.erase(0, q + 1 + kAttrs[k].size());
  keys_.insert(key_);

  const std::set<std::string>* types = param_types(key_);
  const bool any = !types || types->empty();
  const bool only_string = !any && *types == std::set<std::string>{"string"};
  stream_string_ = (attr_ == Attr::kTrue && (any || types->count("string"))) ||
                   (attr_ == Attr::kMissing && only_string);
  std::string head = params_ ? ", " : "";
  json_quote_append(key_, &head);
  head += ": ";
  if (stream_string_) head += '"';
  emit_args(head, ev);
  ++params_;
  value_.clear();
  state_ = State::kValue;
  return true;
}

bool OutputParser::step_value(bool final, std::vector<ParseEvent>* ev) {
  std::size_t which = 0;
  const std::size_t best = find_first(buf_, kValueEnds, &which);
  auto take = [&](std::size_t n) {
    const std::string_view part = std::string_view(buf_).substr(0, n);
    if (stream_string_) {
      std::string esc;
      json_escape_append(sanitize(part), &esc);
      emit_args(esc, ev);
    } else {
      value_.append(part);
    }
    buf_.erase(0, n);
  };
  if (best != std::string::npos) {
    take(best);
    buf_.erase(0, kValueEnds[which].size());
    finish_value(ev);
    state_ = State::kInvoke;
    if (kValueEnds[which] == kEos) {
      msg_.saw_eos = true;
      malformed("end of sentence inside a DSML parameter", ev);
      state_ = State::kDone;
    }
    return true;
  }
  if (final) {
    take(buf_.size());
    finish_value(ev);
    state_ = State::kInvoke;
    malformed("output ended inside a DSML parameter", ev);
    state_ = State::kDone;
    return false;
  }
  std::size_t h = hold_start(buf_, kValueEnds);
  h -= utf8_incomplete_tail(std::string_view(buf_).substr(0, h));
  take(h);
  return false;
}

// Writes the value of the parameter just closed. Streamed strings only need their closing quote;
// buffered values are typed here (rules in docs/CHAT_TEMPLATE.md).
void OutputParser::finish_value(std::vector<ParseEvent>* ev) {
  if (stream_string_) {
    emit_args("\"", ev);
    return;
  }
  const std::set<std::string>* types = param_types(key_);
  const bool any = !types || types->empty();
  const bool only_string = !any && *types == std::set<std::string>{"string"};
  const std::string raw = sanitize(value_);
  const std::string_view t = trim(raw);
  const ojson parsed = parse_untrusted_json(t);
  const bool ok = !parsed.is_discarded();
  std::string out;
  if (only_string) {
    // Declared a string: a JSON string literal is unwrapped, anything else is the text itself.
    if (ok && parsed.is_string())
      out = std::string(t);
    else
      json_quote_append(raw, &out);
  } else if (ok && (any || matches(parsed, *types))) {
    out = std::string(t);  // the model's own JSON text
  } else if (ok && parsed.is_string() && !any) {
    // "3" for an integer: the string's contents, if they are JSON of a declared type.
    const ojson inner = parse_untrusted_json(parsed.get_ref<const std::string&>());
    if (!inner.is_discarded() && matches(inner, *types))
      out = inner.dump();
    else
      out = std::string(t);
  } else if (ok && attr_ != Attr::kTrue) {
    out = std::string(t);  // valid JSON, just not the declared type: keep what was written
  } else {
    json_quote_append(raw, &out);
  }
  emit_args(out, ev);
}

void OutputParser::close_call(std::vector<ParseEvent>* ev, bool cut) {
  if (!call_open_) return;
  emit_args("}", ev);
  ToolCall& c = msg_.tool_calls.back();
  const ojson parsed = parse_untrusted_json(c.arguments_json);
  if (!parsed.is_discarded()) c.arguments = parsed;
  ParseEvent e;
  e.kind = ParseEvent::Kind::kToolCallEnd;
  e.index = static_cast<int>(msg_.tool_calls.size()) - 1;
  e.cut = cut;
  ev->push_back(std::move(e));
  call_open_ = false;
}

void OutputParser::malformed(const std::string& why, std::vector<ParseEvent>* ev) {
  if (!msg_.malformed) msg_.problem = why;
  msg_.malformed = true;
  if (state_ == State::kValue) finish_value(ev);
  close_call(ev, /*cut=*/true);
  state_ = State::kDropped;
}

const std::set<std::string>* OutputParser::param_types(const std::string& key) const {
  if (msg_.tool_calls.empty()) return nullptr;
  const auto t = schema_.find(msg_.tool_calls.back().name);
  if (t == schema_.end()) return nullptr;
  const auto p = t->second.find(key);
  return p == t->second.end() ? nullptr : &p->second;
}

}  // namespace cedar::text
