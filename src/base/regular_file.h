// Regular files only: the one way cedar opens a file it reads as a model file (config.json,
// tokenizer.json, the safetensors index and shards, GGUF files) or a cache unit. A FIFO, device,
// socket or directory given where such a file belongs is refused naming it, and the refusal
// never waits: the open uses O_NONBLOCK (a FIFO named config.json would otherwise block the open
// until some writer appears, i.e. forever), then fstat decides on the descriptor itself (no race
// between a stat of the path and the open).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace cedar {

// An owned file descriptor (closed on destruction; -1: none).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

struct RegularFileOptions {
  int dir_fd = -100;       // AT_FDCWD: `path` as given; else relative to this directory
  bool no_follow = false;  // refuse a symbolic link as the last component (O_NOFOLLOW)
  int extra_flags = 0;     // e.g. O_DIRECT
};

// Opens `path` read-only and returns the descriptor, refusing anything but a regular file.
// Throws std::runtime_error "<path>: cannot open: <reason>" or "<path>: not a regular file
// (a FIFO)" (the kind named). *size (optional) gets the file's size.
UniqueFd open_regular_file(const std::string& path, uint64_t* size = nullptr,
                           const RegularFileOptions& opt = {});

}  // namespace cedar
