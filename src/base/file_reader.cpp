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
