// ECMA-262 patterns -> code point sets -> a Thompson NFA over UTF-8 bytes -> a search DFA (the
// subset construction, bounded in states and work) -> pruned to states that can still match.
#include "text/regex_automaton.h"

#include <algorithm>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>

namespace cedar::text {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRepeat = 1000;         // {n,m} bounds
constexpr size_t kMaxNfaStates = 60000;  // per automaton, counted repetition expanded
constexpr int kMaxGroupDepth = 100;

// Sorted, disjoint, non-adjacent code point ranges, never holding a surrogate (U+D800..U+DFFF
// has no UTF-8 form, so no JSON string decodes to one).
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

void normalize(Ranges* r) {
  Ranges cut;
  for (auto [a, b] : *r) {  // drop the surrogates
    if (a > b) continue;
    if (a < 0xD800 && b >= 0xD800) {
      cut.emplace_back(a, 0xD7FF);
      if (b > 0xDFFF) cut.emplace_back(0xE000, b);
    } else if (a >= 0xD800 && a <= 0xDFFF) {
      if (b > 0xDFFF) cut.emplace_back(0xE000, b);
    } else {
      cut.emplace_back(a, b);
    }
  }
  std::sort(cut.begin(), cut.end());
  r->clear();
  for (const auto& x : cut) {
    if (!r->empty() && x.first <= r->back().second + 1)
      r->back().second = std::max(r->back().second, x.second);
    else
      r->push_back(x);
  }
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [a, b] : r) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  normalize(&out);
  return out;
}

Ranges digit_set() { return {{'0', '9'}}; }
Ranges word_set() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges space_set() {  // ECMA-262 WhiteSpace and LineTerminator
  Ranges r = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680},
              {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
              {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  normalize(&r);
  return r;
}
Ranges dot_set() {  // everything but the line terminators
  Ranges r = {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};
  return complement(r);
}

// ---- the pattern's syntax tree ---------------------------------------------------------------

struct Ast {
  enum Kind : uint8_t { kEmpty, kSet, kCat, kAlt, kRepeat, kBol, kEol } kind = kEmpty;
  Ranges set;
  std::vector<int> kids;
  int min = 0, max = 0;  // kRepeat: max -1 is unbounded
};

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i + size_t(n) > s.size()) throw RegexError("the pattern is not valid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = cp << 6 | (uint8_t(s[i + size_t(k)]) & 0x3F);
    out.push_back(cp);
    i += size_t(n);
  }
  return out;
}

class Parser {
 public:
  Parser(std::vector<uint32_t> cp, std::vector<Ast>* pool) : cp_(std::move(cp)), pool_(pool) {}
  int parse() {
    const int r = alternation(0);
    if (i_ < cp_.size()) fail("unmatched ')'");
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw RegexError(why + " at offset " + std::to_string(i_));
  }
  bool at_end() const { return i_ >= cp_.size(); }
  uint32_t peek(size_t k = 0) const { return i_ + k < cp_.size() ? cp_[i_ + k] : 0xFFFFFFFF; }
  int add(Ast a) {
    pool_->push_back(std::move(a));
    return int(pool_->size()) - 1;
  }
  int set_node(Ranges r) {
    normalize(&r);
    Ast a;
    a.kind = Ast::kSet;
    a.set = std::move(r);
    return add(std::move(a));
  }

  int alternation(int depth) {
    if (depth > kMaxGroupDepth) fail("groups nested too deep");
    std::vector<int> kids{sequence(depth)};
    while (peek() == '|') {
      ++i_;
      kids.push_back(sequence(depth));
    }
    if (kids.size() == 1) return kids[0];
    Ast a;
    a.kind = Ast::kAlt;
    a.kids = std::move(kids);
    return add(std::move(a));
  }

  int sequence(int depth) {
    Ast a;
    a.kind = Ast::kCat;
    while (!at_end() && peek() != '|' && peek() != ')') a.kids.push_back(term(depth));
    if (a.kids.empty()) return add(Ast{});
    if (a.kids.size() == 1) return a.kids[0];
    return add(std::move(a));
  }

