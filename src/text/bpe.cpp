#include "text/bpe.h"

#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <stdexcept>

#include "text/byte_level.h"

namespace cedar::text {

// Word -> ids for short words. Bounded: cleared when full (prose has a small working set).
struct BpeModel::Cache {
  static constexpr std::size_t kMaxWordBytes = 64;
  static constexpr std::size_t kMaxEntries = 1 << 17;
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>> map;
};

BpeModel::BpeModel() : cache_(std::make_unique<Cache>()) {}
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

bool BpeModel::parse_merge(const nlohmann::json& mj, std::string* a, std::string* b) {
  if (mj.is_string()) {  // "a b" (the older serialisation)
    const std::string& s = mj.get_ref<const std::string&>();
    const auto sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) return false;
    a->assign(s, 0, sp);
    b->assign(s, sp + 1);
    return true;
  }
  if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
    *a = mj[0].get<std::string>();
    *b = mj[1].get<std::string>();
    return true;
  }
  return false;
}

BpeModel BpeModel::from_json(const nlohmann::json& m) {
  const std::string where = "tokenizer.json: model";
  if (!m.is_object()) throw std::runtime_error(where + " is missing");
  BpeParts parts;
  if (!m.contains("vocab") || !m["vocab"].is_object())
    throw std::runtime_error(where + ".vocab is missing or not an object");
  for (const auto& [tok, idj] : m["vocab"].items()) {
    if (!idj.is_number_integer())
      throw std::runtime_error(where + ".vocab['" + tok + "'] is not a valid id");
    parts.vocab.emplace_back(tok, idj.get<int64_t>());
  }
  if (!m.contains("merges") || !m["merges"].is_array())
    throw std::runtime_error(where + ".merges is missing or not an array");
  std::string a, b;
  for (const auto& mj : m["merges"]) {
    if (!parse_merge(mj, &a, &b)) {
      parts.merge_error = "merges[" + std::to_string(parts.merges.size()) + "] " + mj.dump() +
                          " is not two tokens (\"a b\" or [\"a\", \"b\"])";
      break;
    }
    parts.merges.emplace_back(a, b);
  }
  return from_parts(m, std::move(parts));
}

