// The generation fields of an OpenAI request (v41-interface.md §5.2): sampling, max_tokens, stop,
// stream / stream_options, n, and cedar's test hook. The message fields are the text layer's job
// (text::parse_chat_request); these are validated here with the messages users know from the
// DeepSeek API / recipe ("temperature must be in [0, 2]", ...). Every error is an ApiError 400.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"

namespace cedar::server {

struct SamplingOptions {
  double temperature = 1.0;        // [0, 2]; 0 = greedy
  double top_p = 1.0;              // (0, 1]
  int top_k = 0;                   // extension; 0 = off
  double min_p = 0.0;              // extension; [0, 1]
  double frequency_penalty = 0.0;  // [-2, 2]
  double presence_penalty = 0.0;   // [-2, 2]
  std::optional<uint64_t> seed;
};

struct RequestOptions {
  SamplingOptions sampling;
  std::optional<int64_t> max_tokens;  // absent: up to the context size
  std::vector<std::string> stop;      // at most 16, matched on answer text only
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // report the answer tokens' log-probabilities
  int top_logprobs = 0;        // [0, 20] alternatives per token (needs logprobs)
  // Test hook (--enable-test-hooks only): the completion text the sampler is forced to emit,
  // tokenized with special tokens recognised; see docs/SERVER.md.
  std::optional<std::string> test_output;
};

// Names of the request fields for the variant being parsed (Chat Completions, Anthropic,
// Responses spell max_tokens differently).
struct OptionNames {
  const char* max_tokens = "max_tokens";
  const char* stop = "stop";
  bool legacy_logprobs = false;  // /v1/completions: `logprobs` is an integer in [0, 5]
};

// Parses and validates the OpenAI generation fields of `body`; the sampling fields it leaves out
// keep `defaults` (the server's). `test_hooks` says whether the server honours cedar_test_output
// (otherwise that field is a 400).
RequestOptions parse_request_options(const ojson& body, bool test_hooks, OptionNames names = {},
                                     const SamplingOptions& defaults = {});

inline constexpr const char* kTestOutputField = "cedar_test_output";

}  // namespace cedar::server
