#include "text/tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/file_reader.h"
#include "base/json_limits.h"
#include "text/byte_level.h"
#include "text/utf8.h"

namespace cedar::text {

Tokenizer::Tokenizer(BpeModel bpe, PreTokenizer pre) : bpe_(std::move(bpe)), pre_(std::move(pre)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
  return from_json_text(read_regular_file(path, kMaxTokenizerJsonBytes, "tokenizer file"), path);
}

namespace {

// The normalizer must be the identity (absent, null, or an empty Sequence).
void check_normalizer(const nlohmann::json& j) {
  if (!j.contains("normalizer") || j["normalizer"].is_null()) return;
  const auto& n = j["normalizer"];
  if (n.value("type", "") == "Sequence" && n.contains("normalizers") &&
      n["normalizers"].is_array() && n["normalizers"].empty())
    return;
  throw std::runtime_error("normalizer is not the identity (only an empty Sequence is supported)");
}

// Post-processor and decoder: only ByteLevel (or none). ByteLevel post-processing only moves
// offsets, so it never adds ids; the ByteLevel decoder is what decode() implements.
void check_byte_level_or_null(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return;
  if (j[key].value("type", "") != "ByteLevel")
    throw std::runtime_error(std::string(key) + ".type is '" + j[key].value("type", "") +
                             "', only ByteLevel is supported");
}

}  // namespace

Tokenizer Tokenizer::from_json_text(std::string_view text, const std::string& origin) {
  // model.vocab and model.merges (256k entries) are streamed into BpeParts by the parser callback
  // and dropped from the DOM: building them as JSON nodes would triple the load time.
  BpeParts parts;
  std::string key1, key2;  // current keys at depth 1 (top level) and 2 (inside "model")
  std::string vocab_key;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::key) {
      if (depth == 1) key1 = parsed.get<std::string>();
      if (depth == 2) key2 = parsed.get<std::string>();
      if (depth == 3 && key1 == "model" && key2 == "vocab") {
        vocab_key = parsed.get<std::string>();
        return false;  // keeps the key out of the DOM; the value event still follows
      }
      return true;
    }
    if (depth != 3 || key1 != "model") return true;
    if (key2 == "vocab" && event == E::value) {
      if (parsed.is_number_integer()) {
        parts.vocab.emplace_back(std::move(vocab_key), parsed.get<int64_t>());
      } else {
        parts.vocab.emplace_back(std::move(vocab_key), -1);  // reported as an invalid id
      }
      return false;
    }
    if (key2 == "merges" && (event == E::value || event == E::array_end)) {
      std::string a, b;
      if (BpeModel::parse_merge(parsed, &a, &b)) {
        parts.merges.emplace_back(std::move(a), std::move(b));
      } else if (parts.merge_error.empty()) {
        parts.merge_error = "merges[" + std::to_string(parts.merges.size()) + "] " + parsed.dump() +
                            " is not two tokens";
      }
      return false;
    }
    return true;
  };
  nlohmann::json j;
  if (json_nesting_depth(text) > kMaxJsonDepth)
    throw std::runtime_error(origin + ": JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels");
  try {
    j = nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(origin + ": invalid JSON: " + e.what());
  }
  try {
    if (!j.is_object()) throw std::runtime_error("top level is not an object");
    check_normalizer(j);
    check_byte_level_or_null(j, "post_processor");
    check_byte_level_or_null(j, "decoder");
    if (!j.contains("model")) throw std::runtime_error("missing 'model'");
    if (!j.contains("pre_tokenizer")) throw std::runtime_error("missing 'pre_tokenizer'");
    const auto& model = j["model"];
    const bool bpe_model = model.is_object() && model.value("type", "") == "BPE";
    if (bpe_model && (!model.contains("vocab") || !model["vocab"].is_object()))
      throw std::runtime_error("model.vocab is missing or not an object");
    if (bpe_model && (!model.contains("merges") || !model["merges"].is_array()))
      throw std::runtime_error("model.merges is missing or not an array");
    const bool has_added = j.contains("added_tokens") && j["added_tokens"].is_array();
    const size_t n_added = has_added ? j["added_tokens"].size() : 0;
    // model errors come first
    BpeModel bpe = BpeModel::from_parts(model, std::move(parts), n_added);
    Tokenizer tok(std::move(bpe), PreTokenizer::from_json(j["pre_tokenizer"]));

    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array()) throw std::runtime_error("added_tokens is not an array");
      for (const auto& a : j["added_tokens"]) {
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
            !a.contains("content") || !a["content"].is_string())
          throw std::runtime_error("added_tokens entry without integer 'id' and string 'content'");
        AddedToken t;
        const int64_t id = a["id"].get<int64_t>();
        // ids are contiguous: none can reach past every token the file defines (checked before
        // the id index below is sized by the largest)
        const int64_t id_bound = int64_t(tok.bpe_.vocab_entries() + n_added);
        if (id < 0 || id >= id_bound)
          throw std::runtime_error("added token id " + std::to_string(id) +
                                   " is out of range: ids must be contiguous, and " +
                                   std::to_string(tok.bpe_.vocab_entries()) + " vocab entries + " +
                                   std::to_string(n_added) + " added tokens define ids below " +
                                   std::to_string(id_bound) + " only");
        t.id = static_cast<int32_t>(id);
        t.content = a["content"].get<std::string>();
        t.special = a.value("special", false);
        t.normalized = a.value("normalized", false);
        if (t.content.empty())
          throw std::runtime_error("added token " + std::to_string(id) + " has empty content");
        if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false))
          throw std::runtime_error("added token '" + t.content +
                                   "' uses lstrip/rstrip/single_word, which cedar does not "
                                   "implement");
        // An added token that is also a vocab entry must carry the same id (ids 0..2).
        if (auto vid = tok.bpe_.token_to_id(t.content); vid && *vid != t.id)
          throw std::runtime_error("added token '" + t.content + "' has id " +
                                   std::to_string(t.id) + " but the vocab says " +
                                   std::to_string(*vid));
        tok.added_.push_back(std::move(t));
      }
    }
    std::sort(tok.added_.begin(), tok.added_.end(),
              [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
    for (std::size_t i = 1; i < tok.added_.size(); ++i) {
      if (tok.added_[i].id == tok.added_[i - 1].id)
        throw std::runtime_error("added token id " + std::to_string(tok.added_[i].id) +
                                 " appears twice");
    }

    int32_t limit = tok.bpe_.id_limit();
    if (!tok.added_.empty()) limit = std::max(limit, tok.added_.back().id + 1);
    tok.added_index_.assign(limit, -1);
    for (std::size_t i = 0; i < tok.added_.size(); ++i)
      tok.added_index_[tok.added_[i].id] = static_cast<int32_t>(i);
    // Every id below the limit must be defined: ids index the embedding rows, and the Engram
    // token map walks 0..len(tokenizer)-1.
    for (int32_t id = 0; id < limit; ++id) {
      if (tok.added_index_[id] < 0 && !tok.bpe_.id_to_token(id))
        throw std::runtime_error("token id " + std::to_string(id) +
                                 " is neither in model.vocab nor in added_tokens (ids must be "
                                 "contiguous)");
    }
    tok.vocab_size_ = limit;
    tok.matcher_ = AddedTokenMatcher(tok.added_);
    return tok;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(origin + ": " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(origin + ": " + e.what());
  }
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && id < vocab_size_ && added_index_[id] >= 0;
}

bool Tokenizer::is_special(int32_t id) const {
  return is_added(id) && added_[added_index_[id]].special;
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size_)
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(vocab_size_) + ")");
  if (added_index_[id] >= 0) return added_[added_index_[id]].content;
  return *bpe_.id_to_token(id);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const auto& t : added_) {
    if (t.content == token) return t.id;
  }
  return bpe_.token_to_id(token);
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<std::string_view> pieces;
  pre_.split(text, &pieces);
  for (std::string_view p : pieces) bpe_.encode_word(p, out);
}

