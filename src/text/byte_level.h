// The GPT-2 / Hugging Face ByteLevel mapping: every byte 0..255 is spelled as one printable
// Unicode character so that BPE vocabularies are strings. Printable Latin-1 bytes map to
// themselves; the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) map to U+0100.. in order.
// ref: tokenizers pre_tokenizers/byte_level.rs bytes_char
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace cedar::text {

// The character that spells byte b.
char32_t byte_to_char(unsigned char b);

// The byte a ByteLevel character stands for, or -1 if c is not one of the 256 characters.
int char_to_byte(char32_t c);

// Spells raw bytes as a ByteLevel string (UTF-8 of the mapped characters).
std::string bytes_to_byte_level(std::string_view bytes);

// Inverse of bytes_to_byte_level. Returns false (out unspecified) if `token` is not well-formed
// UTF-8 or holds a character outside the 256-character alphabet.
bool byte_level_to_bytes(std::string_view token, std::string* out);

}  // namespace cedar::text
