#include "base/file_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cedar {

namespace {

// pread into dst until `need` bytes of [offset, offset + n) have arrived. A direct read stops
// at a count that is not a whole number of pages (the end of the file). Returns the bytes read;
// -1 when the very first direct read fails with EINVAL (direct I/O refused). Throws
// naming the file and the range on an error or when the file ends before `need`.
ssize_t read_loop(int fd, const std::string& path, uint64_t offset, size_t n, size_t need,
                  uint8_t* dst, bool direct) {
  const auto range = [&] {
    return "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + need) + ")";
  };
  size_t done = 0;
  while (done < need) {
    const ssize_t got = ::pread(fd, dst + done, n - done, off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EINVAL && direct && done == 0) return -1;
    if (got < 0)
      throw std::runtime_error(path + ": read error at " + range() + ": " + std::strerror(errno));
    done += size_t(got);
    if (got == 0 || (direct && done % FileReader::kDirectAlign)) break;
  }
  if (done < need)
    throw std::runtime_error(path + ": short read at " + range() + ": the file ends after " +
                             std::to_string(offset + done) +
                             " bytes (truncated or replaced since it was opened)");
  return ssize_t(done);
}

}  // namespace

std::unique_ptr<FileReader> FileReader::open(const std::string& path) {
  uint64_t size = 0;
  UniqueFd fd = open_regular_file(path, &size);
  return adopt(std::move(fd), size, path);
}

std::unique_ptr<FileReader> FileReader::adopt(UniqueFd fd, uint64_t size,
                                              const std::string& label) {
  std::unique_ptr<FileReader> f(new FileReader());
  f->path_ = label;
  f->size_ = size;
  f->fd_ = fd.release();
  return f;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes,
                              const std::string& what) {
  const auto f = FileReader::open(path);
  if (f->size() > max_bytes)
    throw std::runtime_error(path + ": " + std::to_string(f->size()) + " bytes, more than a " +
                             what + " may have (" + std::to_string(max_bytes) + ")");
  std::string text(size_t(f->size()), '\0');
  f->read(0, text.size(), reinterpret_cast<uint8_t*>(text.data()));
  return text;
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

void FileReader::read(uint64_t offset, size_t n, uint8_t* dst) const {
  read_loop(fd_, path_, offset, n, n, dst, false);
}

void FileReader::drop_cached(uint64_t offset, size_t n) const {
  // advisory: a failure only costs page-cache memory
  (void)::posix_fadvise(fd_, off_t(offset), off_t(n), POSIX_FADV_DONTNEED);
}

void FileReader::advise_random() const { (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM); }

bool FileReader::open_direct() {
  if (direct_fd_ >= 0) return true;
  try {
    direct_fd_ = open_regular_file(path_, nullptr, {.extra_flags = O_DIRECT}).release();
  } catch (const std::runtime_error&) {
    return false;  // the file system refuses O_DIRECT (or the file went away): read buffered
  }
  return true;
}

bool FileReader::read_direct(uint64_t offset, size_t n, size_t need, uint8_t* dst) const {
  if (direct_fd_ < 0) return false;
  return read_loop(direct_fd_, path_, offset, n, need, dst, true) >= 0;
}

}  // namespace cedar
