// Untrusted JSON (request bodies, tool arguments a client or the model wrote, request files) is
// checked for nesting depth before it is parsed. nlohmann's values are trees that its own
// destructor, copies and dump() -- and our prompt printer -- walk recursively, so 50,000 levels
// of brackets in a 100 KB body would overflow the stack; no request needs more than a few dozen.
#pragma once

#include <string>
#include <string_view>

#include "text/dsml.h"

namespace cedar::text {

// The deepest nesting of arrays and objects any client request may carry (llama.cpp's server
// and most JSON libraries with a limit use 100-1000; JSON schemas of real tools stay under 20).
inline constexpr int kMaxJsonDepth = 128;

// The nesting depth of the arrays and objects in `text` (brackets inside strings do not count),
// or limit + 1 as soon as it passes `limit`. Linear, no recursion; does not validate the text.
int json_nesting_depth(std::string_view text, int limit = kMaxJsonDepth);

// ojson::parse of untrusted text, never recursing past `max_depth`: a discarded value when the
// text is not JSON or nests deeper, with *error (when given) saying which and where.
ojson parse_untrusted_json(std::string_view text, std::string* error = nullptr,
                           int max_depth = kMaxJsonDepth);

}  // namespace cedar::text
