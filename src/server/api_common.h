// What the three API front ends (OpenAI Chat/Completions, Anthropic Messages, OpenAI Responses)
// share: the server context, turning a Chat Completions body into a scheduler JobSpec (the
// Anthropic and Responses front ends first convert their bodies to that shape), ids, and the
// StreamFormat interface through which each front end writes its own wire format.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "server/api_error.h"
#include "server/completion.h"
#include "server/field_warnings.h"
#include "server/image_pool.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "server/request_options.h"
#include "server/scheduler.h"

namespace cedar::server {

struct ServerConfig {
  std::string model_name = "deepseek-v4-flash";  // GET /v1/models; any requested name is served
  std::string model_path;                        // what was loaded (GET /props)
  std::string version;                           // cedar's version (GET /version, /props)
  // The sampling of a request that sets none: the checkpoint's generation_config.json under the
  // flags (--temp, --top-p, --top-k, --min-p)
  SamplingOptions sampling;
  std::string sampling_source;  // "generation_config.json", "flags", ... ("": the built-in values)
  std::string api_key;          // "" = no authentication
  bool test_hooks = false;      // honour cedar_test_output
  int keepalive_ms = 2000;      // SSE keep-alive / non-streaming newline period
  // --request-timeout: seconds from arrival after which a generation is ended as an error
  // (0: none); checked every keep-alive period
  int64_t request_timeout_s = 0;
  size_t max_body_bytes = 16u << 20;  // larger request bodies get a 413
  // max_tokens of a request that sets none (0: until the context is full). Without a cap a
  // request that forgot it holds its slot through the whole 1M context.
  int64_t default_max_tokens = runtime::kDefaultMaxTokens;
  bool prefix_cache = false;                // reported by /health
  LogFormat log_format = LogFormat::kText;  // the request log on stderr
  // CORS (--cors): the origins browsers may call from, comma-separated ("*": any); "" = no CORS
  // headers, and cross-origin requests are refused (server/origin_policy.h)
  std::string cors_origin;
  // --allowed-hosts: Host names served besides loopback names and IP literals ("*": any)
  std::vector<std::string> allowed_hosts;
  ImagePoolOptions images;  // image decoding: threads, pixel budget, per-request cap
};

struct ApiContext {
  runtime::Engine& engine;
  Scheduler& scheduler;
  Metrics& metrics;
  const ServerConfig& cfg;
  ImagePool& images;  // decodes the requests' images
  // The request being prepared: whether its client has left (its images stop decoding then).
  std::function<bool()> client_gone;
};

// A request ready for the scheduler plus what the front end needs to answer it.
struct PreparedRequest {
  JobSpec spec;
  RequestOptions opts;
  bool thinking = false;
  std::string id;     // chatcmpl-…, cmpl-…, msg_…, resp_…
  std::string model;  // the requested model name, echoed back
  int64_t created = 0;
};

// prefix + 24 random hex digits.
std::string new_id(std::string_view prefix);
int64_t unix_time();

// The longest "model" a request may name (it is echoed back in every chunk of the answer).
inline constexpr size_t kMaxModelNameBytes = 256;

// The "model" field: absent or null means the served model (`served`); else a non-empty string of
// at most kMaxModelNameBytes (400 otherwise), echoed back as the client named it.
std::string request_model(const ojson& body, const std::string& served);

// Helpers of the request conversions (Anthropic, Responses), whose 400s name the field at fault:
// "base[i]"; the string field `key` of o (a 400 naming where.key when it is not one); the "type"
// of a content block or item (a 400 when b is not an object with a string type).
std::string indexed(const std::string& base, size_t i);
const std::string& string_field(const ojson& o, const char* key, const std::string& where);
const std::string& block_type(const ojson& b, const std::string& where);

// A chat request's prompt, rendered, with its images (image_url parts: base64 data URLs)
// decoded and preprocessed on ctx.images and its placeholders expanded to their spans, which
// go to spec->images and spec->identity: what prepare_chat queues and Anthropic count_tokens
// counts, so that both count and refuse images alike. Throws ApiError / text::RequestError.
runtime::Prompt render_chat_prompt(const ApiContext& ctx, const text::ChatRequest& req,
                                   JobSpec* spec);

// Chat Completions body (possibly converted from another API) -> JobSpec. `tool_id_prefix`:
// tool-call ids are prefix + index. Throws ApiError / text::RequestError; what cannot be honoured
// goes to `warn`.
PreparedRequest prepare_chat(const ApiContext& ctx, const ojson& body, std::string id,
                             std::string tool_id_prefix, OptionNames names = {},
                             const Warn& warn = {});
// FIM / plain completions body (prompt [+ suffix]) -> JobSpec (raw text out, no parsing).
PreparedRequest prepare_completion(const ApiContext& ctx, const ojson& body, std::string id);

// One API's wire format for a completion.
class StreamFormat {
 public:
  virtual ~StreamFormat() = default;
  // Appends the SSE frames for one event to *out. For kDone, `outcome` is the final outcome.
  virtual void event(const CompletionEvent& e, const Outcome* outcome, std::string* out) = 0;
  // The non-streaming body of a finished completion.
  virtual ojson body(const Outcome& o) const = 0;
  // The error body when generation failed (non-streaming): status 500.
  virtual ApiFlavor flavor() const { return ApiFlavor::kOpenAI; }
};

}  // namespace cedar::server
