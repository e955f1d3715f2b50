// The DeepSeek (V3/V4/V4.1) tokenizer: a Hugging Face tokenizer.json with an identity normalizer,
// regex Split pre-tokenizers, byte-level BPE and an added-token table.
//
//   encode(text, allow_special=false)  plain BPE: message content, `cedar tokenize`. Never yields
//                                      an added-token id: "<｜User｜>" is 5 ordinary tokens.
//   encode(text, allow_special=true)   added-token strings become their ids (template segments).
//   decode(ids)                        bytes of every token (added tokens included) as UTF-8,
//                                      ill-formed sequences replaced by U+FFFD.
// See docs/TOKENIZER.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/pretokenize.h"

namespace cedar::text {

class Tokenizer {
 public:
  // Loads tokenizer.json. Throws std::runtime_error naming the file and the offending key.
  static Tokenizer load(const std::string& path);
  // Same from the JSON text; `origin` names it in error messages.
  static Tokenizer from_json_text(std::string_view json, const std::string& origin);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Throws std::runtime_error if `text` is not well-formed UTF-8 (naming the byte offset).
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
  void encode_append(std::string_view text, bool allow_special, std::vector<int32_t>* out) const;

  // Raw bytes of the tokens (may end inside a character). Throws std::out_of_range on an id
  // outside [0, vocab_size()).
  std::string decode_bytes(std::span<const int32_t> ids) const;
  // decode_bytes made valid UTF-8 the way `tokenizers` does (Rust from_utf8_lossy).
  std::string decode(std::span<const int32_t> ids) const;
  // Bytes of one token (appended to *out).
  void append_token_bytes(int32_t id, std::string* out) const;

  // The token's string as stored in tokenizer.json: the added-token content, or the ByteLevel
  // spelling of a vocab entry ("Ġhello"). Throws std::out_of_range for an unknown id.
  const std::string& id_to_token(int32_t id) const;
  // Looks up an added-token content first, then a ByteLevel-spelled vocab entry.
  std::optional<int32_t> token_to_id(std::string_view token) const;

  // len(tokenizer) in Hugging Face terms: the number of ids, 0..vocab_size()-1, all defined.
  int32_t vocab_size() const { return vocab_size_; }
  bool is_added(int32_t id) const;
  bool is_special(int32_t id) const;  // the added token's "special" flag
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const BpeModel& model() const { return bpe_; }

 private:
  Tokenizer(BpeModel bpe, PreTokenizer pre);
  void encode_plain(std::string_view text, std::vector<int32_t>* out) const;

  BpeModel bpe_;
  PreTokenizer pre_;
  std::vector<AddedToken> added_;     // sorted by id
  std::vector<int32_t> added_index_;  // id -> index into added_, -1 if not added
  AddedTokenMatcher matcher_;
  int32_t vocab_size_ = 0;
};

}  // namespace cedar::text
