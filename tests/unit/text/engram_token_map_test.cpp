#include "text/engram_token_map.h"

#include <gtest/gtest.h>

#include "text/byte_level.h"
#include "text_test_util.h"

namespace cedar::text {
namespace {

using testing::v41_tokenizer;

const EngramTokenMap& v41_map() {
  static const EngramTokenMap m = build_engram_token_map(v41_tokenizer());
  return m;
}

int32_t id_of(const std::string& raw_bytes) {
  return *v41_tokenizer().token_to_id(bytes_to_byte_level(raw_bytes));
}

TEST(EngramTokenMap, V41HasTheReleasedSizePadAndFingerprint) {
  const EngramTokenMap& m = v41_map();
  ASSERT_EQ(m.map.size(), 129280u);
  // engram_compressed_vocab_size of the release config; every hash multiplier depends on it.
  EXPECT_EQ(m.n_ids, 99092);
  EXPECT_EQ(m.map[2], 2);  // pad (engram_pad_id 2)
  // v41-extras.md §1.3 / canonical-arithmetic.md: SHA-256 of the map as little-endian int32.
  EXPECT_EQ(engram_token_map_sha256(m.map),
            "c60a86322ec17b4142bfef3c57a8d81fb428550cdf487f88a4320cb59fe46481");
}

TEST(EngramTokenMap, IdsAreDenseAndFirstSeen) {
  const EngramTokenMap& m = v41_map();
  int32_t next = 0;
  for (int32_t v : m.map) {
    ASSERT_LE(v, next);  // a new class gets the next id, in token-id order
    if (v == next) ++next;
  }
  EXPECT_EQ(next, m.n_ids);
  EXPECT_EQ(m.map[0], 0);
  EXPECT_EQ(m.map[1], 1);
}

TEST(EngramTokenMap, CaseSpaceAndAccentVariantsShareAClass) {
  const EngramTokenMap& m = v41_map();
  EXPECT_EQ(m.map[id_of("Hello")], m.map[id_of(" hello")]);
  EXPECT_EQ(m.map[id_of("The")], m.map[id_of(" the")]);
  EXPECT_EQ(m.map[id_of("the")], m.map[id_of(" THE")]);
  EXPECT_NE(m.map[id_of("the")], m.map[id_of("cat")]);
  // A lone space and a run of spaces are both " " (the sentinel keeps them from becoming "").
  EXPECT_EQ(m.map[id_of(" ")], m.map[id_of("  ")]);
  EXPECT_EQ(m.map[id_of(" ")], m.map[id_of("\n")]);
  // Partial UTF-8 tokens are keyed by their raw spelling: distinct bytes stay distinct.
  EXPECT_NE(m.map[id_of("\xE4")], m.map[id_of("\xE5")]);
}

TEST(EngramNormalize, FollowsTheReferenceSequence) {
  EXPECT_EQ(engram_normalize("Hello"), "hello");
  EXPECT_EQ(engram_normalize("  The\t\n"), "the");
  EXPECT_EQ(engram_normalize(" "), " ");
  EXPECT_EQ(engram_normalize("\t\r\n "), " ");
  EXPECT_EQ(engram_normalize("a  b"), "a b");
  EXPECT_EQ(engram_normalize("Café"), "cafe");        // NFD + strip Mn
  EXPECT_EQ(engram_normalize("ﬁ"), "fi");             // NFKC
  EXPECT_EQ(engram_normalize("Ⅻ"), "xii");            // NFKC then lowercase
  EXPECT_EQ(engram_normalize("İ"), "i");              // I + U+0307, mark stripped
  EXPECT_EQ(engram_normalize("ΣΑΣ"), "σασ");          // per-character lowercase, no final sigma
  EXPECT_EQ(engram_normalize("\u0301"), "");          // only a mark: empty (caller keeps text)
  EXPECT_EQ(engram_normalize("क्षि"), "कष");           // Devanagari virama (Mn), vowel sign (Mc)
  EXPECT_EQ(engram_normalize("a\u20DD"), "a");        // enclosing mark (Me)
  EXPECT_EQ(engram_normalize("\u3000x\u00A0"), "x");  // NFKC spaces, then strip
  EXPECT_EQ(engram_normalize("\u0085x\u2028"), "x");  // White_Space strip
  EXPECT_EQ(engram_normalize("\uE000"), " ");         // the sentinel itself becomes a space
  EXPECT_EQ(engram_normalize(std::string("\0", 1)), std::string("\0", 1));  // NUL is a character
}

}  // namespace
}  // namespace cedar::text
