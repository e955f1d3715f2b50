// FileReader: positioned reads of byte ranges from one file (pread), for weights streamed from
// storage instead of mapped (model/expert_cache.h). Every read either delivers all the bytes
// asked for or throws naming the file, the range and the cause -- a short read (the file was
// truncated or replaced) or an I/O error is never returned as data. Regular files only
// (base/regular_file.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/regular_file.h"

namespace cedar {

class FileReader {
 public:
  // Throws std::runtime_error naming the path when the file cannot be opened or is not a
  // regular file.
  static std::unique_ptr<FileReader> open(const std::string& path);
  // A regular file already opened (open_regular_file); `label` names it in errors.
  static std::unique_ptr<FileReader> adopt(UniqueFd fd, uint64_t size, const std::string& label);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // when opened
  // Bytes [offset, offset + n) into dst; throws std::runtime_error on a short read or an error.
  void read(uint64_t offset, size_t n, uint8_t* dst) const;
  // Asks the kernel to drop its cached pages of the range (the caller keeps its own copy, so
  // the page cache would only double the footprint).
  void drop_cached(uint64_t offset, size_t n) const;
  // Tells the kernel that reads are random (no read-ahead): small row reads from a huge table.
  void advise_random() const;

  // Direct I/O (O_DIRECT: the device writes into dst, no page-cache copy, no CPU spent
  // copying). open_direct() opens the second descriptor once (before any read_direct; false:
  // the file system refuses O_DIRECT). read_direct(): offset, n and dst aligned to
  // kDirectAlign; reads until `need` bytes (<= n; the aligned range may pass the end of the
  // file) have arrived. Returns false when the file system refuses this read (the caller reads
  // buffered instead); throws like read() on an error or when fewer than `need` bytes exist.
  static constexpr size_t kDirectAlign = 4096;
  bool open_direct();
  bool read_direct(uint64_t offset, size_t n, size_t need, uint8_t* dst) const;

 private:
  FileReader() = default;
  std::string path_;
  uint64_t size_ = 0;
  int fd_ = -1;
  int direct_fd_ = -1;
};

// The whole of a regular file. One larger than max_bytes is refused before anything is read
// ("<path>: <n> bytes, more than a <what> may have (<max>)"): config.json, tokenizer.json and the
// other JSON files of a model are read whole, so their size is the memory they cost.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what);

}  // namespace cedar
