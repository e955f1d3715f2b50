#include "text/engram_token_map.h"

#include <utf8proc.h>

#include <cstdlib>
#include <stdexcept>
#include <unordered_map>

#include "text/sha256.h"
#include "text/utf8.h"

namespace cedar::text {
namespace {

constexpr char32_t kSentinel = 0xE000;  // private use, as in engram.py

std::string utf8proc_apply(std::string_view s, utf8proc_option_t options, const char* what) {
  utf8proc_uint8_t* dst = nullptr;
  // An explicit length (no UTF8PROC_NULLTERM) so that a NUL character is processed, not an end.
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &dst, options);
  if (n < 0) {
    throw std::runtime_error(std::string("engram normaliser: ") + what +
                             " failed: " + utf8proc_errmsg(n));
  }
  std::string out(reinterpret_cast<const char*>(dst), static_cast<std::size_t>(n));
  std::free(dst);
  return out;
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t c;
    const std::size_t n = utf8_decode(s, i, &c);
    if (n == 0) throw std::runtime_error("engram normaliser: invalid UTF-8");
    out += c;
    i += n;
  }
  return out;
}

// Rust char::is_whitespace: the Unicode White_Space property.
bool is_white_space(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_mark(char32_t c) {
  const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

// Rust char::to_lowercase (full mapping, no context). utf8proc gives the simple mapping; the only
// unconditional multi-character lowercase in SpecialCasing.txt is U+0130.
void append_lowercase(char32_t c, std::u32string* out) {
  if (c == 0x130) {
    *out += U'i';
    *out += char32_t{0x307};
    return;
  }
  *out += static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

}  // namespace

std::string engram_normalize(std::string_view text) {
  // NFKC, then NFD (engram.py applies both, in this order).
  const std::string nfkc = utf8proc_apply(
      text, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT),
      "NFKC");
  const std::string nfd = utf8proc_apply(
      nfkc, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE), "NFD");

  // StripAccents (all marks), then Lowercase.
  std::u32string s;
  for (char32_t c : to_u32(nfd)) {
    if (!is_mark(c)) append_lowercase(c, &s);
  }

  // Replace(Regex("[ \t\r\n]+"), " ")
  std::u32string r;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t c = s[i];
    if (c == U' ' || c == U'\t' || c == U'\r' || c == U'\n') {
      r += U' ';
      while (i < s.size() && (s[i] == U' ' || s[i] == U'\t' || s[i] == U'\r' || s[i] == U'\n')) ++i;
    } else {
      r += c;
      ++i;
    }
  }
  // Replace(Regex("^ $"), sentinel): after the step above no '\n' is left, so Oniguruma's line
  // anchors can only match the whole string.
  if (r == U" ") r = std::u32string(1, kSentinel);
  // Strip (both sides, White_Space), then Replace(sentinel, " ") — which also turns a U+E000 that
  // was in the token itself into a space, exactly like the reference.
  std::size_t b = 0, e = r.size();
  while (b < e && is_white_space(r[b])) ++b;
  while (e > b && is_white_space(r[e - 1])) --e;
  std::string out;
  for (std::size_t i = b; i < e; ++i) utf8_append(out, r[i] == kSentinel ? U' ' : r[i]);
  return out;
}

EngramTokenMap build_engram_token_map(const Tokenizer& tok) {
  static const std::string kReplacementUtf8 = "\xEF\xBF\xBD";
  EngramTokenMap m;
  const int32_t n = tok.vocab_size();
  m.map.resize(n);
  std::unordered_map<std::string, int32_t> key_to_id;
  key_to_id.reserve(n);
  std::string bytes;
  for (int32_t id = 0; id < n; ++id) {
    bytes.clear();
    tok.append_token_bytes(id, &bytes);
    const std::string text = utf8_lossy(bytes);
    std::string key;
    if (text.find(kReplacementUtf8) != std::string::npos) {
      key = tok.id_to_token(id);  // a partial UTF-8 byte token: key by its raw spelling
    } else {
      key = engram_normalize(text);
      if (key.empty()) key = text;
    }
    auto [it, inserted] = key_to_id.emplace(std::move(key), static_cast<int32_t>(key_to_id.size()));
    m.map[id] = it->second;
  }
  m.n_ids = static_cast<int64_t>(key_to_id.size());
  return m;
}

std::string engram_token_map_sha256(const std::vector<int32_t>& map) {
  Sha256 h;
  for (int32_t v : map) {
    const auto u = static_cast<uint32_t>(v);
    const uint8_t le[4] = {static_cast<uint8_t>(u), static_cast<uint8_t>(u >> 8),
                           static_cast<uint8_t>(u >> 16), static_cast<uint8_t>(u >> 24)};
    h.update(le, 4);
  }
  return to_hex(h.digest());
}

}  // namespace cedar::text