  // {n}, {n,}, {n,m} at i_ (just past nothing): true and the bounds if one is there.
  bool braces(int* lo, int* hi) {
    size_t j = i_ + 1;
    auto number = [&](int* v) {
      const size_t from = j;
      int64_t x = 0;
      while (j < cp_.size() && cp_[j] >= '0' && cp_[j] <= '9') {
        x = std::min<int64_t>(x * 10 + (cp_[j] - '0'), int64_t(1) << 40);
        ++j;
      }
      *v = int(std::min<int64_t>(x, INT32_MAX));
      return j > from;
    };
    if (!number(lo)) return false;
    *hi = *lo;
    if (j < cp_.size() && cp_[j] == ',') {
      ++j;
      if (!number(hi)) *hi = -1;
    }
    if (j >= cp_.size() || cp_[j] != '}') return false;
    i_ = j + 1;
    return true;
  }

  int term(int depth) {
    const uint32_t c = peek();
    if (c == '^' || c == '$') {
      ++i_;
      Ast a;
      a.kind = c == '^' ? Ast::kBol : Ast::kEol;
      const int r = add(std::move(a));
      if (quantifier_follows()) fail("an anchor cannot be repeated");
      return r;
    }
    int atom_id = atom(depth);
    int lo = 0, hi = 0;
    if (peek() == '*') {
      ++i_, lo = 0, hi = -1;
    } else if (peek() == '+') {
      ++i_, lo = 1, hi = -1;
    } else if (peek() == '?') {
      ++i_, lo = 0, hi = 1;
    } else if (peek() == '{' && braces(&lo, &hi)) {
      if (hi >= 0 && lo > hi) fail("{n,m} with n > m");
      if (lo > kMaxRepeat || hi > kMaxRepeat)
        fail("a repetition bound above " + std::to_string(kMaxRepeat));
    } else {
      return atom_id;
    }
    if (peek() == '?') ++i_;  // lazy: the same language
    if (quantifier_follows()) fail("nothing to repeat");
    Ast a;
    a.kind = Ast::kRepeat;
    a.kids = {atom_id};
    a.min = lo;
    a.max = hi;
    return add(std::move(a));
  }

  bool quantifier_follows() {
    if (peek() == '*' || peek() == '+' || peek() == '?') return true;
    if (peek() != '{') return false;
    const size_t save = i_;
    int lo, hi;
    const bool q = braces(&lo, &hi);
    i_ = save;
    return q;
  }

  int atom(int depth) {
    const uint32_t c = peek();
    ++i_;
    switch (c) {
      case '.':
        return set_node(dot_set());
      case '(':
        return group(depth);
      case '[':
        return set_node(char_class());
      case '\\':
        return set_node(escape(false));
      case '*':
      case '+':
      case '?':
        --i_;
        fail("nothing to repeat");
      case '{': {
        --i_;
        int lo, hi;
        if (braces(&lo, &hi)) fail("nothing to repeat");
        ++i_;
        return set_node({{c, c}});
      }
      default:
        return set_node({{c, c}});
    }
  }

