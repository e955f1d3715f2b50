// The string formats constrained decoding enforces ("format": date, time, date-time, email,
// hostname, ipv4, ipv6, uuid, uri), each as a pattern (text/regex_automaton.h) and a length bound.
// Each pattern accepts a subset of what the format's RFC allows -- the plain, common spelling --
// so that every string written is valid for a validator of the format (ajv-formats' "full" mode
// included: no February 29th, no leap seconds, a time zone on every time). Other format names
// are annotations to us and are not enforced (JSON Schema leaves format assertion optional).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cedar::text {

struct JsonFormat {
  std::string pattern;  // anchored at both ends
  uint32_t max_length;  // in code points (UINT32_MAX: none)
};

// The format's pattern, or nullptr when the format is not enforced.
const JsonFormat* find_format(std::string_view name);

}  // namespace cedar::text
