// Streaming detokenization: feed ids one at a time (as they are generated), get back the text
// that is complete so far. Bytes of a character split across tokens are held back until the
// character is complete, so every returned chunk is valid UTF-8 and the concatenation of all
// chunks (plus flush()) equals Tokenizer::decode of all ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "text/tokenizer.h"

namespace cedar::text {

class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok) : tok_(&tok) {}

  // Appends the token(s) and returns the newly completed text (possibly empty). Bytes that can
  // never become a valid character are emitted as U+FFFD right away.
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);

  // Emits whatever is held back (an incomplete character becomes U+FFFD) and resets.
  std::string flush();

  // Bytes currently held back (0..3).
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string drain();

  const Tokenizer* tok_;
  std::string pending_;
};

}  // namespace cedar::text