  int group(int depth) {
    if (peek() == '?') {
      const uint32_t k = peek(1);
      if (k == ':') {
        i_ += 2;
      } else if (k == '=' || k == '!' || (k == '<' && (peek(2) == '=' || peek(2) == '!'))) {
        fail("lookaround assertions are not supported");
      } else if (k == '<') {  // a named group: the name does not change the language
        i_ += 2;
        while (!at_end() && peek() != '>') ++i_;
        if (at_end()) fail("unterminated group name");
        ++i_;
      } else {
        fail("unsupported group syntax");
      }
    }
    const int inner = alternation(depth + 1);
    if (peek() != ')') fail("unterminated group");
    ++i_;
    return inner;
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const uint32_t h = peek();
      int d = h >= '0' && h <= '9'   ? int(h - '0')
              : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
              : h >= 'A' && h <= 'F' ? int(h - 'A' + 10)
                                     : -1;
      if (d < 0) fail("a bad hex escape");
      v = v * 16 + uint32_t(d);
      ++i_;
    }
    return v;
  }

  // After '\': the character (or class) it stands for. in_class: inside [...] (\b is backspace).
  Ranges escape(bool in_class) {
    if (at_end()) fail("a pattern ending in '\\'");
    const uint32_t c = peek();
    ++i_;
    switch (c) {
      case 'd':
        return digit_set();
      case 'D':
        return complement(digit_set());
      case 'w':
        return word_set();
      case 'W':
        return complement(word_set());
      case 's':
        return space_set();
      case 'S':
        return complement(space_set());
      case 'b':
        if (in_class) return {{8, 8}};
        fail("word boundaries (\\b) are not supported");
      case 'B':
        fail("word boundaries (\\B) are not supported");
      case 'p':
      case 'P':
        fail("unicode property escapes are not supported");
      case 'k':
        fail("backreferences are not supported");
      case 't':
        return {{9, 9}};
      case 'n':
        return {{10, 10}};
      case 'v':
        return {{11, 11}};
      case 'f':
        return {{12, 12}};
      case 'r':
        return {{13, 13}};
      case '0':
        if (peek() >= '0' && peek() <= '9') fail("octal escapes are not supported");
        return {{0, 0}};
      case 'c': {
        const uint32_t l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) fail("a bad \\c escape");
        ++i_;
        return {{l % 32, l % 32}};
      }
      case 'x': {
        const uint32_t v = hex_digits(2);
        return {{v, v}};
      }
      case 'u':
        return unicode_escape();
      default:
        if (c >= '1' && c <= '9') fail("backreferences are not supported");
        return {{c, c}};  // an identity escape
    }
  }

  Ranges unicode_escape() {
    uint32_t v = 0;
    if (peek() == '{') {
      ++i_;
      int n = 0;
      while (peek() != '}') {
        v = v * 16 + hex_digits(1);
        if (++n > 6 || v > kMaxCodePoint) fail("a bad \\u{...} escape");
      }
      ++i_;
      return {{v, v}};
    }
    v = hex_digits(4);
    if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
      const size_t save = i_;
      i_ += 2;
      const uint32_t lo = hex_digits(4);
      if (lo >= 0xDC00 && lo <= 0xDFFF) {
        const uint32_t cp = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        return {{cp, cp}};
      }
      i_ = save;
    }
    return {{v, v}};  // a lone surrogate: normalize() empties it (no string holds one)
  }

  Ranges char_class() {
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++i_;
    }
    Ranges r;
    while (true) {
      if (at_end()) fail("unterminated character class");
      if (peek() == ']') {
        ++i_;
        break;
      }
      bool single = false;
      Ranges a = class_atom(&single);
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        ++i_;
        bool single_b = false;
        Ranges b = class_atom(&single_b);
        if (!single || !single_b) fail("a class escape cannot bound a range");
        if (a[0].first > b[0].first) fail("a character range out of order");
        r.emplace_back(a[0].first, b[0].first);
      } else {
        r.insert(r.end(), a.begin(), a.end());
      }
    }
    normalize(&r);
    return negate ? complement(r) : r;
  }

  Ranges class_atom(bool* single) {
    const uint32_t c = peek();
    ++i_;
    if (c == '\\') {
      const uint32_t e = peek();
      Ranges r = escape(true);
      *single = !(e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 's' || e == 'S');
      if (e == '-') *single = true;
      if (*single && r.empty()) r = {{0xD800, 0xD800}};  // a lone surrogate bound: matches nothing
      return r;
    }
    *single = true;
    return {{c, c}};
  }

  std::vector<uint32_t> cp_;
  size_t i_ = 0;
  std::vector<Ast>* pool_;
};

// ---- Thompson NFA over bytes -----------------------------------------------------------------

struct NState {
  enum Kind : uint8_t { kByte, kSplit, kBol, kEol, kMatch } kind = kSplit;
  uint8_t lo = 0, hi = 0;
  uint32_t out = 0;            // kByte, kBol, kEol
  std::vector<uint32_t> outs;  // kSplit
  uint32_t pattern = 0;        // the pattern this state belongs to
};

class NfaBuilder {
 public:
  std::vector<NState> states;
  uint32_t pattern = 0;

  uint32_t add(NState s) {
    if (states.size() >= kMaxNfaStates)
      throw RegexError("the pattern needs more than " + std::to_string(kMaxNfaStates) +
                       " automaton states (counted repetition)");
    s.pattern = pattern;
    states.push_back(std::move(s));
    return uint32_t(states.size() - 1);
  }
  uint32_t byte(uint8_t lo, uint8_t hi, uint32_t out) {
    NState s;
    s.kind = NState::kByte;
    s.lo = lo;
    s.hi = hi;
    s.out = out;
    return add(std::move(s));
  }
  uint32_t split(std::vector<uint32_t> outs) {
    NState s;
    s.kind = NState::kSplit;
    s.outs = std::move(outs);
    return add(std::move(s));
  }

