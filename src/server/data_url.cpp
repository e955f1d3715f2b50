#include "server/data_url.h"

#include <cstdint>

namespace cedar::server {

namespace {

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

}  // namespace

std::optional<std::string> decode_data_url(std::string_view url) {
  if (url.size() < 5 || url.substr(0, 5) != "data:") return std::nullopt;
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const std::string_view meta = url.substr(5, comma - 5);
  if (meta.size() < 7 || meta.substr(meta.size() - 7) != ";base64") return std::nullopt;
  std::string out;
  out.reserve((url.size() - comma) / 4 * 3);
  uint32_t acc = 0;
  int bits = 0, pad = 0;
  for (const char c : url.substr(comma + 1)) {
    if (is_space(c)) continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    const int v = sextet(c);
    if (v < 0 || pad > 0) return std::nullopt;  // a bad character, or data after the padding
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xFF));
    }
  }
  // what is left must be the zero bits of a final partial group, with padding to a multiple of 4
  // (or none at all)
  if (bits >= 6 || pad > 2 || (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  if (pad > 0 && (bits / 2) != pad) return std::nullopt;
  return out;
}

}  // namespace cedar::server
