// Regular files only: every reader of model files (open_regular_file, read_regular_file,
// FileReader, MappedFile) refuses a FIFO, a directory and (with no_follow) a symbolic link, naming
// the path and the kind, without blocking on the FIFO; read_regular_file refuses a file over its
// size limit before reading it.
#include "base/regular_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>

#include "base/file_reader.h"
#include "base/mapped_file.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;

class RegularFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cedar_regular_file_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "plain.json") << "{\"a\": 1}";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// The message of what f throws ("" when it does not).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST_F(RegularFile, AFifoIsRefusedAtOnceByEveryReader) {
  // a FIFO with no writer: an ordinary open for reading would wait for one forever
  const std::string fifo = at("config.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string want = fifo + ": not a regular file (a FIFO)";
  EXPECT_EQ(error_of([&] { open_regular_file(fifo); }), want);
  EXPECT_EQ(error_of([&] { read_regular_file(fifo, 1 << 20, "config.json"); }), want);
  EXPECT_EQ(error_of([&] { FileReader::open(fifo); }), want);
  EXPECT_EQ(error_of([&] { MappedFile::open(fifo); }), want);
}

TEST_F(RegularFile, DirectoriesAndLinksAreNamed) {
  fs::create_directory(dir_ / "sub");
  EXPECT_EQ(error_of([&] { open_regular_file(at("sub")); }),
            at("sub") + ": not a regular file (a directory)");
  fs::create_symlink(dir_ / "plain.json", dir_ / "link.json");
  EXPECT_EQ(read_regular_file(at("link.json"), 100, "x"), "{\"a\": 1}");  // followed by default
  EXPECT_NE(error_of([&] {
              open_regular_file(at("link.json"), nullptr, {.no_follow = true});
            }).find("link.json: not a regular file (a symbolic link, not followed)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { open_regular_file(at("missing.json")); }).find("cannot open"),
            std::string::npos);
}

TEST_F(RegularFile, ReadsWholeFilesUpToTheirLimit) {
  uint64_t size = 0;
  const UniqueFd fd = open_regular_file(at("plain.json"), &size);
  EXPECT_TRUE(bool(fd));
  EXPECT_EQ(size, 8u);
  // the descriptor is an ordinary blocking one again
  EXPECT_EQ(::fcntl(fd.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_EQ(read_regular_file(at("plain.json"), 8, "config.json"), "{\"a\": 1}");
  EXPECT_EQ(error_of([&] { read_regular_file(at("plain.json"), 7, "config.json"); }),
            at("plain.json") + ": 8 bytes, more than a config.json may have (7)");
}

}  // namespace
}  // namespace cedar