  // The entry of a fragment matching `node`, continuing into `next`.
  uint32_t build(const std::vector<Ast>& pool, int node, uint32_t next) {
    const Ast& a = pool[size_t(node)];
    switch (a.kind) {
      case Ast::kEmpty:
        return next;
      case Ast::kSet:
        return set(a.set, next);
      case Ast::kCat:
        for (size_t k = a.kids.size(); k-- > 0;) next = build(pool, a.kids[k], next);
        return next;
      case Ast::kAlt: {
        std::vector<uint32_t> outs;
        for (int kid : a.kids) outs.push_back(build(pool, kid, next));
        return split(std::move(outs));
      }
      case Ast::kRepeat:
        return repeat(pool, a, next);
      case Ast::kBol:
      case Ast::kEol: {
        NState s;
        s.kind = a.kind == Ast::kBol ? NState::kBol : NState::kEol;
        s.out = next;
        return add(std::move(s));
      }
    }
    return next;
  }

 private:
  uint32_t repeat(const std::vector<Ast>& pool, const Ast& a, uint32_t next) {
    uint32_t tail = next;
    if (a.max < 0) {  // a loop: L -> (body -> L) | next
      const uint32_t loop = split({});
      const uint32_t body = build(pool, a.kids[0], loop);
      states[loop].outs = {body, next};
      tail = loop;
    } else {  // (x(x(x)?)?)? : each optional copy only after the one before
      for (int k = 0; k < a.max - a.min; ++k) tail = split({build(pool, a.kids[0], tail), next});
    }
    for (int k = 0; k < a.min; ++k) tail = build(pool, a.kids[0], tail);
    return tail;
  }

  // UTF-8 byte sequences of the code points a..b (all encoded with n bytes), as ranges per byte.
  void utf8_split(uint32_t a, uint32_t b, int n, std::vector<std::vector<uint8_t>>* seqs) {
    for (int i = 1; i < n; ++i) {
      const uint32_t m = (1u << (6 * i)) - 1;
      if ((a & ~m) != (b & ~m)) {
        if ((a & m) != 0) {
          utf8_split(a, a | m, n, seqs);
          utf8_split((a | m) + 1, b, n, seqs);
          return;
        }
        if ((b & m) != m) {
          utf8_split(a, (b & ~m) - 1, n, seqs);
          utf8_split(b & ~m, b, n, seqs);
          return;
        }
      }
    }
    // every byte position now spans a contiguous range: (lo0, hi0, lo1, hi1, ...)
    uint8_t ea[4], eb[4];
    encode(a, n, ea);
    encode(b, n, eb);
    std::vector<uint8_t> seq;
    for (int k = 0; k < n; ++k) seq.insert(seq.end(), {ea[k], eb[k]});
    seqs->push_back(std::move(seq));
  }

  static void encode(uint32_t cp, int n, uint8_t* out) {
    static const uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (int k = n - 1; k > 0; --k) {
      out[k] = uint8_t(0x80 | (cp & 0x3F));
      cp >>= 6;
    }
    out[0] = uint8_t(kLead[n] | cp);
  }

  uint32_t set(const Ranges& r, uint32_t next) {
    static const uint32_t kTop[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
    std::vector<std::vector<uint8_t>> seqs;
    for (const auto& [a, b] : r)
      for (int n = 1; n <= 4; ++n) {
        const uint32_t lo = std::max(a, n == 1 ? 0u : kTop[n - 2] + 1),
                       hi = std::min(b, kTop[n - 1]);
        if (lo <= hi) utf8_split(lo, hi, n, &seqs);
      }
    std::vector<uint32_t> entries;
    for (const auto& seq : seqs) {
      uint32_t at = next;
      for (size_t k = seq.size(); k >= 2; k -= 2) at = byte(seq[k - 2], seq[k - 1], at);
      entries.push_back(at);
    }
    if (entries.size() == 1) return entries[0];
    return split(std::move(entries));  // none: a split to nowhere matches nothing
  }
};

}  // namespace

// ---- subset construction ---------------------------------------------------------------------

