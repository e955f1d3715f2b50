// decode_data_url: RFC 4648 base64 data URLs (padded or not) decode to their bytes; everything else
// (another scheme, no ";base64", bad characters, wrong padding, data after the padding, a dangling
// sextet) is refused rather than guessed at.
#include "server/data_url.h"

#include <gtest/gtest.h>

#include <string>

namespace cedar::server {
namespace {

TEST(DataUrl, DecodesBase64) {
  EXPECT_EQ(decode_data_url("data:image/png;base64,aGVsbG8="), "hello");
  EXPECT_EQ(decode_data_url("data:image/png;base64,aGVsbG8h"), "hello!");
  EXPECT_EQ(decode_data_url("data:image/png;base64,aGk="), "hi");
  EXPECT_EQ(decode_data_url("data:image/png;base64,aGk"), "hi");  // unpadded, as atob() takes
  EXPECT_EQ(decode_data_url("data:image/png;base64,aA=="), "h");
  EXPECT_EQ(decode_data_url("data:;base64,"), "");
  EXPECT_EQ(decode_data_url("data:image/jpeg;name=a.jpg;base64,aGVs\r\nbG8="), "hello");
  const std::string all = *decode_data_url("data:x;base64,AAECA/7/");
  EXPECT_EQ(all, std::string("\x00\x01\x02\x03\xfe\xff", 6));
}

TEST(DataUrl, RefusesWhatIsNotBase64) {
  for (const char* bad :
       {"https://example.com/a.png", "file:///etc/passwd", "data:image/png,abc",
        "data:image/png;base64", "data:image/png;base64,aGVsbG8==", "data:image/png;base64,aGk=x",
        "data:image/png;base64,a", "data:image/png;base64,aGV*bG8=", "data:image/png;base64,aGl=",
        "DATA:image/png;base64,aGk="})
    EXPECT_FALSE(decode_data_url(bad).has_value()) << bad;
}

}  // namespace
}  // namespace cedar::server
