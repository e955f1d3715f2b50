#include "text/incremental_decoder.h"

#include <gtest/gtest.h>

#include "text/byte_level.h"
#include "text/utf8.h"
#include "text_test_util.h"

namespace cedar::text {
namespace {

using testing::v41_tokenizer;

const std::string kText =
    "Hello, 世界! 😀👨‍👩‍👧 naïve café e\u0301 𝐀𝐁 𠀀 한국어 مرحبا\n<｜User｜> "
    "done.";

// The single-byte token of every byte, so that a text can be fed one byte at a time: this splits
// every multi-byte character at every possible point.
int32_t byte_token(const Tokenizer& tok, unsigned char b) {
  return *tok.token_to_id(bytes_to_byte_level(std::string(1, static_cast<char>(b))));
}

TEST(IncrementalDecoder, ByteByByteGivesValidChunksThatConcatenateToTheText) {
  const Tokenizer& tok = v41_tokenizer();
  IncrementalDecoder dec(tok);
  std::string all;
  for (unsigned char b : kText) {
    const std::string chunk = dec.push(byte_token(tok, b));
    EXPECT_TRUE(utf8_valid(chunk));
    all += chunk;
    EXPECT_LE(dec.pending_bytes(), 3u);
  }
  EXPECT_EQ(dec.pending_bytes(), 0u);
  all += dec.flush();
  EXPECT_EQ(all, kText);
}

TEST(IncrementalDecoder, HoldsBackASplitCharacter) {
  const Tokenizer& tok = v41_tokenizer();
  IncrementalDecoder dec(tok);
  // 😀 = F0 9F 98 80
  EXPECT_EQ(dec.push(byte_token(tok, 'a')), "a");
  EXPECT_EQ(dec.push(byte_token(tok, 0xF0)), "");
  EXPECT_EQ(dec.push(byte_token(tok, 0x9F)), "");
  EXPECT_EQ(dec.push(byte_token(tok, 0x98)), "");
  EXPECT_EQ(dec.pending_bytes(), 3u);
  EXPECT_EQ(dec.push(byte_token(tok, 0x80)), "😀");
  EXPECT_EQ(dec.pending_bytes(), 0u);
}

TEST(IncrementalDecoder, RealTokenSequenceStreamsLikeDecode) {
  const Tokenizer& tok = v41_tokenizer();
  const std::vector<int32_t> ids = tok.encode(kText, /*allow_special=*/true);
  IncrementalDecoder dec(tok);
  std::string all;
  for (int32_t id : ids) {
    const std::string chunk = dec.push(id);
    EXPECT_TRUE(utf8_valid(chunk));
    all += chunk;
  }
  all += dec.flush();
  EXPECT_EQ(all, tok.decode(ids));
  EXPECT_EQ(all, kText);
}

TEST(IncrementalDecoder, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer& tok = v41_tokenizer();
  IncrementalDecoder dec(tok);
  // A continuation byte with no lead can never complete: emitted as U+FFFD at once.
  EXPECT_EQ(dec.push(byte_token(tok, 0x80)), "\xEF\xBF\xBD");
  // A lead byte followed by a non-continuation: U+FFFD, then the ASCII byte.
  EXPECT_EQ(dec.push(byte_token(tok, 0xE4)), "");
  EXPECT_EQ(dec.push(byte_token(tok, 'x')), "\xEF\xBF\xBDx");
  // An incomplete character at the end is flushed as U+FFFD.
  EXPECT_EQ(dec.push(byte_token(tok, 0xE4)), "");
  EXPECT_EQ(dec.push(byte_token(tok, 0xB8)), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.pending_bytes(), 0u);
}

TEST(IncrementalDecoder, SpanPushAndBadIds) {
  const Tokenizer& tok = v41_tokenizer();
  IncrementalDecoder dec(tok);
  const std::vector<int32_t> ids = {19923, 2058};
  EXPECT_EQ(dec.push(ids), "Hello world");
  EXPECT_THROW(dec.push(129280), std::out_of_range);
}

}  // namespace
}  // namespace cedar::text
