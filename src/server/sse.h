// Server-sent events framing (v41-interface.md §5.4): `data: <json>\n\n` frames ending with
// `data: [DONE]\n\n` (Chat Completions), `event: <type>\ndata: <json>\n\n` (Anthropic, Responses),
// and `: keep-alive` comment frames that keep a connection alive while a request waits or prefills.
#pragma once

#include <string>
#include <string_view>

#include "text/dsml.h"

namespace cedar::server {

// Compact JSON, non-ASCII kept raw, invalid UTF-8 replaced by U+FFFD (never throws).
std::string json_text(const text::ojson& j);

std::string sse_data(const text::ojson& j);
std::string sse_event(std::string_view type, const text::ojson& j);
std::string sse_comment(std::string_view text);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace cedar::server
