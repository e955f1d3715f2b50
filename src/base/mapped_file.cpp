#include "base/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "base/regular_file.h"

namespace cedar {

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path) {
  uint64_t size = 0;
  const UniqueFd fd = open_regular_file(path, &size);  // the mapping keeps its own reference
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = size_t(size);
  if (f->size_ > 0) {  // mmap of length 0 is an error; an empty file maps to nothing
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p == MAP_FAILED) throw std::runtime_error(path + ": cannot mmap: " + std::strerror(errno));
    f->data_ = static_cast<const uint8_t*>(p);
  }
  return f;
}

void MappedFile::prefetch(size_t offset, size_t len) const {
  if (data_ == nullptr || offset >= size_) return;
  len = std::min(len, size_ - offset);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t start = offset / page * page;
  ::madvise(const_cast<uint8_t*>(data_) + start, len + (offset - start), MADV_WILLNEED);
  volatile uint8_t sink = 0;
  for (size_t i = offset; i < offset + len; i += page) sink = sink + data_[i];
  (void)sink;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace cedar
