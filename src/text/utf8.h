// UTF-8 helpers for the text layer: strict decoding, validation, and the lossy conversion that
// Rust's String::from_utf8_lossy performs (which is what Hugging Face `tokenizers` returns from
// decode, and what the Engram token map keys on).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cedar::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the well-formed UTF-8 sequence starting at s[i] into *cp and returns its length (1..4).
// Returns 0 if s[i] does not start a well-formed sequence (bad lead byte, bad or missing
// continuation byte, overlong form, surrogate, > U+10FFFF).
std::size_t utf8_decode(std::string_view s, std::size_t i, char32_t* cp);

// Length of the "maximal subpart" at s[i] (Unicode §3.9, the W3C/WHATWG and Rust rule): the
// longest prefix of a well-formed sequence that s[i..] starts with, at least 1. Used when s[i]
// does not start a well-formed sequence: those bytes become one U+FFFD.
std::size_t utf8_maximal_subpart(std::string_view s, std::size_t i);

// True if s is well-formed UTF-8; otherwise *error_offset (if given) is the first bad byte.
bool utf8_valid(std::string_view s, std::size_t* error_offset = nullptr);

// Appends the UTF-8 encoding of cp (which must be a Unicode scalar value).
void utf8_append(std::string& out, char32_t cp);

// Rust String::from_utf8_lossy: each maximal ill-formed subpart becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Number of bytes at the end of `bytes` that form an incomplete but so far well-formed sequence
// (a character split across two decode calls), 0..3.
std::size_t utf8_incomplete_tail(std::string_view bytes);

}  // namespace cedar::text
