#include "server/api_common.h"

#include <chrono>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/prompt_images.h"
#include "server/data_url.h"
#include "text/chat_request.h"
#include "vision/image_decode.h"

namespace cedar::server {

std::string new_id(std::string_view prefix) {
  static thread_local std::mt19937_64 rng(
      std::random_device{}() ^
      uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
  static const char* hex = "0123456789abcdef";
  std::string s(prefix);
  for (int i = 0; i < 24; ++i) s += hex[rng() & 15];
  return s;
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string request_model(const ojson& body, const std::string& served) {
  if (!body.is_object()) throw ApiError(400, "request body must be a JSON object");
  const auto it = body.find("model");
  if (it == body.end() || it->is_null()) return served;  // one model: naming it is optional
  if (!it->is_string() || it->get_ref<const std::string&>().empty())
    throw ApiError(400, "model must be a non-empty string (or left out: the served model)",
                   "model");
  // the name is echoed in every streamed chunk: a long one would multiply the answer's size
  const std::string& name = it->get_ref<const std::string&>();
  if (name.size() > kMaxModelNameBytes)
    throw ApiError(400,
                   "model is " + std::to_string(name.size()) + " bytes long; at most " +
                       std::to_string(kMaxModelNameBytes) + " are accepted",
                   "model");
  return name;
}

std::string indexed(const std::string& base, size_t i) {
  return base + "[" + std::to_string(i) + "]";
}

const std::string& string_field(const ojson& o, const char* key, const std::string& where) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_string())
    throw ApiError(400, where + "." + key + ": Field required (a string)", where + "." + key);
  return it->get_ref<const std::string&>();
}

const std::string& block_type(const ojson& b, const std::string& where) {
  const auto it = b.is_object() ? b.find("type") : b.end();
  if (!b.is_object() || it == b.end() || !it->is_string())
    throw ApiError(400, where + " must be an object with a string \"type\"", where);
  return it->get_ref<const std::string&>();
}

namespace {

void check_fits(int64_t prompt_tokens, int64_t ctx) {
  if (prompt_tokens >= ctx)
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(ctx) +
                       " tokens. However, your request has " + std::to_string(prompt_tokens) +
                       " prompt tokens, which leaves no room for a completion. Please "
                       "reduce the length of the messages.",
                   "messages");
}

runtime::SamplingParams sampling_of(const SamplingOptions& s) {
  runtime::SamplingParams p;
  p.temperature = s.temperature;
  p.top_p = s.top_p;
  p.top_k = s.top_k;
  p.min_p = s.min_p;
  p.frequency_penalty = s.frequency_penalty;
  p.presence_penalty = s.presence_penalty;
  // No seed: a fresh one per request (OpenAI semantics); with a seed, reproducible.
  p.seed =
      s.seed ? *s.seed : std::random_device{}() * 0x9E3779B97F4A7C15ull + uint64_t(unix_time());
  return p;
}

void finish_spec(const ApiContext& ctx, PreparedRequest* r) {
  const int64_t T = int64_t(r->spec.prompt.size());
  check_fits(T, ctx.scheduler.ctx_size());
  // max_tokens larger than what is left of the context is clamped: generation ends with
  // finish_reason "length" when the context is full (docs/SERVER.md).
  r->spec.max_tokens = r->opts.max_tokens ? *r->opts.max_tokens : ctx.cfg.default_max_tokens;
  r->spec.sampling = sampling_of(r->opts.sampling);
  r->spec.setup.stop = r->opts.stop;
  r->spec.top_logprobs = r->opts.logprobs ? r->opts.top_logprobs : -1;
  if (r->opts.test_output) {
    const auto& tok = ctx.engine.tokenizer();
    std::vector<int32_t> ids = tok.encode(*r->opts.test_output, /*allow_special=*/true);
    // The forced completion ends like a sampled one: with EOS unless it ends with a stop token.
    if (ids.empty() || !ctx.engine.is_stop_token(ids.back()))
      ids.push_back(ctx.engine.stop_token_ids().at(0));
    r->spec.forced = std::move(ids);
  }
}

}  // namespace

namespace {

// The request's images (image_url parts: data URLs only; the server never fetches a URL): each
// decoded and preprocessed under the server's pixel budget, the prompt's placeholders expanded to
// their spans. A bad image, a URL that is not a base64 data URL or a model without a vision tower
// is a 400; a spent budget a 503 (server/image_pool.h).
void attach_request_images(const ApiContext& ctx, runtime::Prompt* p, JobSpec* spec) {
  if (p->images.empty()) return;
  if (!ctx.engine.config().has_vision)
    throw ApiError(400,
                   "the request holds an image but this model has no vision tower; send text "
                   "only or serve a model with one",
                   "messages");
  std::vector<std::string> bytes;
  for (size_t k = 0; k < p->images.size(); ++k) {
    auto b = decode_data_url(p->images[k]);
    if (!b)
      throw ApiError(400,
                     "image " + std::to_string(k) +
                         ": only base64 data URLs (data:image/png;base64,...) are accepted; this "
                         "server does not fetch image URLs",
                     "messages");
    bytes.push_back(std::move(*b));
  }
  auto patches = ctx.images.preprocess(vision::geometry_of(ctx.engine.config().vision),
                                       std::move(bytes), ctx.client_gone);
  try {
    spec->images = attach_patches(ctx.engine.config(), &p->ids, std::move(patches));
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, e.what(), "messages");
  }
  spec->identity = identity_ids(p->ids, spec->images);
}