BpeModel BpeModel::from_parts(const nlohmann::json& m, BpeParts parts, std::size_t added_tokens) {
  const std::string where = "tokenizer.json: model";
  if (!m.is_object()) throw std::runtime_error(where + " is missing");
  if (m.value("type", "") != "BPE")
    throw std::runtime_error(where + ".type is '" + m.value("type", "") + "', only BPE supported");
  auto must_be_null = [&](const char* key) {
    if (m.contains(key) && !m[key].is_null())
      throw std::runtime_error(where + "." + key + " is set; cedar does not implement it");
  };
  must_be_null("dropout");
  must_be_null("continuing_subword_prefix");
  must_be_null("end_of_word_suffix");
  if (m.value("byte_fallback", false))
    throw std::runtime_error(where + ".byte_fallback is true; cedar does not implement it");
  if (!parts.merge_error.empty()) throw std::runtime_error(where + "." + parts.merge_error);

  BpeModel bpe;
  bpe.ignore_merges_ = m.value("ignore_merges", false);
  int64_t max_id = -1;
  const int64_t id_bound = int64_t(parts.vocab.size() + added_tokens);
  for (const auto& [tok, id] : parts.vocab) {
    if (id < 0 || id >= INT32_MAX)
      throw std::runtime_error(where + ".vocab['" + tok + "'] is not a valid id");
    if (id >= id_bound)
      throw std::runtime_error(where + ".vocab['" + tok + "'] = " + std::to_string(id) +
                               ": ids must be contiguous, and " +
                               std::to_string(parts.vocab.size()) + " vocab entries + " +
                               std::to_string(added_tokens) + " added tokens define ids below " +
                               std::to_string(id_bound) + " only");
    max_id = std::max(max_id, id);
  }
  bpe.id_to_token_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  bpe.has_id_.assign(static_cast<std::size_t>(max_id + 1), false);
  for (auto& [tok, id] : parts.vocab) {
    if (bpe.has_id_[id])
      throw std::runtime_error(where + ".vocab: id " + std::to_string(id) + " is used twice");
    bpe.id_to_token_[id] = std::move(tok);
    bpe.has_id_[id] = true;
  }
  bpe.vocab_.reserve(parts.vocab.size() * 2);
  for (std::size_t id = 0; id < bpe.id_to_token_.size(); ++id) {
    if (!bpe.has_id_[id]) continue;
    if (!bpe.vocab_.emplace(bpe.id_to_token_[id], static_cast<int32_t>(id)).second)
      throw std::runtime_error(where + ".vocab: token '" + bpe.id_to_token_[id] + "' twice");
  }
  for (int b = 0; b < 256; ++b) {
    const std::string s = bytes_to_byte_level(std::string(1, static_cast<char>(b)));
    auto it = bpe.vocab_.find(s);
    if (it == bpe.vocab_.end())
      throw std::runtime_error(where + ".vocab has no entry for byte " + std::to_string(b) + " ('" +
                               s + "'); byte-level BPE needs all 256");
    bpe.byte_id_[b] = it->second;
  }

  bpe.merges_.reserve(parts.merges.size() * 2);
  std::string ab;
  int32_t rank = 0;
  for (const auto& [a, b] : parts.merges) {
    ab.assign(a).append(b);
    auto ia = bpe.vocab_.find(a), ib = bpe.vocab_.find(b), ic = bpe.vocab_.find(ab);
    if (ia == bpe.vocab_.end() || ib == bpe.vocab_.end() || ic == bpe.vocab_.end())
      throw std::runtime_error(where + ".merges[" + std::to_string(rank) + "] '" + a + " " + b +
                               "' refers to a token missing from the vocab");
    // A repeated pair keeps its first (best) rank, as in `tokenizers`.
    bpe.merges_.emplace(pair_key(ia->second, ib->second), Merge{rank, ic->second});
    ++rank;
  }
  bpe.num_merges_ = parts.merges.size();
  return bpe;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(id_to_token_.size()) || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>* out) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1) {
    out->push_back(byte_id_[static_cast<unsigned char>(bytes[0])]);
    return;
  }
  if (bytes.size() > Cache::kMaxWordBytes) {
    merge_word(bytes, out);
    return;
  }
  std::string key(bytes);
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = cache_->map.find(key);
    if (it != cache_->map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = out->size();
  merge_word(bytes, out);
  std::vector<int32_t> ids(out->begin() + first, out->end());
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (cache_->map.size() >= Cache::kMaxEntries) cache_->map.clear();
  cache_->map.emplace(std::move(key), std::move(ids));
}

// ref: tokenizers models/bpe/word.rs Word::merge_all
void BpeModel::merge_word(std::string_view bytes, std::vector<int32_t>* out) const {
  if (ignore_merges_) {  // the whole word is a token: take it without merging
    auto it = vocab_.find(bytes_to_byte_level(bytes));
    if (it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
    bool alive;
  };
  const int32_t n = static_cast<int32_t>(bytes.size());
  std::vector<Symbol> sym(n);
  for (int32_t i = 0; i < n; ++i)
    sym[i] = {byte_id_[static_cast<unsigned char>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1, true};

  // Candidate merge of the pair starting at symbol `pos`: lowest rank first, then leftmost.
  struct Cand {
    int32_t rank, pos, id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push_pair = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    auto it = merges_.find(pair_key(sym[pos].id, sym[sym[pos].next].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    // Stale candidate: the pair at this position changed since it was pushed.
    auto it = merges_.find(pair_key(left.id, sym[left.next].id));
    if (it == merges_.end() || it->second.id != c.id || it->second.rank != c.rank) continue;
    Symbol& right = sym[left.next];
    left.id = c.id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

}  // namespace cedar::text
