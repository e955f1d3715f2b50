// DirFd: no operation follows a symbolic link planted in the directory (a victim file outside it
// stays as it was), writes are atomic under fresh temp names, and private_problem() names every
// way another user could write the directory (another owner, group/other write bits, sticky or
// not), while a symlinked path to a private directory is fine.
#include "base/dir_fd.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace cedar {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class DirFdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("cedar_dir_fd_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    victim_ = root_ / "victim.txt";  // outside the directory under test
    std::ofstream(victim_) << "precious";
    mtime_ = fs::last_write_time(victim_);
    dir_ = root_ / "cache";
  }
  void TearDown() override { fs::remove_all(root_); }
  void expect_victim_intact() const {
    EXPECT_EQ(slurp(victim_), "precious");
    EXPECT_EQ(fs::last_write_time(victim_), mtime_);
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(victim_)));
  }

  fs::path root_, victim_, dir_;
  fs::file_time_type mtime_;
};

TEST_F(DirFdTest, PlantedLinksAreNeverFollowed) {
  const DirFd d = DirFd::open(dir_.string(), /*create=*/true);
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  // links at the temp names the next writes will try, and at the final name
  for (uint64_t n = 0; n < 3; ++n) fs::create_symlink(victim_, dir_ / DirFd::temp_name("unit", n));
  fs::create_symlink(victim_, dir_ / "unit");
  d.write_file("unit", "new bytes", 9);
  expect_victim_intact();
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir_ / "unit")));  // the link was replaced
  EXPECT_EQ(slurp(dir_ / "unit"), "new bytes");

  // reads, stats, mtime updates and removal of a link touch the link only
  fs::create_symlink(victim_, dir_ / "other");
  EXPECT_THROW(d.open_file("other", nullptr), std::runtime_error);
  ASSERT_TRUE(d.stat("other").has_value());
  EXPECT_EQ(d.stat("other")->kind, DirFd::Kind::kSymlink);
  d.set_mtime("other", 1000000000);
  EXPECT_TRUE(d.remove("other"));
  expect_victim_intact();
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "other")));

  long pid = 0;
  EXPECT_TRUE(DirFd::is_temp_name(DirFd::temp_name("a.cdkv", 7), &pid));
  EXPECT_EQ(pid, long(::getpid()));
  EXPECT_FALSE(DirFd::is_temp_name("a.cdkv.tmp", &pid));
}

TEST_F(DirFdTest, ListingSeesLinksAsLinks) {
  const DirFd d = DirFd::open(dir_.string(), true);
  d.write_file("a", "1", 1);
  fs::create_symlink(victim_, dir_ / "b");
  int links = 0, files = 0;
  for (const auto& e : d.list()) {
    links += e.kind == DirFd::Kind::kSymlink;
    files += e.kind == DirFd::Kind::kRegular;
  }
  EXPECT_EQ(links, 1);
  EXPECT_EQ(files, 1);
}

TEST_F(DirFdTest, OnlyAPrivateDirectoryPasses) {
  DirFd d = DirFd::open(dir_.string(), true);
  EXPECT_EQ(d.private_problem(), "");
  fs::permissions(dir_, fs::perms::all);  // 0777
  EXPECT_EQ(d.private_problem(), "it is writable by its group and others (mode 0777)");
  fs::permissions(dir_, fs::perms::all | fs::perms::sticky_bit);  // like /tmp
  EXPECT_EQ(d.private_problem(), "it is writable by its group and others (mode 1777)");
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_all);
  EXPECT_EQ(d.private_problem(), "it is writable by its group (mode 0770)");
  fs::permissions(dir_, fs::perms::owner_all);

  // a symlinked path (a cache on another disk) is followed once: the directory it leads to counts
  fs::create_directory_symlink(dir_, root_ / "via-link");
  EXPECT_EQ(DirFd::open((root_ / "via-link").string(), false).private_problem(), "");

  if (::geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
  EXPECT_EQ(d.private_problem(), "it is owned by uid 65534, not by this process's uid 0");
}

TEST_F(DirFdTest, CannotOpenNamesThePath) {
  std::ofstream(root_ / "file") << "x";
  try {
    DirFd::open((root_ / "file" / "sub").string(), true);
    ADD_FAILURE() << "opened";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("file/sub"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cedar
