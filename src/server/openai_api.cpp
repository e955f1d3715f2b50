#include "server/openai_api.h"

#include "server/sse.h"

namespace cedar::server {

namespace {
constexpr const char* kFingerprint = "fp_cedar";
}

ojson openai_message(const Outcome& o) {
  ojson m = ojson::object();
  m["role"] = "assistant";
  m["content"] = (o.content.empty() && !o.tool_calls.empty()) ? ojson() : ojson(o.content);
  if (o.thinking) m["reasoning_content"] = o.reasoning;
  if (!o.tool_calls.empty()) {
    ojson calls = ojson::array();
    for (const auto& c : o.tool_calls)
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

std::string openai_stream_error(const std::string& message) {
  return sse_data(openai_error_body(ApiError(500, message))) + std::string(kSseDone);
}

// --- Chat Completions --------------------------------------------------------------------------

ojson openai_logprob(const LogprobOut& lp) {
  auto alt = [](const LogprobOut::Alt& a) {
    ojson bytes = ojson::array();
    for (unsigned char c : a.bytes) bytes.push_back(int(c));
    return ojson{{"token", a.token}, {"logprob", a.logprob}, {"bytes", std::move(bytes)}};
  };
  ojson e = alt(lp.tok);
  ojson top = ojson::array();
  for (const auto& a : lp.top) top.push_back(alt(a));
  e["top_logprobs"] = std::move(top);
  return e;
}

ChatCompletionFormat::ChatCompletionFormat(std::string id, std::string model, int64_t created,
                                           bool thinking, bool include_usage, bool logprobs)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      thinking_(thinking),
      include_usage_(include_usage),
      logprobs_(logprobs) {}

void ChatCompletionFormat::attach_pending(ojson& c) {
  if (!logprobs_ || pending_.empty()) return;
  c["choices"][0]["logprobs"] = {{"content", std::move(pending_)}, {"refusal", nullptr}};
  pending_ = ojson::array();
}

ojson ChatCompletionFormat::chunk(ojson delta, const char* finish_reason) const {
  ojson c = ojson::object();
  c["id"] = id_;
  c["object"] = "chat.completion.chunk";
  c["created"] = created_;
  c["model"] = model_;
  c["system_fingerprint"] = kFingerprint;
  ojson choice = ojson::object();
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason ? ojson(finish_reason) : ojson();
  c["choices"] = ojson::array({std::move(choice)});
  // include_usage: every chunk has "usage", null except on the last (§5.4).
  if (include_usage_) c["usage"] = nullptr;
  return c;
}

void ChatCompletionFormat::open(std::string* out) {
  if (opened_) return;
  opened_ = true;
  ojson d = ojson::object();
  d["role"] = "assistant";
  d["content"] = thinking_ ? ojson() : ojson("");
  if (thinking_) d["reasoning_content"] = "";
  *out += sse_data(chunk(std::move(d), nullptr));
}

void ChatCompletionFormat::event(const CompletionEvent& e, const Outcome* outcome,
                                 std::string* out) {
  using K = CompletionEvent::Kind;
  if (e.kind != K::kDone || (outcome && outcome->finish != Finish::kError)) open(out);
  switch (e.kind) {
    case K::kStarted:
    case K::kToolEnd:
      break;
    case K::kLogprob:
      if (logprobs_) pending_.push_back(openai_logprob(e.lp));
      break;
    case K::kReasoning: {
      ojson d = ojson::object();
      d["content"] = nullptr;
      d["reasoning_content"] = e.text;
      *out += sse_data(chunk(std::move(d), nullptr));
      break;
    }
    case K::kContent: {
      ojson d = ojson::object();
      d["content"] = e.text;
      if (thinking_) d["reasoning_content"] = nullptr;
      ojson c = chunk(std::move(d), nullptr);
      attach_pending(c);
      *out += sse_data(c);
      break;
    }
    case K::kToolBegin: {
      ojson call = {{"index", e.index},
                    {"id", e.id},
                    {"type", "function"},
                    {"function", {{"name", e.name}, {"arguments", ""}}}};
      *out += sse_data(chunk({{"tool_calls", ojson::array({call})}}, nullptr));
      break;
    }
    case K::kToolArgs: {
      ojson call = {{"index", e.index}, {"function", {{"arguments", e.text}}}};
      *out += sse_data(chunk({{"tool_calls", ojson::array({call})}}, nullptr));
      break;
    }
    case K::kDone: {
      if (!outcome) break;
      if (outcome->finish == Finish::kError) {
        *out += openai_stream_error(outcome->error);
        break;
      }
      ojson d = ojson::object();
      d["content"] = "";
      if (thinking_) d["reasoning_content"] = nullptr;
      ojson c = chunk(std::move(d), openai_finish_reason(outcome->finish));
      attach_pending(c);                     // tokens whose text ended in tool calls / held text
      c["usage"] = outcome->usage.openai();  // the last chunk always carries usage
      *out += sse_data(c);
      *out += kSseDone;
      break;
    }
  }
}

ojson ChatCompletionFormat::body(const Outcome& o) const {
  ojson b = ojson::object();
  b["id"] = id_;
  b["object"] = "chat.completion";
  b["created"] = created_;
  b["model"] = model_;
  b["system_fingerprint"] = kFingerprint;
  ojson choice = ojson::object();
  choice["index"] = 0;
  choice["message"] = openai_message(o);
  choice["logprobs"] = nullptr;
  if (logprobs_) {
    ojson content = ojson::array();
    for (const auto& lp : o.logprobs) content.push_back(openai_logprob(lp));
    choice["logprobs"] = {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  choice["finish_reason"] = openai_finish_reason(o.finish);
  b["choices"] = ojson::array({std::move(choice)});
  b["usage"] = o.usage.openai();
  return b;
}

// --- Completions (FIM) -------------------------------------------------------------------------

CompletionFormat::CompletionFormat(std::string id, std::string model, int64_t created,
                                   bool include_usage, bool logprobs)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      include_usage_(include_usage),
      logprobs_(logprobs) {}

ojson CompletionFormat::legacy_logprobs(const std::vector<LogprobOut>& lps, int64_t* offset) {
  ojson tokens = ojson::array(), lp = ojson::array(), top = ojson::array(), off = ojson::array();
  for (const auto& e : lps) {
    tokens.push_back(e.tok.token);
    lp.push_back(e.tok.logprob);
    ojson alts = ojson::object();
    for (const auto& a : e.top) alts[a.token] = a.logprob;
    top.push_back(std::move(alts));
    off.push_back(*offset);
    *offset += int64_t(e.tok.bytes.size());
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(lp)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(off)}};
}

void CompletionFormat::attach_pending(ojson& c) {
  if (!logprobs_ || pending_.empty()) return;
  c["choices"][0]["logprobs"] = legacy_logprobs(pending_, &offset_);
  pending_.clear();
}

ojson CompletionFormat::chunk(const std::string& text, const char* finish_reason) const {
  ojson c = ojson::object();
  c["id"] = id_;
  c["object"] = "text_completion";
  c["created"] = created_;
  c["model"] = model_;
  c["system_fingerprint"] = kFingerprint;
  ojson choice = ojson::object();
  choice["text"] = text;
  choice["index"] = 0;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason ? ojson(finish_reason) : ojson();
  c["choices"] = ojson::array({std::move(choice)});
  if (include_usage_) c["usage"] = nullptr;
  return c;
}

void CompletionFormat::event(const CompletionEvent& e, const Outcome* outcome, std::string* out) {
  using K = CompletionEvent::Kind;
  if (e.kind == K::kLogprob) {
    if (logprobs_) pending_.push_back(e.lp);
  } else if (e.kind == K::kContent) {
    ojson c = chunk(e.text, nullptr);
    attach_pending(c);
    *out += sse_data(c);
  } else if (e.kind == K::kDone && outcome) {
    if (outcome->finish == Finish::kError) {
      *out += openai_stream_error(outcome->error);
      return;
    }
    ojson c = chunk("", openai_finish_reason(outcome->finish));
    attach_pending(c);
    c["usage"] = outcome->usage.openai();
    *out += sse_data(c);
    *out += kSseDone;
  }
}

ojson CompletionFormat::body(const Outcome& o) const {
  ojson b = ojson::object();
  b["id"] = id_;
  b["object"] = "text_completion";
  b["created"] = created_;
  b["model"] = model_;
  b["system_fingerprint"] = kFingerprint;
  ojson choice = ojson::object();
  choice["text"] = o.content;
  choice["index"] = 0;
  choice["logprobs"] = nullptr;
  if (logprobs_) {
    int64_t offset = 0;
    choice["logprobs"] = legacy_logprobs(o.logprobs, &offset);
  }
  choice["finish_reason"] = openai_finish_reason(o.finish);
  b["choices"] = ojson::array({std::move(choice)});
  b["usage"] = o.usage.openai();
  return b;
}

ojson models_body(const std::string& model_name, int64_t ctx_size, int64_t ctx_train) {
  // the context length as the clients that look for it spell it (llama-server's meta, vLLM's
  // max_model_len, OpenRouter's context_length)
  ojson m = {{"id", model_name},
             {"object", "model"},
             {"created", 0},
             {"owned_by", "deepseek"},
             {"context_length", ctx_size},
             {"max_model_len", ctx_size},
             {"meta", {{"n_ctx", ctx_size}, {"n_ctx_train", ctx_train}}}};
  return {{"object", "list"}, {"data", ojson::array({m})}};
}

}  // namespace cedar::server
