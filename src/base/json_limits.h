// Untrusted JSON (request bodies, tool arguments a client or the model wrote, request files,
// checkpoint headers and configs) is checked for nesting depth before it is parsed. nlohmann's
// values are trees that its own destructor, copies and dump() -- and our prompt printer -- walk
// recursively, so 50,000 levels of brackets in a 100 KB body would overflow the stack; no request
// needs more than a few dozen.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cedar {

// The deepest nesting of arrays and objects untrusted JSON may have (request bodies nest a few
// levels, the JSON schemas of real tools rarely more than ten).
inline constexpr int kMaxJsonDepth = 128;

// A model's tokenizer.json is read whole: a larger file is refused before it is read (the
// DeepSeek tokenizer's is 6 MiB).
inline constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t(256) << 20;

// The nesting depth of the arrays and objects in `text` (brackets inside strings do not count),
// or limit + 1 as soon as it passes `limit`. Linear, no recursion; does not validate the text.
int json_nesting_depth(std::string_view text, int limit = kMaxJsonDepth);

// ojson::parse of untrusted text, never recursing past `max_depth`: a discarded value when the
// text is not JSON or nests deeper, with *error (when given) saying which and where.
nlohmann::ordered_json parse_untrusted_json(std::string_view text, std::string* error = nullptr,
                                            int max_depth = kMaxJsonDepth);

}  // namespace cedar