// response_format json_object / json_schema -> the schema the answer is constrained to (the
// parser has validated the shape; the prompt also carries the format, as the release does).
std::shared_ptr<const text::JsonSchema> response_schema(const ojson& body) {
  const auto it = body.find("response_format");
  if (it == body.end() || !it->is_object()) return nullptr;
  const std::string type = it->value("type", "");
  if (type == "json_object")
    return std::make_shared<text::JsonSchema>(text::JsonSchema::any_object());
  if (type != "json_schema") return nullptr;
  const auto js = it->find("json_schema");
  if (js == it->end() || !js->is_object() || !js->contains("schema"))
    throw ApiError(400, "response_format.json_schema.schema is required", "response_format");
  return std::make_shared<text::JsonSchema>(
      text::JsonSchema::compile((*js)["schema"], "response_format.json_schema.schema"));
}

// Tool calls: when the request offers tools, the calls block the model writes is constrained to
// them (text/dsml_grammar.h): to their schemas when the request forces a call (tool_choice
// "required" or a named tool: the answer is the block, so a response_format no longer applies)
// or for tools marked "strict": true, else to their names. Under "auto" a response_format
// constrains the answer instead (one constraint per answer).
void choose_tool_constraint(const text::ChatRequest& req, JobSpec* spec, const Warn& warn) {
  if (req.tools.empty()) return;
  const bool forced =
      req.tool_choice == text::ToolChoice::kRequired || req.tool_choice == text::ToolChoice::kNamed;
  if (!forced && spec->json_schema) return;
  bool strict = false;
  for (const auto& f : req.tools) {
    const auto it = f.find("strict");
    strict |= it != f.end() && it->is_boolean() && it->get<bool>();
  }
  try {
    spec->tool_grammar =
        std::make_shared<text::ToolGrammar>(text::ToolGrammar::compile(req.tools, forced));
  } catch (const text::RequestError& e) {
    if (strict) throw;  // the client asked for enforcement: say why it cannot be had
    warn_once(warn, "tool-constraint:" + e.param(),
              std::string("tool calls are not constrained for requests with these tools: ") +
                  e.what() + " (" + e.param() + ")");
    return;
  }
  spec->json_schema = nullptr;
}

}  // namespace

runtime::Prompt render_chat_prompt(const ApiContext& ctx, const text::ChatRequest& req,
                                   JobSpec* spec) {
  runtime::Prompt p;
  try {
    p = ctx.engine.render_chat(req);
  } catch (const text::RequestError&) {
    throw;
  } catch (const std::exception& e) {
    throw ApiError(400, std::string("cannot encode the messages: ") + e.what(), "messages");
  }
  attach_request_images(ctx, &p, spec);
  return p;
}

PreparedRequest prepare_chat(const ApiContext& ctx, const ojson& body, std::string id,
                             std::string tool_id_prefix, OptionNames names, const Warn& warn) {
  PreparedRequest r;
  r.model = request_model(body, ctx.cfg.model_name);
  r.id = std::move(id);
  r.created = unix_time();
  r.opts = parse_request_options(body, ctx.cfg.test_hooks, names, ctx.cfg.sampling);
  const text::ChatRequest req = text::parse_chat_request(body);
  r.spec.json_schema = response_schema(body);
  choose_tool_constraint(req, &r.spec, warn);
  runtime::Prompt p = render_chat_prompt(ctx, req, &r.spec);
  r.thinking = p.start == text::GenerationStart::kReasoning || req.thinking;
  r.spec.prompt = std::move(p.ids);
  r.spec.setup.parser.start = p.start;
  r.spec.setup.parser.tools = req.tools;
  // DSML is parsed as tool calls only when tools are offered (tool_choice "none" drops them).
  r.spec.setup.parser.parse_tool_calls = !req.tools.empty();
  r.spec.setup.parser.id_prefix = std::move(tool_id_prefix);
  finish_spec(ctx, &r);
  return r;
}

PreparedRequest prepare_completion(const ApiContext& ctx, const ojson& body, std::string id) {
  PreparedRequest r;
  r.model = request_model(body, ctx.cfg.model_name);
  r.id = std::move(id);
  r.created = unix_time();
  OptionNames names;
  names.legacy_logprobs = true;
  r.opts = parse_request_options(body, ctx.cfg.test_hooks, names, ctx.cfg.sampling);
  if (body.contains("messages"))
    throw ApiError(400,
                   "/v1/completions takes \"prompt\" (and \"suffix\"), not \"messages\": "
                   "use /v1/chat/completions",
                   "messages");
  if (const auto it = body.find("echo"); it != body.end() && it->is_boolean() && it->get<bool>())
    throw ApiError(400, "echo is not supported", "echo");
  runtime::Prompt p;
  try {
    p = ctx.engine.render_request(body);  // FIM layout with a suffix, BOS + prompt without
  } catch (const text::RequestError&) {
    throw;
  } catch (const std::exception& e) {
    throw ApiError(400, std::string("cannot encode the prompt: ") + e.what(), "prompt");
  }
  r.spec.prompt = std::move(p.ids);
  r.spec.setup.raw = true;
  finish_spec(ctx, &r);
  return r;
}

}  // namespace cedar::server
