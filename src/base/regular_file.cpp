#include "base/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cedar {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISLNK(m)) return "a symbolic link";
  return "of an unknown kind";
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd open_regular_file(const std::string& path, uint64_t* size, const RegularFileOptions& opt) {
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
                    (opt.no_follow ? O_NOFOLLOW : 0) | opt.extra_flags;
  UniqueFd fd(::openat(opt.dir_fd, path.c_str(), flags));
  if (!fd) {
    const int e = errno;
    if (e == ELOOP && opt.no_follow)
      throw std::runtime_error(path + ": not a regular file (a symbolic link, not followed)");
    throw std::runtime_error(path + ": cannot open: " + std::strerror(e));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    throw std::runtime_error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": not a regular file (" + kind_of(st.st_mode) + ")");
  // O_NONBLOCK only had to keep the open from waiting; reads of a regular file ignore it, but
  // clear it so that the descriptor is an ordinary one
  const int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  if (size) *size = uint64_t(st.st_size);
  return fd;
}

}  // namespace cedar