class DfaBuilder {
 public:
  DfaBuilder(const std::vector<NState>& nfa, std::vector<uint32_t> starts, size_t max_states,
             uint64_t* work)
      : nfa_(nfa),
        starts_(std::move(starts)),
        max_states_(max_states),
        mark_(nfa.size(), 0),
        work_(work) {
    all_ = starts_.size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << starts_.size()) - 1;
  }

  ByteDfa build() {
    classes();
    std::vector<uint32_t> set;
    uint64_t matched = 0;
    closure(starts_, true, false, &set, &matched);
    intern(std::move(set), matched, true);
    for (size_t i = 0; i < sets_.size(); ++i) expand(uint32_t(i));
    return std::move(dfa_);
  }

 private:
  // The epsilon closure of seeds: the byte and '$' states reached, and the patterns matched.
  void closure(const std::vector<uint32_t>& seeds, bool at_start, bool at_end,
               std::vector<uint32_t>* out, uint64_t* matched) {
    ++stamp_;
    std::vector<uint32_t> stack(seeds.begin(), seeds.end());
    while (!stack.empty()) {
      const uint32_t s = stack.back();
      stack.pop_back();
      if (mark_[s] == stamp_) continue;
      mark_[s] = stamp_;
      if (*work_ == 0) throw RegexError("the pattern is too complex to compile");
      --*work_;
      const NState& n = nfa_[s];
      switch (n.kind) {
        case NState::kByte:
          out->push_back(s);
          break;
        case NState::kSplit:
          stack.insert(stack.end(), n.outs.begin(), n.outs.end());
          break;
        case NState::kBol:
          if (at_start) stack.push_back(n.out);
          break;
        case NState::kEol:
          if (at_end)
            stack.push_back(n.out);
          else
            out->push_back(s);
          break;
        case NState::kMatch:
          *matched |= uint64_t(1) << n.pattern;
          break;
      }
    }
  }

  uint32_t intern(std::vector<uint32_t> set, uint64_t matched, bool initial) {
    // a matched pattern no longer constrains the string: its threads are dropped
    std::erase_if(set, [&](uint32_t s) { return matched >> nfa_[s].pattern & 1; });
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    std::string key(reinterpret_cast<const char*>(set.data()), set.size() * sizeof(uint32_t));
    key.append(reinterpret_cast<const char*>(&matched), sizeof matched);
    key.push_back(initial ? 1 : 0);  // the start also passes '^' in its end closure
    if (auto it = ids_.find(key); it != ids_.end()) return it->second;
    if (sets_.size() >= max_states_)
      throw RegexError("the pattern needs more than " + std::to_string(max_states_) +
                       " automaton states");
    const uint32_t id = uint32_t(sets_.size());
    ids_.emplace(std::move(key), id);
    ByteDfa::State st;
    st.accept = matched | end_accept(set, initial);
    dfa_.states_.push_back(st);
    sets_.push_back(std::move(set));
    matched_.push_back(matched);
    return id;
  }

  // The patterns a string ending here matches through its pending '$' assertions.
  uint64_t end_accept(const std::vector<uint32_t>& set, bool initial) {
    std::vector<uint32_t> seeds;
    for (const uint32_t s : set)
      if (nfa_[s].kind == NState::kEol) seeds.push_back(s);
    if (initial) seeds.insert(seeds.end(), starts_.begin(), starts_.end());
    if (seeds.empty()) return 0;
    std::vector<uint32_t> ignored;
    uint64_t m = 0;
    closure(seeds, initial, true, &ignored, &m);
    return m;
  }

  // Byte classes: bytes no NFA edge tells apart, split at 0x80 and 0xC0 (code point weights).
  void classes() {
    std::vector<bool> cut(257, false);
    cut[0] = cut[0x80] = cut[0xC0] = cut[256] = true;
    for (const auto& n : nfa_)
      if (n.kind == NState::kByte) cut[n.lo] = cut[size_t(n.hi) + 1] = true;
    for (int b = 0; b < 256; ++b)
      if (cut[size_t(b)]) class_lo_.push_back(uint8_t(b));
  }

  void expand(uint32_t id) {
    std::vector<std::pair<uint8_t, uint32_t>> targets;  // (class lo, target)
    for (size_t k = 0; k < class_lo_.size(); ++k) {
      const uint8_t b = class_lo_[k];
      std::vector<uint32_t> seeds;
      for (const uint32_t s : sets_[id]) {
        const NState& n = nfa_[s];
        if (n.kind == NState::kByte && n.lo <= b && b <= n.hi) seeds.push_back(n.out);
      }
      const uint64_t matched = matched_[id];
      // the search may start at every position: unmatched patterns begin again
      for (size_t p = 0; p < starts_.size(); ++p)
        if (!(matched >> p & 1)) seeds.push_back(starts_[p]);
      std::vector<uint32_t> set;
      uint64_t m = matched;
      closure(seeds, false, false, &set, &m);
      targets.emplace_back(b, intern(std::move(set), m, false));
    }
    // one edge per run of classes with the same target inside one weight region
    auto region = [](uint8_t b) { return b < 0x80 ? 0 : b < 0xC0 ? 1 : 2; };
    ByteDfa::State& st = dfa_.states_[id];
    st.first_edge = uint32_t(dfa_.edges_.size());
    for (size_t k = 0; k < targets.size(); ++k) {
      const uint8_t lo = targets[k].first;
      const uint8_t hi = k + 1 < targets.size() ? uint8_t(targets[k + 1].first - 1) : 0xFF;
      auto& edges = dfa_.edges_;
      if (edges.size() > st.first_edge && edges.back().to == targets[k].second &&
          edges.back().hi + 1 == lo && region(edges.back().lo) == region(lo)) {
        edges.back().hi = hi;
      } else {
        edges.push_back({lo, hi, targets[k].second});
      }
    }
    dfa_.states_[id].n_edges = uint32_t(dfa_.edges_.size()) - dfa_.states_[id].first_edge;
  }

  const std::vector<NState>& nfa_;
  std::vector<uint32_t> starts_;
  size_t max_states_;
  uint64_t all_ = 0;
  std::vector<uint32_t> mark_;
  uint32_t stamp_ = 0;
  uint64_t* work_;
  std::vector<uint8_t> class_lo_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::vector<uint32_t>> sets_;
  std::vector<uint64_t> matched_;
  ByteDfa dfa_;
};

