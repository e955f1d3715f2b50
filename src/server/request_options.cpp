#include "server/request_options.h"

#include <cmath>

namespace cedar::server {

namespace {

std::optional<double> number(const ojson& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw ApiError(400, std::string(key) + " must be a number", key);
  const double v = it->get<double>();
  if (!std::isfinite(v)) throw ApiError(400, std::string(key) + " must be finite", key);
  return v;
}

std::optional<int64_t> integer(const ojson& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) throw ApiError(400, std::string(key) + " must be an integer", key);
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX))
    throw ApiError(400, std::string(key) + " is too large", key);
  return it->get<int64_t>();
}

bool boolean(const ojson& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw ApiError(400, std::string(key) + " must be a boolean", key);
  return it->get<bool>();
}

void check_range(std::optional<double> v, double lo, double hi, const char* key, bool lo_open,
                 const std::string& text) {
  if (!v) return;
  if (*v > hi || *v < lo || (lo_open && *v == lo)) throw ApiError(400, text, key);
}

}  // namespace

RequestOptions parse_request_options(const ojson& body, bool test_hooks, OptionNames names,
                                     const SamplingOptions& defaults) {
  if (!body.is_object()) throw ApiError(400, "request body must be a JSON object");
  RequestOptions o;
  o.sampling = defaults;
  SamplingOptions& s = o.sampling;

  const auto temperature = number(body, "temperature");
  check_range(temperature, 0, 2, "temperature", false, "temperature must be in [0, 2]");
  if (temperature) s.temperature = *temperature;
  const auto top_p = number(body, "top_p");
  check_range(top_p, 0, 1, "top_p", true, "top_p must be in (0, 1]");
  if (top_p) s.top_p = *top_p;
  const auto fp = number(body, "frequency_penalty");
  check_range(fp, -2, 2, "frequency_penalty", false, "frequency_penalty must be in [-2, 2]");
  if (fp) s.frequency_penalty = *fp;
  const auto pp = number(body, "presence_penalty");
  check_range(pp, -2, 2, "presence_penalty", false, "presence_penalty must be in [-2, 2]");
  if (pp) s.presence_penalty = *pp;
  const auto min_p = number(body, "min_p");
  check_range(min_p, 0, 1, "min_p", false, "min_p must be in [0, 1]");
  if (min_p) s.min_p = *min_p;
  if (const auto k = integer(body, "top_k")) {
    if (*k < 0 || *k > 1000000) throw ApiError(400, "top_k must be in [0, 1000000]", "top_k");
    s.top_k = int(*k);
  }
  if (const auto seed = integer(body, "seed")) s.seed = uint64_t(*seed);

  // max_tokens (Chat Completions also has max_completion_tokens; the smaller one wins).
  for (const char* key : {names.max_tokens, "max_completion_tokens"}) {
    if (const auto m = integer(body, key)) {
      if (*m <= 0) throw ApiError(400, std::string(key) + " must be greater than zero", key);
      o.max_tokens = o.max_tokens ? std::min(*o.max_tokens, *m) : *m;
    }
  }

  if (const auto it = body.find("logprobs");
      names.legacy_logprobs && it != body.end() && it->is_number()) {
    // the legacy Completions form: the number of alternatives per token
    const auto n = integer(body, "logprobs");
    if (!n || *n < 0 || *n > 5) throw ApiError(400, "logprobs must be in [0, 5]", "logprobs");
    o.logprobs = true;
    o.top_logprobs = int(*n);
  } else {
    o.logprobs = boolean(body, "logprobs");
  }
  if (const auto t = integer(body, "top_logprobs"); t && !names.legacy_logprobs) {
    if (*t < 0 || *t > 20) throw ApiError(400, "top_logprobs must be in [0, 20]", "top_logprobs");
    if (!o.logprobs)
      throw ApiError(400, "top_logprobs requires logprobs to be true", "top_logprobs");
    o.top_logprobs = int(*t);
  }

  if (const auto n = integer(body, "n"); n && *n != 1)
    throw ApiError(400, "Invalid n value (currently only n = 1 is supported)", "n");

  if (const auto it = body.find(names.stop); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      o.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 16)
        throw ApiError(
            400, "ChatCompletionStopSequences string array too long: " + std::to_string(it->size()),
            names.stop);
      for (const auto& v : *it) {
        if (!v.is_string())
          throw ApiError(400, std::string(names.stop) + " must be a string or an array of strings",
                         names.stop);
        o.stop.push_back(v.get<std::string>());
      }
    } else {
      throw ApiError(400, std::string(names.stop) + " must be a string or an array of strings",
                     names.stop);
    }
    for (const auto& st : o.stop)
      if (st.empty())
        throw ApiError(400, std::string(names.stop) + " must not contain empty strings",
                       names.stop);
  }

  o.stream = boolean(body, "stream");
  if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!o.stream)
      throw ApiError(400, "stream_options should be set along with stream = true",
                     "stream_options");
    if (!it->is_object()) throw ApiError(400, "stream_options must be an object", "stream_options");
    o.include_usage = boolean(*it, "include_usage");
  }

  if (const auto it = body.find(kTestOutputField); it != body.end() && !it->is_null()) {
    if (!test_hooks)
      throw ApiError(400,
                     std::string(kTestOutputField) +
                         " is a test hook: start the server with --enable-test-hooks to use it",
                     kTestOutputField);
    if (!it->is_string())
      throw ApiError(400, std::string(kTestOutputField) + " must be a string", kTestOutputField);
    o.test_output = it->get<std::string>();
  }
  return o;
}

}  // namespace cedar::server
