// SHA-256 (FIPS 180-4), used to fingerprint the Engram token map (v41-extras.md §1.3 records the
// digest of the map as little-endian int32).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cedar::text {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t n);
  std::array<uint8_t, 32> digest();  // finalizes; the object must not be updated afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  std::size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);
std::string to_hex(const std::array<uint8_t, 32>& d);

}  // namespace cedar::text