ByteDfa ByteDfa::patterns(const std::vector<std::string>& pats, size_t max_states, uint64_t* work) {
  if (pats.size() > 64) throw RegexError("more than 64 patterns on one string");
  NfaBuilder nfa;
  std::vector<uint32_t> starts;
  for (size_t p = 0; p < pats.size(); ++p) {
    std::vector<Ast> pool;
    Parser parser(decode_utf8(pats[p]), &pool);
    const int root = parser.parse();
    nfa.pattern = uint32_t(p);
    NState m;
    m.kind = NState::kMatch;
    const uint32_t match = nfa.add(std::move(m));
    starts.push_back(nfa.build(pool, root, match));
  }
  return DfaBuilder(nfa.states, std::move(starts), max_states, work).build();
}

ByteDfa ByteDfa::literals(const std::vector<std::string>& lits, size_t max_states) {
  std::vector<std::vector<std::pair<uint8_t, uint32_t>>> kids(1);
  ByteDfa d;
  d.states_.emplace_back();
  for (size_t i = 0; i < lits.size(); ++i) {
    uint32_t at = 0;
    for (const char ch : lits[i]) {
      const uint8_t b = uint8_t(ch);
      auto& ks = kids[at];
      auto it = std::find_if(ks.begin(), ks.end(), [&](const auto& k) { return k.first == b; });
      if (it != ks.end()) {
        at = it->second;
        continue;
      }
      if (d.states_.size() >= max_states)
        throw RegexError("the literals need more than " + std::to_string(max_states) +
                         " automaton states");
      const uint32_t n = uint32_t(d.states_.size());
      d.states_.emplace_back();
      kids.emplace_back();
      kids[at].emplace_back(b, n);
      at = n;
    }
    if (d.states_[at].tag == UINT32_MAX) {
      d.states_[at].tag = uint32_t(i);
      d.states_[at].accept = 1;
    }
  }
  for (size_t s = 0; s < d.states_.size(); ++s) {
    std::sort(kids[s].begin(), kids[s].end());
    d.states_[s].first_edge = uint32_t(d.edges_.size());
    d.states_[s].n_edges = uint32_t(kids[s].size());
    for (const auto& [b, to] : kids[s]) d.edges_.push_back({b, b, to});
  }
  return d;
}

