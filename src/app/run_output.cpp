#include "app/run_output.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "base/progress.h"

namespace cedar::app {

namespace {

using runtime::GenerationResult;
using text::ParseEvent;

// Streams parser events to stdout. Reasoning on a terminal sits between a "Thinking..." line and
// a "...done thinking." line, dimmed (the marker stays readable where dim is not shown, e.g. in a
// capture); piped, it sits between <think> lines so that scripts can cut it out. Tool calls print
// as "[tool call NAME] ARGS".
class Printer {
 public:
  Printer(bool tty, bool hide_thinking) : tty_(tty), hide_(hide_thinking) {}

  void event(const ParseEvent& e) {
    switch (e.kind) {
      case ParseEvent::Kind::kReasoningDelta:
        in_reasoning_ = true;
        if (hide_) return;
        if (!shown_open_) {
          std::fputs(tty_ ? "\x1b[2mThinking...\n" : "<think>\n", stdout);
          shown_open_ = true;
          at_line_start_ = true;
        }
        put(e.text);
        break;
      case ParseEvent::Kind::kContentDelta:
        end_reasoning();
        put(e.text);
        break;
      case ParseEvent::Kind::kToolCallBegin:
        end_reasoning();
        std::fprintf(stdout, "%s[tool call %s] ", at_line_start_ ? "" : "\n", e.name.c_str());
        at_line_start_ = false;
        break;
      case ParseEvent::Kind::kToolCallArguments:
        put(e.text);
        break;
      case ParseEvent::Kind::kToolCallEnd:
        put("\n");
        break;
    }
    std::fflush(stdout);
  }

  // Ends the output; true when it ended inside the reasoning.
  bool finish() {
    const bool cut = in_reasoning_;
    end_reasoning();
    if (!at_line_start_) put("\n");
    std::fflush(stdout);
    return cut;
  }

 private:
  void put(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    at_line_start_ = s.back() == '\n';
  }
  void end_reasoning() {
    in_reasoning_ = false;
    if (!shown_open_) return;
    shown_open_ = false;
    if (!at_line_start_) put("\n");
    std::fputs(tty_ ? "...done thinking.\x1b[0m\n\n" : "</think>\n", stdout);
  }

  bool tty_, hide_;
  bool in_reasoning_ = false;  // the last event was reasoning
  bool shown_open_ = false;    // the reasoning marker is open on stdout
  bool at_line_start_ = true;
};

void print_stats(const GenerationResult& r, const runtime::PrefixCache* cache) {
  const double pf = r.prefill_seconds > 0 ? double(r.prefill_computed) / r.prefill_seconds : 0.0;
  const double dc =
      r.decode_seconds > 0 ? double(r.usage.completion_tokens) / r.decode_seconds : 0.0;
  std::fprintf(stderr,
               "cedar run: prompt %lld tokens (%lld cached), prefill %.1f tok/s, decode %.1f "
               "tok/s, %lld tokens, finish %s",
               (long long)r.usage.prompt_tokens, (long long)r.usage.cached_tokens, pf, dc,
               (long long)r.usage.completion_tokens, runtime::finish_reason_name(r.finish));
  if (r.usage.reasoning_tokens > 0)
    std::fprintf(stderr, " (%lld reasoning)", (long long)r.usage.reasoning_tokens);
  std::fputc('\n', stderr);
  if (cache != nullptr) {
    const runtime::RestoreInfo ri = cache->last_restore();
    if (ri.source != runtime::RestoreInfo::Source::kNone && ri.tokens > 0)
      std::fprintf(stderr, "cedar run: prefix cache hit (%s): %lld tokens%s, %.3f s\n",
                   runtime::source_name(ri.source), (long long)ri.tokens,
                   ri.replayed ? ", window rebuilt by bounded replay" : "", ri.seconds);
  }
}

}  // namespace

GenerationResult run_turn(runtime::Generator& gen, const runtime::PrefixCache* cache,
                          const runtime::Prompt& prompt, runtime::GenerationOptions opt,
                          const TurnOutput& out, std::atomic<bool>* cancel,
                          const char* limit_flag) {
  opt.parse_output = out.parse;
  opt.parser.start = prompt.start;
  opt.cancel = cancel;
  Printer printer(isatty(fileno(stdout)) != 0, out.hide_thinking);
  cancel->store(false);
  runtime::GenerationCallbacks cb;
  cb.on_event = [&](const ParseEvent& e) { printer.event(e); };
  // a long prefill shows its progress on the terminal (after half a second; cleared after)
  ProgressBar bar("prefill", int64_t(prompt.ids.size()), "tokens");
  cb.on_prefill = [&](int64_t done, int64_t) { bar.update(done); };
  cb.on_token = [&](int32_t) { bar.finish(); };
  GenerationResult r = gen.generate(prompt.ids, opt, cb);
  bar.finish();
  const bool cut_in_reasoning = printer.finish();
  print_stats(r, cache);
  if (r.finish == runtime::FinishReason::kCancelled)
    std::fprintf(stderr, "cedar run: stopped (Ctrl-C)\n");
  else if (r.finish == runtime::FinishReason::kLength && cut_in_reasoning)
    std::fprintf(stderr,
                 "cedar run: the answer was cut off inside its reasoning at %lld tokens: raise "
                 "the limit (%s) or lower the effort (--think N; /think N in chat)\n",
                 (long long)r.usage.completion_tokens, limit_flag);
  return r;
}

}  // namespace cedar::app