void Tokenizer::encode_append(std::string_view text, bool allow_special,
                              std::vector<int32_t>* out) const {
  std::size_t bad = 0;
  if (!utf8_valid(text, &bad))
    throw std::runtime_error("text to encode is not valid UTF-8 (bad byte at offset " +
                             std::to_string(bad) + ")");
  if (!allow_special) {
    encode_plain(text, out);
    return;
  }
  std::vector<Segment> segs;
  matcher_.segment(text, &segs);
  for (const Segment& s : segs) {
    if (s.id >= 0) {
      out->push_back(s.id);
    } else {
      encode_plain(s.text, out);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  encode_append(text, allow_special, &ids);
  return ids;
}

void Tokenizer::append_token_bytes(int32_t id, std::string* out) const {
  const std::string& tok = id_to_token(id);  // range-checks
  if (added_index_[id] >= 0) {
    // ref: tokenizers decoders/byte_level.rs — a token all of whose characters are ByteLevel
    // characters is mapped back to bytes; any other token (the ｜/▁ control strings) passes
    // through as its UTF-8 text. For the DeepSeek table both readings give the content.
    std::string bytes;
    if (byte_level_to_bytes(tok, &bytes)) {
      *out += bytes;
    } else {
      *out += tok;
    }
    return;
  }
  std::string bytes;
  if (!byte_level_to_bytes(tok, &bytes)) {
    *out += tok;  // not a ByteLevel spelling: the decoder passes such a token through
  } else {
    *out += bytes;
  }
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) append_token_bytes(id, &out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  return utf8_lossy(decode_bytes(ids));
}

}  // namespace cedar::text
