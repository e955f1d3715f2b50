// read_gzip_file: a whole gzip member comes back byte for byte; every damaged or oversized file
// is refused with an error naming the file and the cause.
#include "base/gzip_file.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// `bytes` as one gzip member (zlib's deflate with the gzip wrapper)
std::string gzip(const std::string& bytes) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, uLong(bytes.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = uInt(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string temp_file(const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("cedar_gzip_" + std::to_string(::getpid()) + ".gz"))
                               .string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string error_of(const std::string& file_bytes, size_t max_bytes) {
  const std::string path = temp_file(file_bytes);
  try {
    cedar::read_gzip_file(path, max_bytes);
  } catch (const std::runtime_error& e) {
    std::filesystem::remove(path);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    return e.what();
  }
  std::filesystem::remove(path);
  return "";
}

// 17 MiB of text-like bytes: more than one of the reader's 16 MiB output pieces
std::string sample() {
  std::string s;
  for (uint64_t i = 0; s.size() < (17u << 20); ++i)
    s += "row " + std::to_string(i * 7919 % 100003) + "\n";
  return s;
}

TEST(GzipFile, InflatesAWholeMemberByteForByte) {
  const std::string raw = sample();
  const std::string path = temp_file(gzip(raw));
  const std::vector<uint8_t> got = cedar::read_gzip_file(path, raw.size());  // exactly the limit
  std::filesystem::remove(path);
  ASSERT_EQ(got.size(), raw.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), raw.begin()));
  EXPECT_EQ(error_of(gzip(""), 16), "");  // an empty member is a valid file
}

TEST(GzipFile, RefusesDamagedAndOversizedFiles) {
  const std::string raw = sample(), gz = gzip(raw);
  EXPECT_NE(error_of(gz, raw.size() - 1).find("inflates to more than"), std::string::npos);
  EXPECT_NE(error_of(gz.substr(0, gz.size() - 5), raw.size()).find("truncated"), std::string::npos);
  EXPECT_NE(error_of(gz.substr(0, gz.size() / 2), raw.size()).find("truncated"), std::string::npos);
  std::string crc = gz;
  crc[crc.size() - 6] ^= 0x5a;  // the CRC-32 in the trailer
  EXPECT_NE(error_of(crc, raw.size()).find("corrupt"), std::string::npos);
  EXPECT_NE(error_of(gz + "junk", raw.size()).find("bytes after"), std::string::npos);
  EXPECT_NE(error_of(gz + gz, 2 * raw.size()).find("bytes after"), std::string::npos);
  EXPECT_NE(error_of("compact.safetensors is not gzip", 1 << 20).find("corrupt"),
            std::string::npos);
  EXPECT_NE(error_of("", 1 << 20).find("empty"), std::string::npos);
}

}  // namespace
