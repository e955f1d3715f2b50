// The byte-level BPE model of tokenizer.json: vocab (ByteLevel-spelled token -> id) and merges
// applied by rank. A word (one pre-tokenizer piece, as raw bytes) starts as one symbol per byte;
// the adjacent pair with the lowest merge rank is merged (leftmost on ties) until no pair has a
// merge — the Hugging Face algorithm, run with a heap over a linked symbol list. Results for short
// words are cached, since prose repeats its words.
// ref: tokenizers models/bpe/word.rs Word::merge_all, models/bpe/model.rs BPE::tokenize
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cedar::text {

// The bulky parts of the model node, as read from tokenizer.json (see Tokenizer::from_json_text,
// which streams them out of the JSON parser instead of building a DOM of 256k nodes).
struct BpeParts {
  std::vector<std::pair<std::string, int64_t>> vocab;       // token -> id, file order
  std::vector<std::pair<std::string, std::string>> merges;  // rank order
  std::string merge_error;  // first malformed merge entry, reported by build()
};

class BpeModel {
 public:
  // Builds from the tokenizer.json "model" node. Throws std::runtime_error naming the field on
  // anything cedar does not implement (dropout, byte fallback, subword prefixes, a merge whose
  // parts or result are not in the vocab, a byte without a vocab entry).
  static BpeModel from_json(const nlohmann::json& model);
  // Same, with vocab and merges given separately (`model` may lack or hold them empty). Ids are
  // contiguous (tokenizer.json's added tokens may fill the vocab's gaps), so every vocab id must
  // be below vocab entries + `added_tokens`: a larger one is refused before the id table is
  // sized by it.
  static BpeModel from_parts(const nlohmann::json& model, BpeParts parts,
                             std::size_t added_tokens = 0);
  // Splits a merges entry ("a b" or ["a", "b"]); false if malformed.
  static bool parse_merge(const nlohmann::json& entry, std::string* a, std::string* b);

  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one pre-tokenized piece given as raw bytes. Thread-safe.
  void encode_word(std::string_view bytes, std::vector<int32_t>* out) const;

  std::size_t vocab_entries() const { return vocab_.size(); }
  std::size_t num_merges() const { return num_merges_; }
  // ByteLevel-spelled token of a vocab id, nullptr if the vocab has no such id.
  const std::string* id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Largest vocab id + 1.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  BpeModel();
  void merge_word(std::string_view bytes, std::vector<int32_t>* out) const;

  struct Merge {
    int32_t rank;
    int32_t id;  // id of the merged token
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::vector<std::string> id_to_token_;  // "" for ids the vocab skips
  // Views into id_to_token_ (which is never resized after construction).
  std::unordered_map<std::string_view, int32_t> vocab_;
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::size_t num_merges_ = 0;
  int32_t byte_id_[256];
  bool ignore_merges_ = false;

  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace cedar::text
