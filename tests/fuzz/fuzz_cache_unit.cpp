// libFuzzer: a disk prefix-cache unit's bytes -> deserialize_snapshot for the tiny preset's
// layout (magic, version, fingerprint, sizes, checksum, structure, values). Refusals are
// SnapshotErrors; nothing may read or write outside its buffers. The fuzzer mostly hits the
// checksum, so a second pass re-checksums the input (as a hostile writer would) to reach the
// structure and value checks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <vector>

#include "model/config.h"
#include "model/presets.h"
#include "state/snapshot.h"
#include "text/sha256.h"

namespace {

// What a hostile writer does to get past the checksum: a valid magic, version, fingerprint,
// payload size and checksum around the fuzzer's bytes (layout: state/snapshot.h).
bool reseal(std::vector<uint8_t>& b, const cedar::ModelFingerprint& fp) {
  using cedar::kSnapshotHeaderBytes;
  if (b.size() < kSnapshotHeaderBytes) return false;
  std::memcpy(b.data(), cedar::kSnapshotMagic, 8);
  const uint32_t version = cedar::kSnapshotVersion;
  std::memcpy(b.data() + 8, &version, 4);
  std::memcpy(b.data() + 16, fp.data(), 32);
  const uint64_t payload = b.size() - kSnapshotHeaderBytes;
  std::memcpy(b.data() + 80, &payload, 8);
  cedar::text::Sha256 h;
  h.update(b.data(), 88);
  h.update(b.data() + kSnapshotHeaderBytes, payload);
  const auto sum = h.digest();
  std::memcpy(b.data() + 88, sum.data(), 32);
  return true;
}

const cedar::ModelConfig& config() {
  static const cedar::ModelConfig c = [] {
    cedar::ModelConfig m = cedar::preset_config("tiny");
    m.validate();
    return m;
  }();
  return c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cedar::ModelFingerprint fp{};
  try {
    (void)cedar::deserialize_snapshot(data, size, config(), fp, "fuzz unit");
  } catch (const std::exception&) {
  }
  std::vector<uint8_t> b(data, data + size);
  if (reseal(b, fp)) {
    try {
      (void)cedar::deserialize_snapshot(b.data(), b.size(), config(), fp, "fuzz unit");
    } catch (const std::exception&) {
    }
  }
  return 0;
}
