#include "text/utf8.h"

#include <gtest/gtest.h>

#include <set>

#include "text/byte_level.h"
#include "text/sha256.h"

namespace cedar::text {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

TEST(Utf8, DecodesEveryLength) {
  char32_t cp = 0;
  EXPECT_EQ(utf8_decode("A", 0, &cp), 1u);
  EXPECT_EQ(cp, U'A');
  EXPECT_EQ(utf8_decode("\xC3\xA9", 0, &cp), 2u);
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(utf8_decode("\xE4\xB8\xAD", 0, &cp), 3u);
  EXPECT_EQ(cp, 0x4E2Du);
  EXPECT_EQ(utf8_decode("\xF0\x9F\x98\x80", 0, &cp), 4u);
  EXPECT_EQ(cp, 0x1F600u);
}

TEST(Utf8, RejectsIllFormed) {
  char32_t cp;
  for (const char* bad :
       {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF0\x80\x80\x80",
        "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xE4\xB8", "\xC3"}) {
    EXPECT_EQ(utf8_decode(bad, 0, &cp), 0u) << ::testing::PrintToString(std::string(bad));
    EXPECT_FALSE(utf8_valid(bad));
  }
  std::size_t off = 99;
  EXPECT_FALSE(utf8_valid("ok\xE4\xB8x", &off));
  EXPECT_EQ(off, 2u);
  EXPECT_TRUE(utf8_valid("plain ascii, 中文, 😀"));
}

TEST(Utf8, LossyUsesMaximalSubparts) {
  // Rust from_utf8_lossy / WHATWG: a truncated sequence is one U+FFFD, an impossible byte is one.
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x98"
                       "b"),
            "a" + kFFFD + "b");
  EXPECT_EQ(utf8_lossy("\xE0\x80"), kFFFD + kFFFD);              // E0 needs A0..BF next
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // surrogates
  EXPECT_EQ(utf8_lossy("\xC3\xA9\xFF"), "\xC3\xA9" + kFFFD);
  EXPECT_EQ(utf8_lossy("fine"), "fine");
}

TEST(Utf8, IncompleteTail) {
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE0\x80"), 0u);  // can never complete
  EXPECT_EQ(utf8_incomplete_tail("\x80\x80"), 0u);
}

TEST(ByteLevel, MapsEveryByteToADistinctPrintableChar) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_to_char(static_cast<unsigned char>(b));
    EXPECT_TRUE(seen.insert(c).second) << b;
    EXPECT_EQ(char_to_byte(c), b);
    EXPECT_LT(c, 0x144u);
  }
  EXPECT_EQ(byte_to_char(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_char('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_char('A'), U'A');
  EXPECT_EQ(byte_to_char(0xAD), 0x143u);  // the last remapped byte
  EXPECT_EQ(char_to_byte(U'｜'), -1);
}

TEST(ByteLevel, RoundTripsArbitraryBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string spelled = bytes_to_byte_level(all);
  EXPECT_TRUE(utf8_valid(spelled));
  std::string back;
  ASSERT_TRUE(byte_level_to_bytes(spelled, &back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(bytes_to_byte_level(" hello"), "\xC4\xA0hello");
  EXPECT_FALSE(byte_level_to_bytes("<｜User｜>", &back));
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 h;  // one million 'a', fed in uneven pieces
  const std::string chunk(997, 'a');
  std::size_t left = 1000000;
  while (left > 0) {
    const std::size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(to_hex(h.digest()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace cedar::text
