// MappedFile: a whole regular file (base/regular_file.h) memory-mapped read-only (checkpoint
// shards are hundreds of GiB in the release; mapping lets the OS page weights in on demand and
// share them between processes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace cedar {

class MappedFile {
 public:
  // Throws std::runtime_error naming the path when the file cannot be opened or mapped.
  static std::unique_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Pages [offset, offset + len) in (clamped to the file): asks the kernel to read ahead, then
  // touches one byte per page, so that the first forward does not wait on page faults.
  void prefetch(size_t offset, size_t len) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;  // nullptr for an empty file
  size_t size_ = 0;
};

}  // namespace cedar
