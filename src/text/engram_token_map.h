// The Engram compressed token map (v41-architecture.md §8.1, v41-extras.md §1.3, corrected by
// canonical-arithmetic.md): every token id maps to a smaller id space in which tokens that
// normalise alike ("The", " the", "THE") share one id. The n-gram hashes of the Engram layers are
// computed over these ids, and every hash multiplier depends on the number of classes (99,092
// for the V4.1 tokenizer).
// ref: engram.py build_compressed_token_map
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace cedar::text {

struct EngramTokenMap {
  std::vector<int32_t> map;  // token id -> compressed id, for ids 0..vocab_size()-1
  int64_t n_ids = 0;         // number of compressed ids
};

// The reference normaliser (Hugging Face normalizers.Sequence of engram.py): NFKC, NFD, strip
// every General_Category Mark (Mn, Mc, Me), full lowercase per character, runs of [ \t\r\n]
// become one space, a text that is exactly " " is kept (sentinel U+E000), strip Unicode
// White_Space at both ends, then U+E000 -> " ". `text` must be valid UTF-8.
std::string engram_normalize(std::string_view text);

// Decodes each id alone (no clean-up; added tokens give their content); a text containing U+FFFD
// is keyed by the raw token string, any other by its normalised form (or the text itself if that
// is empty); compressed ids are handed out in first-seen order of the keys.
EngramTokenMap build_engram_token_map(const Tokenizer& tok);

// SHA-256 (lower-case hex) of the map as little-endian int32 values — the fingerprint recorded
// for the V4.1 map (c60a8632...).
std::string engram_token_map_sha256(const std::vector<int32_t>& map);

}  // namespace cedar::text
