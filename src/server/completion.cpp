#include "server/completion.h"

namespace cedar::server {

ojson Usage::openai() const {
  ojson u = ojson::object();
  u["prompt_tokens"] = prompt_tokens;
  u["completion_tokens"] = completion_tokens;
  u["total_tokens"] = prompt_tokens + completion_tokens;
  u["prompt_tokens_details"] = ojson{{"cached_tokens", cached_tokens}};
  u["completion_tokens_details"] = ojson{{"reasoning_tokens", reasoning_tokens}};
  u["prompt_cache_hit_tokens"] = cached_tokens;
  u["prompt_cache_miss_tokens"] = prompt_tokens - cached_tokens;
  return u;
}

const char* openai_finish_reason(Finish f) {
  switch (f) {
    case Finish::kStop:
      return "stop";
    case Finish::kLength:
      return "length";
    case Finish::kToolCalls:
      return "tool_calls";
    case Finish::kCancelled:
      return "cancelled";
    case Finish::kError:
      return "error";
  }
  return "stop";
}

CompletionPipeline::CompletionPipeline(CompletionSetup setup)
    : setup_(std::move(setup)), parser_(setup_.parser), stop_(setup_.stop) {
  out_.thinking = !setup_.raw && setup_.parser.start == text::GenerationStart::kReasoning;
  in_reasoning_ = out_.thinking;
}

void CompletionPipeline::on_token(int32_t id, int32_t think_end_id) {
  ++out_.usage.completion_tokens;
  last_was_answer_ = !in_reasoning_;
  if (in_reasoning_) {
    ++out_.usage.reasoning_tokens;
    if (id == think_end_id) in_reasoning_ = false;
  }
}

void CompletionPipeline::on_logprobs(const runtime::TokenLogprobs& t, const text::Tokenizer& tok,
                                     bool stop_token, std::vector<CompletionEvent>* out) {
  if (!last_was_answer_ || stop_token || stop_.matched()) return;
  auto alt = [&](int32_t id, double lp) {
    LogprobOut::Alt a;
    tok.append_token_bytes(id, &a.bytes);
    a.token = tok.decode(std::span<const int32_t>(&id, 1));
    a.logprob = lp;
    return a;
  };
  LogprobOut e;
  e.tok = alt(t.id, t.logprob);
  for (const auto& [id, lp] : t.top) e.top.push_back(alt(id, lp));
  out_.logprobs.push_back(e);
  CompletionEvent ev;
  ev.kind = CompletionEvent::Kind::kLogprob;
  ev.lp = std::move(e);
  out->push_back(std::move(ev));
}

void CompletionPipeline::content(std::string_view s, std::vector<CompletionEvent>* out) {
  if (stop_.matched()) return;
  std::string emit = stop_.push(s);
  if (!emit.empty()) {
    out_.content += emit;
    out->push_back({CompletionEvent::Kind::kContent, -1, std::move(emit), {}, {}, {}, {}});
  }
  if (stop_.matched()) out_.stop_sequence = stop_.matched_string();
}

void CompletionPipeline::flush_content(std::vector<CompletionEvent>* out) {
  if (stop_.matched()) return;
  std::string emit = stop_.finish();
  if (!emit.empty()) {
    out_.content += emit;
    out->push_back({CompletionEvent::Kind::kContent, -1, std::move(emit), {}, {}, {}, {}});
  }
}

void CompletionPipeline::apply(const std::vector<text::ParseEvent>& evs,
                               std::vector<CompletionEvent>* out) {
  using K = text::ParseEvent::Kind;
  for (const auto& e : evs) {
    if (stop_.matched()) return;  // nothing after a stop sequence reaches the client
    switch (e.kind) {
      case K::kReasoningDelta:
        out_.reasoning += e.text;
        out->push_back({CompletionEvent::Kind::kReasoning, -1, e.text, {}, {}, {}, {}});
        break;
      case K::kContentDelta:
        content(e.text, out);
        break;
      case K::kToolCallBegin:
        flush_content(out);  // answer text before the calls block is complete
        out_.tool_calls.push_back({e.id, e.name, ""});
        out->push_back({CompletionEvent::Kind::kToolBegin, e.index, {}, e.id, e.name, {}, {}});
        break;
      case K::kToolCallArguments:
        if (e.index >= 0 && size_t(e.index) < out_.tool_calls.size())
          out_.tool_calls[size_t(e.index)].arguments += e.text;
        out->push_back({CompletionEvent::Kind::kToolArgs, e.index, e.text, {}, {}, {}, {}});
        break;
      case K::kToolCallEnd:
        if (e.index >= 0 && size_t(e.index) < out_.tool_calls.size())
          out_.tool_calls[size_t(e.index)].cut = e.cut;
        out->push_back({CompletionEvent::Kind::kToolEnd, e.index, {}, {}, {}, {}, {}, e.cut});
        break;
    }
  }
}

bool CompletionPipeline::on_text(std::string_view text, std::vector<CompletionEvent>* out) {
  if (stop_.matched() || text.empty()) return stop_.matched();
  if (setup_.raw) {
    content(text, out);
    return stop_.matched();
  }
  scratch_.clear();
  parser_.feed(text, &scratch_);
  apply(scratch_, out);
  return stop_.matched();
}

void CompletionPipeline::finish(Finish engine_finish, std::vector<CompletionEvent>* out) {
  if (!setup_.raw && !stop_.matched()) {
    scratch_.clear();
    parser_.finish(&scratch_);
    apply(scratch_, out);
  }
  flush_content(out);
  if (stop_.matched())
    out_.finish = Finish::kStop;  // the stop sequence ended it, whatever the engine did next
  else if (engine_finish == Finish::kStop && !out_.tool_calls.empty())
    out_.finish = Finish::kToolCalls;
  else
    out_.finish = engine_finish;
}

}  // namespace cedar::server
