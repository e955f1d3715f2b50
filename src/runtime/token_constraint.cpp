#include "runtime/token_constraint.h"

#include <algorithm>
#include <cmath>

namespace cedar::runtime {

namespace {
constexpr size_t kMaxCachedStates = 512;  // x (vocab / 8) bytes: 8 MB for the release vocabulary
// A mask refusing at most this many tokens is also kept as their list (at most 16 KB a state).
constexpr size_t kMaxSparse = 4096;
}  // namespace

TokenTrie::TokenTrie(const text::Tokenizer& tok) : vocab_(tok.vocab_size()) {
  nodes_.emplace_back();                           // the root
  std::vector<std::pair<uint32_t, int32_t>> ends;  // (node, id)
  // The DSML tag marker is the one added token a grammar writes: the model spells every tag of a
  // calls block with it, and a mask without it would force the tags into plain pieces. No other
  // token holds the marker's bytes (a plain one that did is left out): the tool-call grammar's
  // mask keys rely on it (text/dsml_grammar.h).
  const auto marker = tok.token_to_id(text::kDsmlMarker);
  std::string b;
  for (int32_t id = 0; id < vocab_; ++id) {
    if (tok.is_added(id) && id != marker) continue;
    b.clear();
    tok.append_token_bytes(id, &b);
    if (b.empty()) continue;
    if (id != marker && b.find(text::kDsmlMarker) != std::string::npos) continue;
    uint32_t at = 0;
    for (const char ch : b) {
      const uint8_t c = uint8_t(ch);
      uint32_t k = nodes_[at].first_child, prev = 0;
      while (k != 0 && nodes_[k].byte != c) prev = k, k = nodes_[k].next_sibling;
      if (k == 0) {
        k = uint32_t(nodes_.size());
        Node n;
        n.byte = c;
        nodes_.push_back(n);
        if (prev == 0)
          nodes_[at].first_child = k;  // no children yet (else prev would be the first)
        else
          nodes_[prev].next_sibling = k;
      }
      at = k;
    }
    ends.emplace_back(at, id);
  }
  std::sort(ends.begin(), ends.end());
  ids_.reserve(ends.size());
  for (size_t i = 0; i < ends.size();) {
    const uint32_t node = ends[i].first;
    nodes_[node].tok_begin = uint32_t(ids_.size());
    for (; i < ends.size() && ends[i].first == node; ++i) ids_.push_back(ends[i].second);
    nodes_[node].tok_end = uint32_t(ids_.size());
  }
}

template <class Matcher>
GrammarConstraint<Matcher>::GrammarConstraint(const TokenTrie& trie, const text::Tokenizer& tok,
                                              Matcher start, std::vector<int32_t> stop_ids)
    : trie_(trie),
      tok_(tok),
      m_(std::move(start)),
      stop_ids_(std::move(stop_ids)),
      stop_logits_(stop_ids_.size()) {}

template <class Matcher>
void GrammarConstraint<Matcher>::search(uint32_t node, const Matcher& m, Bits* allowed) const {
  const auto& nodes = trie_.nodes();
  for (uint32_t k = nodes[node].first_child; k != 0; k = nodes[k].next_sibling) {
    const auto& n = nodes[k];
    Matcher next = m;
    if (!next.step(n.byte)) continue;
    for (uint32_t t = n.tok_begin; t < n.tok_end; ++t) {
      const int32_t id = trie_.ids()[t];
      (*allowed)[size_t(id) / 64] |= uint64_t(1) << (id % 64);
    }
    search(k, next, allowed);
  }
}

std::shared_ptr<const TokenMask> TokenTrie::shared(const std::string& key) const {
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = shared_.find(key);
  return it == shared_.end() ? nullptr : it->second;
}

std::shared_ptr<const TokenMask> TokenTrie::share(const std::string& key,
                                                  std::shared_ptr<const TokenMask> mask) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (const auto it = shared_.find(key); it != shared_.end()) return it->second;
  if (shared_.size() < kMaxShared) shared_.emplace(key, mask);
  return mask;
}

namespace {

// Whether a matcher's state key holds nothing of its request's grammar, so that its mask may be
// shared by every request (text/dsml_grammar.h: free text, the inside of a raw value).
bool shareable(const text::JsonMatcher&) { return false; }
bool shareable(const text::ToolCallMatcher& m) { return m.grammar_free_key(); }

}  // namespace

template <class Matcher>
std::shared_ptr<const TokenMask> GrammarConstraint<Matcher>::build_mask(size_t n_logits) const {
  auto mask = std::make_shared<TokenMask>();
  mask->allowed.assign((size_t(trie_.vocab_size()) + 63) / 64, 0);
  search(0, m_, &mask->allowed);  // a finished matcher refuses every byte: an empty mask
  for (size_t i = 0; i < n_logits && mask->refused.size() <= kMaxSparse; ++i)
    if (i >= size_t(trie_.vocab_size()) || !(mask->allowed[i / 64] >> (i % 64) & 1))
      mask->refused.push_back(int32_t(i));
  mask->sparse = mask->refused.size() <= kMaxSparse;
  if (!mask->sparse) mask->refused = {};
  return mask;
}

template <class Matcher>
const TokenMask& GrammarConstraint<Matcher>::allowed(size_t n_logits) {
  std::string key = m_.key();
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  if (cache_.size() >= kMaxCachedStates) cache_.clear();
  std::shared_ptr<const TokenMask> mask;
  if (shareable(m_)) {
    const std::string shared_key = "tool:" + std::to_string(n_logits) + ":" + key;
    mask = trie_.shared(shared_key);
    if (!mask) mask = trie_.share(shared_key, build_mask(n_logits));
  } else {
    mask = build_mask(n_logits);
  }
  return *cache_.emplace(std::move(key), std::move(mask)).first->second;
}

template <class Matcher>
void GrammarConstraint<Matcher>::mask(std::span<float> logits) {
  if (broken_) return;
  const TokenMask& m = allowed(logits.size());
  // the stop tokens are added tokens, never in the trie: kept aside, restored below
  for (size_t s = 0; s < stop_ids_.size(); ++s)
    stop_logits_[s] = stop_ids_[s] >= 0 && size_t(stop_ids_[s]) < logits.size()
                          ? logits[size_t(stop_ids_[s])]
                          : 0.0f;
  bool any = false;
  if (m.sparse) {
    for (const int32_t id : m.refused) logits[size_t(id)] = -INFINITY;
    any = m.refused.size() < logits.size();
  } else {
    for (size_t i = 0; i < logits.size(); ++i) {
      const bool allow = i < size_t(trie_.vocab_size()) && (m.allowed[i / 64] >> (i % 64) & 1);
      if (!allow) logits[i] = -INFINITY;
      any |= allow;
    }
  }
  // the end of the answer: where the grammar may end (or, should no token continue it, to end
  // rather than sample from nothing)
  if (m_.done() || !any)
    for (size_t s = 0; s < stop_ids_.size(); ++s)
      if (stop_ids_[s] >= 0 && size_t(stop_ids_[s]) < logits.size())
        logits[size_t(stop_ids_[s])] = stop_logits_[s];
}

template <class Matcher>
void GrammarConstraint<Matcher>::accept(int32_t id) {
  if (broken_) return;
  if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) return;
  bytes_.clear();
  if (id >= 0 && id < tok_.vocab_size()) tok_.append_token_bytes(id, &bytes_);
  if (bytes_.empty() || !m_.feed(bytes_)) broken_ = true;
}

template class GrammarConstraint<text::JsonMatcher>;
template class GrammarConstraint<text::ToolCallMatcher>;

}  // namespace cedar::runtime
