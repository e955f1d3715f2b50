#include "text/byte_level.h"

#include <unordered_map>

#include "text/utf8.h"

namespace cedar::text {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8;
  std::unordered_map<char32_t, int> to_byte;

  Tables() {
    // Bytes that are printable stay themselves: '!'..'~', '¡'..'¬', '®'..'ÿ'.
    auto kept = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_char[b] = kept(b) ? static_cast<char32_t>(b) : next++;
      utf8_append(to_utf8[b], to_char[b]);
      to_byte[to_char[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) { return tables().to_char[b]; }

int char_to_byte(char32_t c) {
  const auto& m = tables().to_byte;
  auto it = m.find(c);
  return it == m.end() ? -1 : it->second;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  const auto& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += t.to_utf8[b];
  return out;
}

bool byte_level_to_bytes(std::string_view token, std::string* out) {
  out->clear();
  std::size_t i = 0;
  while (i < token.size()) {
    char32_t c;
    const std::size_t n = utf8_decode(token, i, &c);
    if (n == 0) return false;
    // All 256 characters are below U+0144, so a table lookup would also do; the map keeps this
    // independent of that fact.
    const int b = char_to_byte(c);
    if (b < 0) return false;
    *out += static_cast<char>(b);
    i += n;
  }
  return true;
}

}  // namespace cedar::text
