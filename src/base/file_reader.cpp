#include "base/file_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cedar {

std::unique_ptr<FileReader> FileReader::open(const std::string& path) {
  std::unique_ptr<FileReader> f(new FileReader());
  f->path_ = path;
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  return f;
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

void FileReader::read(uint64_t offset, size_t n, uint8_t* dst) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, dst + done, n - done, off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    const std::string range =
        "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + n) + ")";
    if (got < 0)
      throw std::runtime_error(path_ + ": read error at " + range + ": " + std::strerror(errno));
    if (got == 0)
      throw std::runtime_error(path_ + ": short read at " + range + ": the file ends after " +
                               std::to_string(offset + done) +
                               " bytes (truncated or replaced since it was opened)");
    done += size_t(got);
  }
}

void FileReader::drop_cached(uint64_t offset, size_t n) const {
  // advisory: a failure only costs page-cache memory
  (void)::posix_fadvise(fd_, off_t(offset), off_t(n), POSIX_FADV_DONTNEED);
}

}  // namespace cedar

namespace cedar {

void FileReader::advise_random() const { (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM); }

}  // namespace cedar

namespace cedar {

bool FileReader::open_direct() {
  if (direct_fd_ < 0) direct_fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  return direct_fd_ >= 0;
}

bool FileReader::read_direct(uint64_t offset, size_t n, size_t need, uint8_t* dst) const {
  if (direct_fd_ < 0) return false;
  size_t done = 0;
  while (done < need) {
    const ssize_t got = ::pread(direct_fd_, dst + done, n - done, off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EINVAL && done == 0) return false;  // alignment the fs refuses
    const std::string range =
        "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + need) + ")";
    if (got < 0)
      throw std::runtime_error(path_ + ": read error at " + range + ": " + std::strerror(errno));
    if (got == 0)
      throw std::runtime_error(path_ + ": short read at " + range + ": the file ends after " +
                               std::to_string(offset + done) +
                               " bytes (truncated or replaced since it was opened)");
    done += size_t(got);
    if (done % kDirectAlign) break;  // the end of the file
  }
  if (done < need)
    throw std::runtime_error(path_ + ": short read at bytes [" + std::to_string(offset) + ", " +
                             std::to_string(offset + need) + "): the file ends after " +
                             std::to_string(offset + done) +
                             " bytes (truncated or replaced since it was opened)");
  return true;
}

}  // namespace cedar
