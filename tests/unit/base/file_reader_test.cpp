#include "base/file_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::string temp_file(const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("cedar_file_reader_" + std::to_string(::getpid()) + ".bin"))
                               .string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string message_of(const cedar::FileReader& f, uint64_t off, size_t n) {
  std::vector<uint8_t> buf(n);
  try {
    f.read(off, n, buf.data());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(FileReader, ReadsTheRangeAskedFor) {
  const std::string path = temp_file("0123456789abcdef");
  auto f = cedar::FileReader::open(path);
  std::vector<uint8_t> buf(6);
  f->read(4, 6, buf.data());
  EXPECT_EQ(std::string(buf.begin(), buf.end()), "456789");
  f->drop_cached(0, 16);  // advisory, never fails
  std::filesystem::remove(path);
}

TEST(FileReader, AShortReadIsAnErrorNamingTheFileAndRange) {
  const std::string path = temp_file("0123456789");
  auto f = cedar::FileReader::open(path);
  const std::string m = message_of(*f, 6, 8);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("short read at bytes [6, 14)"), std::string::npos) << m;
  // a file truncated after it was opened (a shard replaced under a running server)
  std::filesystem::resize_file(path, 3);
  EXPECT_NE(message_of(*f, 0, 4).find("short read"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(FileReader, DirectReadsDeliverThePagesUpToTheEndOfTheFile) {
  std::string bytes(3 * 4096 + 100, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 7 + i / 4096);
  const std::string path = temp_file(bytes);
  auto f = cedar::FileReader::open(path);
  if (!f->open_direct()) GTEST_SKIP() << "this file system refuses O_DIRECT";
  constexpr size_t A = cedar::FileReader::kDirectAlign;
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(A, 4 * A));
  // the last two pages: the file ends 100 bytes into the second, which is all that is needed
  ASSERT_TRUE(f->read_direct(2 * A, 2 * A, A + 100, buf));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), A + 100), bytes.substr(2 * A));
  try {
    f->read_direct(2 * A, 2 * A, A + 101, buf);  // one byte more than the file has
    ADD_FAILURE() << "a read past the end delivered data";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("short read"), std::string::npos) << e.what();
  }
  std::free(buf);
  std::filesystem::remove(path);
}

TEST(FileReader, AMissingFileIsNamed) {
  try {
    cedar::FileReader::open("/nonexistent/cedar/shard.safetensors");
    FAIL() << "opened a missing file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cedar/shard.safetensors"),
              std::string::npos);
  }
}

}  // namespace
