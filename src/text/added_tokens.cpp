#include "text/added_tokens.h"

namespace cedar::text {

void AddedTokenMatcher::Trie::insert(std::string_view s, int32_t id) {
  if (s.empty()) return;
  first_byte[static_cast<unsigned char>(s[0])] = true;
  int32_t cur = 0;
  for (unsigned char b : s) {
    int32_t child = -1;
    for (const auto& [byte, idx] : nodes[cur].next) {
      if (byte == b) child = idx;
    }
    if (child < 0) {
      child = static_cast<int32_t>(nodes.size());
      nodes[cur].next.emplace_back(b, child);
      nodes.emplace_back();
    }
    cur = child;
  }
  if (nodes[cur].id < 0) nodes[cur].id = id;  // a duplicate string keeps its first id
}

std::size_t AddedTokenMatcher::Trie::longest_at(std::string_view text, std::size_t pos,
                                                int32_t* id) const {
  std::size_t best = 0;
  int32_t cur = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    int32_t child = -1;
    for (const auto& [byte, idx] : nodes[cur].next) {
      if (byte == b) child = idx;
    }
    if (child < 0) break;
    cur = child;
    if (nodes[cur].id >= 0) {
      best = i + 1 - pos;
      *id = nodes[cur].id;
    }
  }
  return best;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  for (const auto& t : tokens) (t.normalized ? normalized_ : raw_).insert(t.content, t.id);
}

void AddedTokenMatcher::split_with(const Trie& trie, std::string_view text,
                                   std::vector<Segment>* out) {
  std::size_t plain_start = 0, pos = 0;
  while (pos < text.size()) {
    int32_t id = -1;
    const std::size_t len = trie.first_byte[static_cast<unsigned char>(text[pos])]
                                ? trie.longest_at(text, pos, &id)
                                : 0;
    if (len == 0) {
      ++pos;
      continue;
    }
    if (pos > plain_start) out->push_back({-1, text.substr(plain_start, pos - plain_start)});
    out->push_back({id, text.substr(pos, len)});
    pos += len;
    plain_start = pos;
  }
  if (plain_start < text.size()) out->push_back({-1, text.substr(plain_start)});
}

void AddedTokenMatcher::segment(std::string_view text, std::vector<Segment>* out) const {
  if (raw_.empty() && normalized_.empty()) {
    if (!text.empty()) out->push_back({-1, text});
    return;
  }
  std::vector<Segment> first;
  split_with(raw_, text, &first);
  for (const Segment& s : first) {
    if (s.id >= 0) {
      out->push_back(s);
    } else {
      split_with(normalized_, s.text, out);
    }
  }
}

}  // namespace cedar::text
