// The per-request output pipeline, shared by every API format: generated token ids and their
// decoded text in, API-neutral events out.
//
//   text -> OutputParser (reasoning / content / tool calls, text::ParserOptions)
//        -> StopMatcher on answer text only (v41-interface.md §3.12)
//        -> CompletionEvent list + the accumulated Outcome (message, finish, usage)
//
// The runtime's Generator is run with parse_output = false and no stop strings, so that the
// server owns these rules and the test hook (forced output) takes exactly the same path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/generator.h"
#include "text/output_parser.h"
#include "text/tokenizer.h"

namespace cedar::server {

using text::ojson;

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens reused (prefix cache / session state)
  int64_t completion_tokens = 0;  // sampled tokens, a terminating stop token included
  int64_t reasoning_tokens = 0;   // completion tokens up to and including the closing </think>

  // {"prompt_tokens","completion_tokens","total_tokens","prompt_tokens_details":{"cached_tokens"},
  //  "completion_tokens_details":{"reasoning_tokens"},"prompt_cache_hit_tokens",
  //  "prompt_cache_miss_tokens"} (§5.3).
  ojson openai() const;
};

enum class Finish { kStop, kLength, kToolCalls, kCancelled, kError };
const char* openai_finish_reason(Finish f);  // stop, length, tool_calls, (cancelled), (error)

// One answer token's log-probability (OpenAI `logprobs.content[]`): its text (lossy UTF-8), raw
// bytes, log-probability and the most likely alternatives.
struct LogprobOut {
  struct Alt {
    std::string token;
    std::string bytes;
    double logprob = 0.0;
  };
  Alt tok;
  std::vector<Alt> top;
};

struct ToolCallOut {
  std::string id, name, arguments;  // arguments: the streamed JSON object text
  bool cut = false;                 // the output ended or broke inside the call
};

struct Outcome {
  bool thinking = false;  // reasoning is meaningful
  std::string reasoning;
  std::string content;
  std::vector<ToolCallOut> tool_calls;
  Finish finish = Finish::kStop;
  std::string stop_sequence;  // the stop string that ended the answer ("" if none)
  std::string error;          // kError: what went wrong
  Usage usage;
  std::vector<LogprobOut> logprobs;  // answer tokens, when requested
};

// One streamed step of a completion.
struct CompletionEvent {
  enum class Kind {
    kStarted,    // admitted and prefilled: usage.prompt_tokens / cached_tokens are known
    kReasoning,  // text
    kContent,    // text
    kToolBegin,  // index, id, name
    kToolArgs,   // index, text (a fragment of the JSON arguments)
    kToolEnd,    // index
    kLogprob,    // lp: an answer token's log-probability (before that token's text events)
    kDone,       // the Outcome is final
  };
  Kind kind = Kind::kContent;
  int index = -1;
  std::string text, id, name;
  Usage usage;  // kStarted: prompt_tokens and cached_tokens
  LogprobOut lp;
  bool cut = false;  // kToolEnd: the call was cut short (ToolCallOut::cut)
};

struct CompletionSetup {
  text::ParserOptions parser;  // start state, tools, id prefix
  bool raw = false;            // FIM: text is content as is (no think/DSML parsing)
  std::vector<std::string> stop;
};

class CompletionPipeline {
 public:
  explicit CompletionPipeline(CompletionSetup setup);

  // One sampled token (stop tokens included, before its text, if any, is fed).
  void on_token(int32_t id, int32_t think_end_id);
  // The log-probabilities of the token just given to on_token: recorded (and a kLogprob event
  // appended) when it is an answer token -- not reasoning, not a stop token.
  void on_logprobs(const runtime::TokenLogprobs& t, const text::Tokenizer& tok, bool stop_token,
                   std::vector<CompletionEvent>* out);
  // Decoded completion text (any chunking). Appends events to *out. Returns true once a stop
  // sequence has matched: the caller should end generation.
  bool on_text(std::string_view text, std::vector<CompletionEvent>* out);
  // End of generation: flushes held text. Sets the outcome's finish from `engine_finish` (what
  // ended generation on the engine side) and the parsed state.
  void finish(Finish engine_finish, std::vector<CompletionEvent>* out);

  bool stopped() const { return stop_.matched(); }
  // The text so far ends inside the reasoning (it was never closed).
  bool in_reasoning() const { return in_reasoning_; }
  Outcome& outcome() { return out_; }
  const Outcome& outcome() const { return out_; }

 private:
  void apply(const std::vector<text::ParseEvent>& evs, std::vector<CompletionEvent>* out);
  void content(std::string_view s, std::vector<CompletionEvent>* out);
  void flush_content(std::vector<CompletionEvent>* out);

  CompletionSetup setup_;
  text::OutputParser parser_;
  runtime::StopMatcher stop_;  // answer text only
  Outcome out_;
  bool in_reasoning_ = false;
  bool last_was_answer_ = false;  // the last on_token's token is an answer token
  std::vector<text::ParseEvent> scratch_;
};

}  // namespace cedar::server
