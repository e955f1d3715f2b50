#include "text/utf8.h"

namespace cedar::text {
namespace {

// Expected sequence length for a lead byte, 0 for bytes that can never start one.
int lead_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Valid range of the second byte given the lead (excludes overlongs, surrogates, > U+10FFFF).
bool second_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

// How many bytes of a well-formed sequence s[i..] matches (the sequence may be cut short by the
// end of s); *need is the full length the lead byte announces (0 for an invalid lead).
std::size_t valid_prefix(std::string_view s, std::size_t i, int* need) {
  const auto lead = static_cast<unsigned char>(s[i]);
  *need = lead_length(lead);
  if (*need == 0) return 0;
  std::size_t k = 1;
  while (k < static_cast<std::size_t>(*need) && i + k < s.size()) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? second_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++k;
  }
  return k;
}

}  // namespace

std::size_t utf8_decode(std::string_view s, std::size_t i, char32_t* cp) {
  int need = 0;
  const std::size_t k = valid_prefix(s, i, &need);
  if (need == 0 || k != static_cast<std::size_t>(need)) return 0;
  const auto b0 = static_cast<unsigned char>(s[i]);
  char32_t c;
  if (need == 1) {
    c = b0;
  } else if (need == 2) {
    c = b0 & 0x1F;
  } else if (need == 3) {
    c = b0 & 0x0F;
  } else {
    c = b0 & 0x07;
  }
  for (int j = 1; j < need; ++j) c = (c << 6) | (static_cast<unsigned char>(s[i + j]) & 0x3F);
  *cp = c;
  return k;
}

std::size_t utf8_maximal_subpart(std::string_view s, std::size_t i) {
  int need = 0;
  const std::size_t k = valid_prefix(s, i, &need);
  return k == 0 ? 1 : k;
}

bool utf8_valid(std::string_view s, std::size_t* error_offset) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    char32_t cp;
    const std::size_t n = utf8_decode(s, i, &cp);
    if (n == 0) {
      if (error_offset) *error_offset = i;
      return false;
    }
    i += n;
  }
  return true;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    char32_t cp;
    const std::size_t n = utf8_decode(bytes, i, &cp);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      utf8_append(out, kReplacementChar);
      i += utf8_maximal_subpart(bytes, i);
    }
  }
  return out;
}

std::size_t utf8_incomplete_tail(std::string_view bytes) {
  // A split character has its lead byte within the last 3 bytes.
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const std::size_t i = n - back;
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation byte: keep looking for the lead
    int need = 0;
    const std::size_t k = valid_prefix(bytes, i, &need);
    // Incomplete: a valid lead whose well-formed prefix runs to the end but is short.
    if (need > 1 && k == back && k < static_cast<std::size_t>(need)) return back;
    return 0;
  }
  return 0;
}

}  // namespace cedar::text
