// DirFd: a directory of files cedar writes and reads back (the disk prefix cache), opened once
// and worked in by descriptor. Only the directory's own path is resolved, once, when it is
// opened (a symlinked directory, say a cache on another disk, is fine); after that every
// operation names an entry of the directory and none follows a symbolic link there, so a link
// planted under a name cedar uses never leads to a file outside the directory:
//   * writes go to a fresh temp name created O_CREAT|O_EXCL|O_NOFOLLOW (mode 0600), are fsynced,
//     then renamed over the final name (renameat replaces a link, it does not follow it);
//   * reads open O_NOFOLLOW and accept regular files only (base/regular_file.h);
//   * listing and stat use lstat semantics, mtime updates AT_SYMLINK_NOFOLLOW, and remove()
//     deletes a link itself, never its target.
// private_problem() says whether anyone but this process's user could change the directory's
// entries -- plant such links, or swap files under it -- which a caller that trusts what it
// reads back (a cache) refuses.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/regular_file.h"

namespace cedar {

class DirFd {
 public:
  DirFd() = default;
  DirFd(DirFd&& o) noexcept;
  DirFd& operator=(DirFd&& o) noexcept;
  // Opens the directory `path`; with `create`, makes it first when absent (missing parents as
  // mkdir -p does, the directory itself with mode 0700). Throws std::runtime_error naming the
  // path and the cause.
  static DirFd open(const std::string& path, bool create);

  // "" when only this process's user can create, rename or delete entries of the directory;
  // otherwise why not: "it is owned by uid 65534, not by this process's uid 0" or "it is
  // writable by its group and others (mode 1777)". Sticky or not: a sticky directory still lets
  // others create new names in it.
  std::string private_problem() const;

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }
  std::string label(const std::string& name) const { return path_ + "/" + name; }

  enum class Kind { kRegular, kSymlink, kOther };
  struct Entry {
    std::string name;
    Kind kind = Kind::kOther;
    uint64_t size = 0;
    int64_t mtime_ns = 0;  // since the Unix epoch
  };
  // Every entry but . and .. (lstat: a link is a kSymlink). Throws naming the path.
  std::vector<Entry> list() const;
  // One entry by name, not following a link; nullopt when there is none.
  std::optional<Entry> stat(const std::string& name) const;
  // A regular file of the directory, opened read-only without following a link; throws
  // std::runtime_error naming it ("<dir>/<name>: not a regular file (a symbolic link, ...)").
  UniqueFd open_file(const std::string& name, uint64_t* size) const;
  // Writes n bytes as `name`, atomically (temp file, fsync, rename): a crash never leaves a
  // partial file under `name`. Throws std::runtime_error naming the file; the temp is removed.
  void write_file(const std::string& name, const void* data, size_t n) const;
  // Deletes the entry (a link itself, not its target); false when that failed.
  bool remove(const std::string& name) const;
  // Sets the entry's mtime (not a link's target); false when that failed.
  bool set_mtime(const std::string& name, int64_t ns) const;

  // The temp names write_file uses: "<name>.<pid>.<n>.tmp", n counting this DirFd's attempts
  // from 0 (a name taken -- by another writer, or by anything planted there -- is skipped, never
  // opened). is_temp_name gives the writer's pid (a temp whose writer is gone is a crash's
  // leftover).
  static std::string temp_name(const std::string& name, uint64_t n);
  static bool is_temp_name(const std::string& name, long* pid);

 private:
  std::string path_;
  UniqueFd fd_;
  mutable std::atomic<uint64_t> temps_{0};
};

// Now in ns since the Unix epoch (the clock of DirFd's mtimes).
int64_t unix_now_ns();

}  // namespace cedar
