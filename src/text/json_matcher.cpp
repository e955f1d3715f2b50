// The matcher's structure: values starting, containers opening and closing, object keys, the
// graph of readings (settle / compact), and the state key. Scalars are in json_matcher_lexer.cpp.
#include "text/json_matcher.h"

#include <algorithm>
#include <cstring>

namespace cedar::text {

namespace {

constexpr uint32_t kTagged = 0x80000000u;  // a clipped counter in key()

bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
uint32_t low_bits(int n) { return n >= 32 ? ~0u : (1u << n) - 1; }
bool any_bit(const Bits128& b) { return (b[0] | b[1]) != 0; }
int popcount(const Bits128& b) { return __builtin_popcountll(b[0]) + __builtin_popcountll(b[1]); }

// A counter that only matters below `exact` and near `max`: clipped past where a token could
// tell two values apart.
uint32_t quantize(uint32_t count, uint32_t exact, uint32_t max, uint32_t clip) {
  if (count < exact) return count;
  return kTagged | std::min(max >= count ? max - count : 0, clip);
}

// A length that matters by its distance below min and below max, each clipped.
uint64_t quantize_len(uint32_t len, uint32_t min, uint32_t max, uint32_t clip) {
  const uint64_t below = std::min(min > len ? min - len : 0, clip);
  return below << 32 | std::min(max >= len ? max - len : 0, clip);
}

}  // namespace

JsonMatcher::JsonMatcher(const SchemaNode* root) {
  static const JsonSchema kAny = JsonSchema::compile_value(ojson(true), "any");
  h_ = Head{};
  h_.root = root ? root : kAny.root();  // nullptr: any JSON value
  h_.mode = Mode::kValue;
}

void JsonMatcher::copy_from(const JsonMatcher& o) {
  h_ = o.h_;
  std::memcpy(frames_, o.frames_, sizeof(Frame) * o.h_.nframes);
  std::memcpy(values_, o.values_, sizeof(Value) * o.h_.nvalues);
}

bool JsonMatcher::feed(uint8_t c) {
  const JsonMatcher saved = *this;
  if (step(c)) return true;
  *this = saved;
  return false;
}

bool JsonMatcher::feed(std::string_view s) {
  const JsonMatcher saved = *this;
  for (const char ch : s)
    if (!step(uint8_t(ch))) {
      *this = saved;
      return false;
    }
  return true;
}

bool JsonMatcher::step(uint8_t c) {
  switch (h_.mode) {
    case Mode::kString:
      return string_byte(c);
    case Mode::kNumber:
      return number_byte(c);
    case Mode::kKeyword:
      return keyword_byte(c);
    case Mode::kDone:
      return false;
    default:
      break;
  }
  if (is_ws(c)) return ++h_.ws <= kMaxWhitespace;
  h_.ws = 0;
  switch (h_.mode) {
    case Mode::kValue:
      return value_start(c);
    case Mode::kObjKey:
      return key_start(c);
    case Mode::kColon:
      if (c != ':') return false;
      h_.mode = Mode::kValue;
      return true;
    case Mode::kAfter:
      return after_value(c);
    default:
      return false;
  }
}

// ---- the graph of readings -------------------------------------------------------------------

bool JsonMatcher::value_leaves() const {
  return (h_.mode == Mode::kString && !h_.in_key) || h_.mode == Mode::kNumber ||
         h_.mode == Mode::kKeyword;
}

// Keeps the frames of level l in `keep`, renumbering the parents of what stands above them.
void JsonMatcher::compact(int l, uint32_t keep) {
  Frame* f = level_frames(l);
  const int n = level_size(l);
  uint8_t remap[kMaxFrames];
  int w = 0;
  for (int i = 0; i < n; ++i)
    if (keep >> i & 1) {
      remap[i] = uint8_t(w);
      if (w != i) f[w] = f[i];
      ++w;
    }
  const int removed = n - w;
  if (removed == 0) return;
  const int from = h_.level[l + 1];
  std::memmove(frames_ + from - removed, frames_ + from, sizeof(Frame) * size_t(h_.nframes - from));
  for (int k = l + 1; k <= h_.depth; ++k) h_.level[k] = uint8_t(h_.level[k] - removed);
  h_.nframes = uint8_t(h_.nframes - removed);
  auto renumber = [&](uint32_t m) {
    uint32_t r = 0;
    for (m &= keep; m; m &= m - 1) r |= 1u << remap[__builtin_ctz(m)];
    return r;
  };
  if (l + 1 < h_.depth) {
    Frame* up = level_frames(l + 1);
    for (int i = 0; i < level_size(l + 1); ++i) up[i].parents = renumber(up[i].parents);
  } else if (value_leaves()) {
    for (int i = 0; i < h_.nvalues; ++i) values_[i].parents = renumber(values_[i].parents);
  }
}

// Drops every frame that no longer serves a live reading above it, level by level downwards;
// false when nothing is left.
bool JsonMatcher::settle() {
  int l = top();
  uint32_t ref = 0;
  if (value_leaves()) {
    if (h_.nvalues == 0) return false;
    for (int i = 0; i < h_.nvalues; ++i) ref |= values_[i].parents;
  } else {
    if (l < 0) return true;
    if (level_size(l) == 0) return false;
    for (int i = 0; i < level_size(l); ++i) ref |= level_frames(l)[i].parents;
    --l;
  }
  for (; l >= 0; --l) {
    if ((ref & low_bits(level_size(l))) == low_bits(level_size(l))) return true;
    compact(l, ref);
    if (level_size(l) == 0) return false;
    ref = 0;
    for (int i = 0; i < level_size(l); ++i) ref |= level_frames(l)[i].parents;
  }
  return ref != 0;
}

bool JsonMatcher::keep_top(uint32_t keep) {
  compact(top(), keep);
  return settle();
}

// ---- values and containers -------------------------------------------------------------------

void JsonMatcher::add_frame(const SchemaNode* s, uint32_t pbit, bool array) {
  for (int i = h_.level[h_.depth]; i < h_.nframes; ++i)
    if (frames_[i].node == s) {
      frames_[i].parents |= pbit;
      return;
    }
  if (h_.nframes >= kMaxFrames) return;  // past capacity a reading is dropped (never unsound)
  Frame& f = frames_[h_.nframes++];
  std::memset(&f, 0, sizeof f);
  f.node = s;
  f.parents = pbit;
  f.trie = f.kdfa = ByteDfa::kDead;
  f.array = array;
  f.empty = true;
}

void JsonMatcher::add_value(const SchemaNode* s, uint32_t pbit) {
  for (int i = 0; i < h_.nvalues; ++i)
    if (values_[i].node == s) {
      values_[i].parents |= pbit;
      return;
    }
  if (h_.nvalues >= kMaxValues) return;
  Value& v = values_[h_.nvalues++];
  v.node = s;
  v.parents = pbit;
  v.len = 0;
  const ByteDfa* d = (s->types & SchemaNode::kString) && s->str.dfa ? s->str.dfa : nullptr;
  if (s->types & SchemaNode::kNumber && s->num.literals) d = s->num.literals;
  v.state = d ? d->start() : 0;
}

// The readings a value starting with c can have: under every open reading, each alternative
// of its child schema that admits such a value (and, for a container, fits the nesting left).
void JsonMatcher::collect(Start kind, uint8_t c) {
  using N = SchemaNode;
  const int t = top(), room = budget();
  const int nparents = t < 0 ? 1 : level_size(t);
  h_.nvalues = 0;
  h_.level[h_.depth] = h_.nframes;
  auto consider = [&](const SchemaNode* s, uint32_t pbit) {
    switch (kind) {
      case Start::kObject:
        if ((s->types & N::kObject) && s->md_object <= room) add_frame(s, pbit, false);
        break;
      case Start::kArray:
        if ((s->types & N::kArray) && s->md_array <= room) add_frame(s, pbit, true);
        break;
      case Start::kString:
        if ((s->types & N::kString) && s->str.sat) add_value(s, pbit);
        break;
      case Start::kNumber:
        if ((s->types & N::kNumber) && s->num.sat) add_value(s, pbit);
        break;
      case Start::kKeyword:
        if (c == 'n' ? (s->types & N::kNull) != 0
                     : (s->types & N::kBool) && (s->bools & (c == 't' ? 2 : 1)))
          add_value(s, pbit);
        break;
      case Start::kNone:
        break;
    }
  };
  for (int p = 0; p < nparents; ++p) {
    const SchemaNode* n = t < 0 ? h_.root : level_frames(t)[p].child;
    if (!n) continue;
    if (n->alts.empty()) consider(n, 1u << p);
    for (const SchemaNode* a : n->alts) consider(a, 1u << p);
  }
}

bool JsonMatcher::value_start(uint8_t c) {
  const int t = top();
  if (t >= 0 && c == ']' && level_frames(t)[0].array && level_frames(t)[0].empty) return close();
  const Start kind = c == '{'                           ? Start::kObject
                     : c == '['                         ? Start::kArray
                     : c == '"'                         ? Start::kString
                     : c == '-' || is_digit(c)          ? Start::kNumber
                     : c == 't' || c == 'f' || c == 'n' ? Start::kKeyword
                                                        : Start::kNone;
  if (kind == Start::kNone) return false;
  collect(kind, c);
  if (kind == Start::kObject || kind == Start::kArray) {
    if (h_.nframes == h_.level[h_.depth]) return false;
    h_.level[++h_.depth] = h_.nframes;
    h_.mode = kind == Start::kObject ? Mode::kObjKey : Mode::kValue;
    return settle() && (kind == Start::kObject || first_items());
  }
  if (h_.nvalues == 0) return false;
  switch (kind) {
    case Start::kString:
      h_.mode = Mode::kString;
      h_.in_key = false;
      h_.esc = h_.utf8_left = 0;
      h_.low = false;
      return settle();
    case Start::kNumber:
      h_.mode = Mode::kNumber;
      h_.num = h_.part = 0;
      h_.np = NumPrefix{};
      return settle() && number_byte(c);
    default:
      h_.mode = Mode::kKeyword;
      h_.kw = c == 't' ? 0 : c == 'f' ? 1 : 2;
      h_.kw_pos = 1;
      return settle();
  }
}

// After '[': each reading's first item schema, or only ']'.
bool JsonMatcher::first_items() {
  uint32_t keep = 0;
  Frame* f = level_frames(top());
  for (int i = 0; i < level_size(top()); ++i) {
    const ArrayRule& a = *f[i].node->arr;
    const SchemaNode* item = a.max_items > 0 ? a.item(0) : nullptr;
    f[i].child = item && item->md <= budget() ? item : nullptr;
    if (f[i].child || close_allowed(f[i])) keep |= 1u << i;
  }
  return keep_top(keep);
}

bool JsonMatcher::close_allowed(const Frame& f) const {
  if (f.array) return f.count >= f.node->arr->min_items;
  const ObjectRule& o = *f.node->obj;
  return (o.required[0] & ~f.used[0]) == 0 && (o.required[1] & ~f.used[1]) == 0 &&
         f.count >= o.min_props;
}

// The innermost container ends ('}' or ']'): the readings that may close serve their parents.
bool JsonMatcher::close() {
  const int t = top();
  const Frame* f = level_frames(t);
  uint32_t satisfied = 0;
  for (int i = 0; i < level_size(t); ++i)
    if (close_allowed(f[i])) satisfied |= f[i].parents;
  if (!satisfied) return false;
  h_.nframes = h_.level[t];
  --h_.depth;
  return value_done(satisfied);
}

// A value at the current depth is complete: `satisfied` holds the containers (of the top level)
// that one of its readings served.
bool JsonMatcher::value_done(uint32_t satisfied) {
  h_.nvalues = 0;
  if (h_.depth == 0) {
    h_.mode = Mode::kDone;
    return true;
  }
  h_.mode = Mode::kAfter;
  if (!keep_top(satisfied)) return false;
  Frame* f = level_frames(top());
  for (int i = 0; i < level_size(top()); ++i) {
    if (f[i].array && f[i].count < UINT32_MAX) ++f[i].count;
    f[i].empty = false;
  }
  return true;
}

bool JsonMatcher::after_value(uint8_t c) {
  Frame* f = level_frames(top());
  const int n = level_size(top());
  const bool array = f[0].array;
  if (c == (array ? ']' : '}')) return close();
  if (c != ',') return false;
  uint32_t keep = 0;
  for (int i = 0; i < n; ++i) {
    if (array) {
      const ArrayRule& a = *f[i].node->arr;
      const SchemaNode* next = f[i].count < a.max_items ? a.item(f[i].count) : nullptr;
      if (!next || next->md > budget()) continue;
      f[i].child = next;
    } else if (!can_add_key(f[i])) {
      continue;
    }
    keep |= 1u << i;
  }
  h_.mode = array ? Mode::kValue : Mode::kObjKey;
  return keep_top(keep);
}

// ---- object keys -----------------------------------------------------------------------------

// Another optional key still leaves room for the required ones under maxProperties.
bool JsonMatcher::room_for_optional(const Frame& f) const {
  const ObjectRule& o = *f.node->obj;
  const Bits128 left = {o.required[0] & ~f.used[0], o.required[1] & ~f.used[1]};
  return uint64_t(f.count) + 1 + uint64_t(popcount(left)) <= o.max_props;
}

// The tracked names that may come next: unused, their value fits the nesting left, and
// optional ones only while there is room.
Bits128 JsonMatcher::available(const Frame& f) const {
  const ObjectRule& o = *f.node->obj;
  const bool room = room_for_optional(f);
  const Bits128& fits = o.fits[size_t(std::max(0, budget()))];
  Bits128 a;
  for (int w = 0; w < 2; ++w) a[w] = ~f.used[w] & fits[w] & (room ? ~uint64_t(0) : o.required[w]);
  return a;
}

bool JsonMatcher::free_key_ok(const Frame& f) const {
  const ObjectRule& o = *f.node->obj;
  return o.free && room_for_optional(f) && o.free_md <= budget() &&
         (!o.distinct_free || f.count >= o.min_props || f.nseen < SchemaLimits::kMaxDistinctFree);
}

bool JsonMatcher::can_add_key(const Frame& f) const {
  const ObjectRule& o = *f.node->obj;
  if (f.count >= o.max_props) return false;
  return any_bit(available(f)) || (o.names.size() > o.n_tracked && room_for_optional(f)) ||
         free_key_ok(f);
}

// The key read so far can still end as an available name or as an allowed free key.
bool JsonMatcher::key_viable(const Frame& f) const {
  if (f.kdfa != ByteDfa::kDead) return true;
  if (f.trie == ByteDfa::kDead) return false;
  const ObjectRule& o = *f.node->obj;
  const Bits128 a = available(f);
  const Bits128& below = o.below[f.trie];
  if ((a[0] & below[0]) | (a[1] & below[1])) return true;
  return o.untracked_below[f.trie] && room_for_optional(f);
}

bool JsonMatcher::key_start(uint8_t c) {
  Frame* f = level_frames(top());
  if (c == '}') return f[0].empty && close();
  if (c != '"') return false;
  uint32_t keep = 0;
  for (int i = 0; i < level_size(top()); ++i) {
    Frame& x = f[i];
    x.empty = false;
    if (!can_add_key(x)) continue;
    const ObjectRule& o = *x.node->obj;
    x.trie = o.names.empty() ? ByteDfa::kDead : o.trie.start();
    x.kdfa = !free_key_ok(x) ? ByteDfa::kDead : o.keys ? o.keys->start() : 0;
    x.klen = 0;
    x.khash = 2166136261u;
    if (key_viable(x)) keep |= 1u << i;
  }
  h_.mode = Mode::kString;
  h_.in_key = true;
  h_.esc = h_.utf8_left = 0;
  h_.low = false;
  return keep_top(keep);
}

// The key's closing quote: each reading takes it as a declared name (whatever its spelling, a
// key equal to a name is that name) or as a free key, or fails.
bool JsonMatcher::key_end() {
  Frame* f = level_frames(top());
  uint32_t keep = 0;
  for (int i = 0; i < level_size(top()); ++i) {
    Frame& x = f[i];
    const ObjectRule& o = *x.node->obj;
    const uint32_t tag = x.trie != ByteDfa::kDead ? o.trie.state(x.trie).tag : UINT32_MAX;
    if (tag != UINT32_MAX) {
      if (tag < o.n_tracked) {
        if (!(available(x)[tag / 64] >> (tag % 64) & 1)) continue;
        x.used[tag / 64] |= uint64_t(1) << (tag % 64);
      } else if (!room_for_optional(x) || o.values[tag]->md > budget()) {
        continue;
      }
      x.child = o.values[tag];
    } else {
      if (x.kdfa == ByteDfa::kDead || x.klen < o.key_min) continue;
      const SchemaNode* v = o.keys ? o.free_values[x.kdfa] : o.free_value;
      if (!v || v->md > budget()) continue;
      if (o.distinct_free && x.count < o.min_props) {  // it must differ from the others
        if (std::find(x.seen, x.seen + x.nseen, x.khash) != x.seen + x.nseen) continue;
        if (x.nseen >= SchemaLimits::kMaxDistinctFree) continue;
        x.seen[x.nseen++] = x.khash;
      }
      x.child = v;
    }
    ++x.count;
    keep |= 1u << i;
  }
  h_.mode = Mode::kColon;
  h_.in_key = false;
  return keep_top(keep);
}

// ---- the state key ---------------------------------------------------------------------------

std::string JsonMatcher::key() const {
  std::string k;
  k.reserve(32 + 48 * size_t(h_.nframes + h_.nvalues));
  auto put = [&k](const auto& v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  const uint8_t head[] = {uint8_t(h_.mode), h_.depth, h_.ws,  h_.nframes,   h_.nvalues,
                          h_.in_key,        h_.esc,   h_.low, h_.utf8_left, h_.utf8_lead,
                          h_.num,           h_.part,  h_.kw,  h_.kw_pos};
  put(head);
  k.append(reinterpret_cast<const char*>(h_.level), size_t(h_.depth) + 1);
  if (h_.esc != 0) {
    put(h_.unit);
    put(h_.high);
  }
  if (h_.mode == Mode::kNumber) {
    bool exact = false;
    for (int i = 0; i < h_.nvalues; ++i) exact |= values_[i].node->num.exact;
    if (exact) {  // field by field: no padding bytes in the key
      put(h_.np.mant);
      put(h_.np.ndig);
      put(h_.np.frac);
      put(h_.np.neg);
    }
  }
  for (int i = 0; i < h_.nframes; ++i) {
    const Frame& f = frames_[i];
    put(f.node);
    put(f.child);
    put(f.parents);
    const uint8_t flags = uint8_t(f.array) | uint8_t(f.empty) << 1;
    put(flags);
    if (f.array) {
      const ArrayRule& a = *f.node->arr;
      put(quantize(f.count, std::max<uint32_t>(a.min_items, uint32_t(a.prefix.size())), a.max_items,
                   kKeyClip));
      continue;
    }
    const ObjectRule& o = *f.node->obj;
    put(f.used);
    put(quantize(f.count, o.min_props, o.max_props, kKeyClip));
    const bool distinct = o.distinct_free && f.count < o.min_props;
    if (distinct) k.append(reinterpret_cast<const char*>(f.seen), f.nseen * sizeof(uint32_t));
    if (h_.in_key && i >= h_.level[top()]) {
      put(f.trie);
      put(f.kdfa);
      put(quantize_len(f.klen, o.key_min, o.key_max, o.key_clip));
      if (distinct) put(f.khash);
    }
  }
  for (int i = 0; i < h_.nvalues; ++i) {
    const Value& v = values_[i];
    put(v.node);
    put(v.parents);
    put(v.state);
    if (h_.mode == Mode::kString) {
      const StringRule& r = v.node->str;
      put(quantize_len(v.len, r.min_len, r.max_len, r.clip));
    }
  }
  return k;
}

}  // namespace cedar::text
