// Untrusted JSON (request bodies, tool arguments a client or the model wrote, request files,
// checkpoint headers and configs) is checked for its shape before it is parsed:
//  - nesting depth: nlohmann's values are trees that its own destructor, copies and dump() -- and
//    our prompt printer -- walk recursively, so 50,000 levels of brackets in a 100 KB body would
//    overflow the stack; no request needs more than a few dozen;
//  - keys per object and bytes per key: an ordered_json object is a vector searched from the
//    start on every insertion, so parsing n keys costs n^2/2 key comparisons (a 1.2 MB body with
//    100,000 keys took 13 s of CPU). The bounds keep the worst object to about half a million
//    comparisons of at most 1 KB.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cedar {

// The deepest nesting of arrays and objects untrusted JSON may have (request bodies nest a few
// levels, the JSON schemas of real tools rarely more than ten).
inline constexpr int kMaxJsonDepth = 128;
// The most keys one object may have (tool schemas have tens, OpenAI caps metadata at 16 and
// logit_bias is a few hundred tokens at most in practice) and the longest key in bytes.
inline constexpr size_t kMaxJsonObjectKeys = 1024;
inline constexpr size_t kMaxJsonKeyBytes = 1024;

struct JsonLimits {
  int max_depth = kMaxJsonDepth;
  size_t max_object_keys = kMaxJsonObjectKeys;
  size_t max_key_bytes = kMaxJsonKeyBytes;
};

// A model's tokenizer.json is read whole: a larger file is refused before it is read (the
// DeepSeek tokenizer's is 6 MiB).
inline constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t(256) << 20;

// The nesting depth of the arrays and objects in `text` (brackets inside strings do not count),
// or limit + 1 as soon as it passes `limit`. Linear, no recursion; does not validate the text.
int json_nesting_depth(std::string_view text, int limit = kMaxJsonDepth);

// "" when `text` stays within `limits`, else which limit it passes and where (the keys that lead
// to the object, e.g. `logit_bias` or `tools[].parameters.properties`). Linear in the text, no
// recursion; does not validate the text.
std::string json_limit_violation(std::string_view text, const JsonLimits& limits = {});

// ojson::parse of untrusted text within `limits`: a discarded value when the text is not JSON or
// passes a limit, with *error (when given) saying which and where.
nlohmann::ordered_json parse_untrusted_json(std::string_view text, std::string* error = nullptr,
                                            const JsonLimits& limits = {});

}  // namespace cedar