uint32_t ByteDfa::next(uint32_t s, uint8_t b) const {
  const State& st = states_[s];
  const Edge* e = edges_.data() + st.first_edge;
  uint32_t lo = 0, hi = st.n_edges;
  while (lo < hi) {  // edges are sorted and disjoint
    const uint32_t mid = (lo + hi) / 2;
    if (e[mid].hi < b)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < st.n_edges && e[lo].lo <= b ? e[lo].to : kDead;
}

uint32_t ByteDfa::run(std::string_view s) const {
  uint32_t at = start_;
  for (const char c : s) {
    at = next(at, uint8_t(c));
    if (at == kDead) break;
  }
  return at;
}

// Fewest code points from each state to a final one (kInf: none): a 0-1 breadth-first search
// backwards (continuation bytes weigh 0).
std::vector<uint32_t> ByteDfa::min_remaining() const {
  const size_t n = states_.size();
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> rev(n);  // (from, weight)
  for (uint32_t s = 0; s < n; ++s)
    for (uint32_t k = 0; k < states_[s].n_edges; ++k) {
      const Edge& e = edges_[states_[s].first_edge + k];
      rev[e.to].emplace_back(s, weight(e.lo));
    }
  std::vector<uint32_t> min_rem(n, kInf);
  std::deque<uint32_t> queue;
  for (uint32_t s = 0; s < n; ++s)
    if (states_[s].final) {
      min_rem[s] = 0;
      queue.push_back(s);
    }
  while (!queue.empty()) {
    const uint32_t t = queue.front();
    queue.pop_front();
    for (const auto& [s, w] : rev[t])
      if (min_rem[t] + w < min_rem[s]) {
        min_rem[s] = min_rem[t] + w;
        if (w == 0)
          queue.push_front(s);
        else
          queue.push_back(s);
      }
  }
  return min_rem;
}

void ByteDfa::prune() {
  const size_t n = states_.size();
  const std::vector<uint32_t> min_rem = min_remaining();
  // drop the edges into dead states
  std::vector<Edge> kept;
  for (uint32_t s = 0; s < n; ++s) {
    State& st = states_[s];
    const uint32_t first = uint32_t(kept.size());
    if (min_rem[s] != kInf)
      for (uint32_t k = 0; k < st.n_edges; ++k) {
        const Edge& e = edges_[st.first_edge + k];
        if (min_rem[e.to] != kInf) kept.push_back(e);
      }
    st.first_edge = first;
    st.n_edges = uint32_t(kept.size()) - first;
    st.min_rem = min_rem[s];
  }
  edges_ = std::move(kept);
  max_remaining();
}

// Most code points from each live state to a final one: longest paths, kInf where a cycle is
// reachable (Kahn's order from the states without edges).
void ByteDfa::max_remaining() {
  const size_t n = states_.size();
  std::vector<uint32_t> outdeg(n, 0);
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> live_rev(n);
  std::vector<int64_t> max_rem(n, -1);
  for (uint32_t s = 0; s < n; ++s)
    for (uint32_t k = 0; k < states_[s].n_edges; ++k) {
      const Edge& e = edges_[states_[s].first_edge + k];
      ++outdeg[s];
      live_rev[e.to].emplace_back(s, weight(e.lo));
    }
  std::vector<uint32_t> ready;
  for (uint32_t s = 0; s < n; ++s) {
    if (states_[s].final) max_rem[s] = 0;
    if (states_[s].min_rem != kInf && outdeg[s] == 0) ready.push_back(s);
  }
  std::vector<bool> done(n, false);
  while (!ready.empty()) {
    const uint32_t t = ready.back();
    ready.pop_back();
    done[t] = true;
    for (const auto& [s, w] : live_rev[t]) {
      max_rem[s] = std::max(max_rem[s], max_rem[t] + int64_t(w));
      if (--outdeg[s] == 0) ready.push_back(s);
    }
  }
  rem_clip_ = 0;
  for (uint32_t s = 0; s < n; ++s) {
    State& st = states_[s];
    st.max_rem = st.min_rem == kInf || !done[s] ? kInf : uint32_t(max_rem[s]);
    if (st.min_rem != kInf) rem_clip_ = std::max(rem_clip_, st.min_rem);
    if (st.max_rem != kInf) rem_clip_ = std::max(rem_clip_, st.max_rem);
  }
}

std::string regex_quote(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}/").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace cedar::text
