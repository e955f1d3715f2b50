// The matcher's scalars: strings (JSON escapes decoded before the automata see the bytes: a
// pattern constrains the string's value, not its spelling), numbers and true / false / null.
#include <algorithm>
#include <cstring>

#include "text/json_matcher.h"

namespace cedar::text {

namespace {

bool is_hex(uint8_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
int hex_value(uint8_t c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }
uint32_t low_bits(int n) { return n >= 32 ? ~0u : (1u << n) - 1; }

// Code points len so far (plus what the automaton still needs) can end within [min, max].
bool length_fits(const ByteDfa* d, uint32_t s, uint64_t len, uint32_t min, uint32_t max) {
  if (!d) return len <= max;
  const ByteDfa::State& st = d->state(s);
  return len + st.min_rem <= max && (st.max_rem == ByteDfa::kInf || len + st.max_rem >= min);
}

}  // namespace

// ---- strings ---------------------------------------------------------------------------------

bool JsonMatcher::string_byte(uint8_t c) {
  if (h_.utf8_left > 0) {
    // the first continuation byte of E0/ED/F0/F4 sequences has a narrower range (no overlong
    // forms, no surrogates, nothing above U+10FFFF)
    uint8_t lo = 0x80, hi = 0xBF;
    if (h_.utf8_lead == 0xE0) lo = 0xA0;
    if (h_.utf8_lead == 0xED) hi = 0x9F;
    if (h_.utf8_lead == 0xF0) lo = 0x90;
    if (h_.utf8_lead == 0xF4) hi = 0x8F;
    if (c < lo || c > hi) return false;
    h_.utf8_lead = 0;
    --h_.utf8_left;
    return decoded(c);
  }
  switch (h_.esc) {
    case 0:
      if (c == '"') return string_end();
      if (c == '\\') {
        h_.esc = 1;
        return escape_possible(0, 0x10FFFF);
      }
      if (c < 0x20 || c == 0x7F) return false;
      if (c >= 0x80) {
        if (c >= 0xC2 && c <= 0xDF)
          h_.utf8_left = 1;
        else if (c >= 0xE0 && c <= 0xEF)
          h_.utf8_left = 2;
        else if (c >= 0xF0 && c <= 0xF4)
          h_.utf8_left = 3;
        else
          return false;
        h_.utf8_lead = c;
      }
      return decoded(c);
    case 1: {
      if (c == 'u') {
        h_.esc = 2;
        h_.unit = 0;
        return true;
      }
      static const char kFrom[] = "\"\\/bfnrt";
      static const char kTo[] = "\"\\/\b\f\n\r\t";
      const char* at = c ? std::strchr(kFrom, c) : nullptr;
      if (!at) return false;
      h_.esc = 0;
      return decoded(uint8_t(kTo[at - kFrom]));
    }
    case 6:  // after a high surrogate: its low half must follow
      h_.esc = 7;
      return c == '\\';
    case 7:
      if (c != 'u') return false;
      h_.esc = 2;
      h_.unit = 0;
      h_.low = true;
      return true;
    default:
      break;
  }
  return hex_digit(c);
}

// Hex digit (esc - 1) of a \u escape: the readings some code point with these digits continues
// survive; the last digit decodes it (a high surrogate waits for its low half).
bool JsonMatcher::hex_digit(uint8_t c) {
  if (!is_hex(c)) return false;
  const int k = h_.esc - 1;  // digits read once this one is in
  if (h_.low && ((k == 1 && (c | 0x20) != 'd') || (k == 2 && hex_value(c) < 0xC))) return false;
  h_.unit = uint16_t(h_.unit * 16 + hex_value(c));
  if (k < 4) {
    h_.esc = uint8_t(h_.esc + 1);
    const uint32_t shift = 4 * uint32_t(4 - k);
    return h_.low ||
           escape_possible(uint32_t(h_.unit) << shift, ((uint32_t(h_.unit) + 1) << shift) - 1);
  }
  h_.esc = 0;
  const uint32_t u = h_.unit;
  if (h_.low) {
    h_.low = false;
    return decoded_cp(0x10000 + ((uint32_t(h_.high) - 0xD800) << 10) + (u - 0xDC00));
  }
  if (u >= 0xD800 && u <= 0xDBFF) {
    h_.high = uint16_t(u);
    h_.esc = 6;
    return escape_possible(0x10000, 0x10FFFF);
  }
  if (u >= 0xDC00 && u <= 0xDFFF) return false;  // a lone low surrogate
  return decoded_cp(u);
}

bool JsonMatcher::decoded_cp(uint32_t cp) {
  uint8_t b[4];
  int n;
  if (cp < 0x80) {
    b[0] = uint8_t(cp);
    n = 1;
  } else if (cp < 0x800) {
    b[0] = uint8_t(0xC0 | cp >> 6);
    b[1] = uint8_t(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = uint8_t(0xE0 | cp >> 12);
    b[1] = uint8_t(0x80 | (cp >> 6 & 0x3F));
    b[2] = uint8_t(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    b[0] = uint8_t(0xF0 | cp >> 18);
    b[1] = uint8_t(0x80 | (cp >> 12 & 0x3F));
    b[2] = uint8_t(0x80 | (cp >> 6 & 0x3F));
    b[3] = uint8_t(0x80 | (cp & 0x3F));
    n = 4;
  }
  for (int i = 0; i < n; ++i)
    if (!decoded(b[i])) return false;
  return true;
}

// One byte of the string's value, to every reading of the string (or of the key) being read.
bool JsonMatcher::decoded(uint8_t b) {
  if (h_.in_key) {
    Frame* f = level_frames(top());
    const int n = level_size(top());
    uint32_t keep = 0;
    for (int i = 0; i < n; ++i)
      if (key_byte(f[i], b)) keep |= 1u << i;
    return keep == low_bits(n) || keep_top(keep);
  }
  const uint32_t w = ByteDfa::weight(b);
  int kept = 0;
  for (int i = 0; i < h_.nvalues; ++i) {
    Value v = values_[i];
    const StringRule& r = v.node->str;
    v.len += w;
    if (r.dfa) {
      v.state = r.dfa->next(v.state, b);
      if (v.state == ByteDfa::kDead) continue;
    }
    if (!length_fits(r.dfa, v.state, v.len, r.min_len, r.max_len)) continue;
    values_[kept++] = v;
  }
  if (kept == h_.nvalues) return true;
  h_.nvalues = uint8_t(kept);
  return settle();
}

bool JsonMatcher::key_byte(Frame& f, uint8_t b) const {
  const ObjectRule& o = *f.node->obj;
  f.khash = (f.khash ^ b) * 16777619u;
  if (f.trie != ByteDfa::kDead) f.trie = o.trie.next(f.trie, b);
  if (f.kdfa != ByteDfa::kDead) {
    f.klen += ByteDfa::weight(b);
    if (o.keys) f.kdfa = o.keys->next(f.kdfa, b);
    if (f.kdfa != ByteDfa::kDead && !length_fits(o.keys, f.kdfa, f.klen, o.key_min, o.key_max))
      f.kdfa = ByteDfa::kDead;
  }
  return key_viable(f);
}

// A key under declared names or a key automaton takes \u escapes for ASCII only: the names are
// matched on decoded bytes, and a non-ASCII escape is refused rather than half-checked.
bool JsonMatcher::key_escape_ok(Frame& f, uint32_t lo, uint32_t hi) const {
  const ObjectRule& o = *f.node->obj;
  if (o.names.empty() && !o.keys) return f.kdfa != ByteDfa::kDead && f.klen + 1 <= o.key_max;
  for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x7F); ++c) {
    Frame g = f;
    if (key_byte(g, uint8_t(c))) return true;
  }
  return false;
}

// An escape has begun whose code point lies in [lo, hi]: keeps the readings some such code
// point continues (strings under an automaton: ASCII ones only).
bool JsonMatcher::escape_possible(uint32_t lo, uint32_t hi) {
  if (h_.in_key) {
    Frame* f = level_frames(top());
    const int n = level_size(top());
    uint32_t keep = 0;
    for (int i = 0; i < n; ++i)
      if (key_escape_ok(f[i], lo, hi)) keep |= 1u << i;
    return keep == low_bits(n) || keep_top(keep);
  }
  int kept = 0;
  for (int i = 0; i < h_.nvalues; ++i) {
    const Value& v = values_[i];
    const StringRule& r = v.node->str;
    bool ok = !r.dfa && v.len + 1 <= r.max_len;
    for (uint32_t c = lo; r.dfa && !ok && c <= std::min<uint32_t>(hi, 0x7F); ++c) {
      const uint32_t s = r.dfa->next(v.state, uint8_t(c));
      ok = s != ByteDfa::kDead && length_fits(r.dfa, s, uint64_t(v.len) + 1, r.min_len, r.max_len);
    }
    if (ok) values_[kept++] = v;
  }
  if (kept == h_.nvalues) return true;
  h_.nvalues = uint8_t(kept);
  return settle();
}

bool JsonMatcher::string_end() {
  if (h_.in_key) return key_end();
  uint32_t satisfied = 0;
  for (int i = 0; i < h_.nvalues; ++i) {
    const Value& v = values_[i];
    const StringRule& r = v.node->str;
    if (v.len >= r.min_len && v.len <= r.max_len && (!r.dfa || r.dfa->state(v.state).final))
      satisfied |= v.parents;
  }
  return satisfied != 0 && value_done(satisfied);
}

// ---- numbers ---------------------------------------------------------------------------------

// Syntax states: 0 start, 1 after '-', 2 after a leading 0, 3 integer digits, 4 after '.',
// 5 fraction digits, 6 after e/E, 7 after the exponent's sign, 8 exponent digits. A number can
// end in 2, 3, 5 and 8; then the byte that ended it is read as what follows the value.
// The syntax state after c (0xFF: c does not continue the number) and what c is: 's' sign,
// 'd' digit, '.', 'e', 'x' exponent sign, 'D' exponent digit.
uint8_t JsonMatcher::number_syntax(uint8_t c, char* kind) const {
  const bool digit = c >= '0' && c <= '9';
  const bool e = c == 'e' || c == 'E';
  uint8_t next = 0xFF;
  switch (h_.num) {
    case 0:
      if (c == '-') next = 1, *kind = 's';
      [[fallthrough]];
    case 1:
      if (digit) next = c == '0' ? 2 : 3, *kind = 'd';
      break;
    case 3:
      if (digit) next = 3, *kind = 'd';
      [[fallthrough]];
    case 2:
      if (c == '.') next = 4, *kind = '.';
      if (e) next = 6, *kind = 'e';
      break;
    case 4:
      if (digit) next = 5, *kind = 'd';
      break;
    case 5:
      if (digit) next = 5, *kind = 'd';
      if (e) next = 6, *kind = 'e';
      break;
    case 6:
      if (c == '+' || c == '-') next = 7, *kind = 'x';
      [[fallthrough]];
    case 7:
    case 8:
      if (digit) next = 8, *kind = 'D';
      break;
    default:
      break;
  }
  return next;
}

bool JsonMatcher::number_byte(uint8_t c) {
  char kind = 0;
  const uint8_t next = number_syntax(c, &kind);
  if (next == 0xFF) {  // c ends the number
    if (h_.num != 2 && h_.num != 3 && h_.num != 5 && h_.num != 8) return false;
    uint32_t satisfied = 0;
    for (int i = 0; i < h_.nvalues; ++i)
      if (number_complete(values_[i])) satisfied |= values_[i].parents;
    if (!satisfied || !value_done(satisfied) || h_.mode == Mode::kDone) return false;
    return step(c);  // nothing follows a top-level value
  }
  h_.num = next;
  NumPrefix& p = h_.np;
  if (kind == 's') p.neg = true;
  if (kind == 'd') {
    if (p.ndig < 255) ++p.ndig;
    if (p.ndig <= 18) p.mant = p.mant * 10 + uint64_t(c - '0');
    if (p.frac >= 0 && p.frac < 127) ++p.frac;
  }
  if (kind == '.') p.frac = 0;
  h_.part = kind == 'd' || kind == 'D' ? uint8_t(std::min(h_.part + 1, 255)) : 0;
  int kept = 0;
  for (int i = 0; i < h_.nvalues; ++i) {
    Value v = values_[i];
    if (number_digit_ok(v, kind, c)) values_[kept++] = v;
  }
  if (kept == h_.nvalues) return true;
  h_.nvalues = uint8_t(kept);
  return settle();
}

// Whether a reading takes this byte of the number (the prefix already holds it).
bool JsonMatcher::number_digit_ok(Value& v, char kind, uint8_t c) const {
  const NumberRule& r = v.node->num;
  if (r.literals) {
    v.state = r.literals->next(v.state, c);
    return v.state != ByteDfa::kDead;
  }
  switch (kind) {
    case 's':
      return !r.exact || r.neg_ok;
    case 'd':
      if (r.exact) return h_.np.ndig <= kExactDigits && number_reachable(r, h_.np);
      return h_.part <= (h_.np.frac < 0 && r.integer ? 18 : 24);
    case '.':
      return !r.integer && (!r.exact || (h_.np.ndig < kExactDigits && number_reachable(r, h_.np)));
    case 'e':
      return !r.integer && !r.exact;
    case 'D':
      return h_.part <= 2;
    default:
      return true;
  }
}

bool JsonMatcher::number_complete(const Value& v) const {
  const NumberRule& r = v.node->num;
  if (r.literals) return r.literals->state(v.state).final;
  return number_satisfies(r, h_.np);
}

bool JsonMatcher::can_end() const {
  if (done()) return true;
  if (h_.mode != Mode::kNumber || h_.depth != 0) return false;
  if (h_.num != 2 && h_.num != 3 && h_.num != 5 && h_.num != 8) return false;
  for (int i = 0; i < h_.nvalues; ++i)
    if (number_complete(values_[i])) return true;
  return false;
}

// ---- true / false / null ---------------------------------------------------------------------

bool JsonMatcher::keyword_byte(uint8_t c) {
  static const char* const kText[] = {"true", "false", "null"};
  const char* t = kText[h_.kw];
  if (c != uint8_t(t[h_.kw_pos])) return false;
  if (t[++h_.kw_pos] != 0) return true;
  uint32_t satisfied = 0;
  for (int i = 0; i < h_.nvalues; ++i) satisfied |= values_[i].parents;
  return value_done(satisfied);
}

}  // namespace cedar::text
