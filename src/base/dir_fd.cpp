#include "base/dir_fd.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>

namespace cedar {

namespace {

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

int64_t ns_of(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

DirFd::Entry entry_of(const std::string& name, const struct stat& st) {
  DirFd::Entry e;
  e.name = name;
  e.kind = S_ISREG(st.st_mode)   ? DirFd::Kind::kRegular
           : S_ISLNK(st.st_mode) ? DirFd::Kind::kSymlink
                                 : DirFd::Kind::kOther;
  e.size = uint64_t(st.st_size);
  e.mtime_ns = ns_of(st.st_mtim);
  return e;
}

// Writes all n bytes (write may take them in parts).
bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) errno = ENOSPC;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

}  // namespace

int64_t unix_now_ns() {
  struct timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return ns_of(t);
}

DirFd::DirFd(DirFd&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::move(o.fd_)), temps_(o.temps_.load()) {}

DirFd& DirFd::operator=(DirFd&& o) noexcept {
  path_ = std::move(o.path_);
  fd_ = std::move(o.fd_);
  temps_ = o.temps_.load();
  return *this;
}

std::string DirFd::temp_name(const std::string& name, uint64_t n) {
  return name + "." + std::to_string(::getpid()) + "." + std::to_string(n) + ".tmp";
}

DirFd DirFd::open(const std::string& path, bool create) {
  if (create) {
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) fail(path + ": cannot create", errno);
  }
  DirFd d;
  d.path_ = path;
  d.fd_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.fd_) fail(path + ": cannot open as a directory", errno);
  return d;
}

std::string DirFd::private_problem() const {
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) return std::string("cannot stat it: ") + std::strerror(errno);
  if (st.st_uid != ::geteuid())
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by this process's uid " +
           std::to_string(::geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    const char* who = (st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH) ? "its group and others"
                      : (st.st_mode & S_IWGRP)                         ? "its group"
                                                                       : "others";
    return std::string("it is writable by ") + who + " (mode " + mode + ")";
  }
  return "";
}

std::vector<DirFd::Entry> DirFd::list() const {
  // fdopendir takes over its descriptor: give it a duplicate (rewound: this one may have read)
  const int dup = ::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) fail(path_ + ": cannot list", errno);
  DIR* d = ::fdopendir(dup);
  if (!d) {
    const int e = errno;
    ::close(dup);
    fail(path_ + ": cannot list", e);
  }
  std::vector<Entry> out;
  while (const struct dirent* de = ::readdir(d)) {
    const std::string name = de->d_name;
    if (name == "." || name == "..") continue;
    if (auto e = stat(name)) out.push_back(std::move(*e));  // (gone meanwhile: skipped)
  }
  ::closedir(d);
  return out;
}

std::optional<DirFd::Entry> DirFd::stat(const std::string& name) const {
  struct stat st;
  if (::fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return entry_of(name, st);
}

UniqueFd DirFd::open_file(const std::string& name, uint64_t* size) const {
  try {
    return open_regular_file(name, size, {.dir_fd = fd_.get(), .no_follow = true});
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path_ + "/" + e.what());  // the messages start with the name
  }
}

void DirFd::write_file(const std::string& name, const void* data, size_t n) const {
  std::string tmp;
  UniqueFd fd;
  for (int attempt = 0; !fd && attempt < 64; ++attempt) {
    tmp = temp_name(name, temps_++);
    fd = UniqueFd(::openat(fd_.get(), tmp.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd && errno != EEXIST) fail(label(tmp) + ": cannot create", errno);
  }
  if (!fd) throw std::runtime_error(label(tmp) + ": cannot create a fresh temp file");
  if (!write_all(fd.get(), static_cast<const uint8_t*>(data), n) || ::fsync(fd.get()) != 0) {
    const int e = errno;
    ::unlinkat(fd_.get(), tmp.c_str(), 0);
    fail(label(tmp) + ": write failed (disk full?)", e);
  }
  fd = UniqueFd();
  if (::renameat(fd_.get(), tmp.c_str(), fd_.get(), name.c_str()) != 0) {
    const int e = errno;
    ::unlinkat(fd_.get(), tmp.c_str(), 0);
    fail(label(name) + ": cannot rename the written file into place", e);
  }
}

bool DirFd::remove(const std::string& name) const {
  return ::unlinkat(fd_.get(), name.c_str(), 0) == 0;
}

bool DirFd::set_mtime(const std::string& name, int64_t ns) const {
  struct timespec t[2];
  t[0].tv_sec = 0;
  t[0].tv_nsec = UTIME_OMIT;  // atime untouched
  t[1].tv_sec = time_t(ns / 1000000000);
  t[1].tv_nsec = long(ns % 1000000000);
  return ::utimensat(fd_.get(), name.c_str(), t, AT_SYMLINK_NOFOLLOW) == 0;
}

bool DirFd::is_temp_name(const std::string& name, long* pid) {
  // <name>.<pid>.<n>.tmp
  if (!name.ends_with(".tmp")) return false;
  const std::string stem = name.substr(0, name.size() - 4);
  const size_t b = stem.rfind('.');
  if (b == std::string::npos || b == 0) return false;
  const size_t a = stem.rfind('.', b - 1);
  if (a == std::string::npos) return false;
  const std::string p = stem.substr(a + 1, b - a - 1), n = stem.substr(b + 1);
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() < 12 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(p) || !digits(n)) return false;
  *pid = std::stol(p);
  return true;
}

}  // namespace cedar
