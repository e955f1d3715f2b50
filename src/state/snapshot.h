// Snapshot: one prefix-cache unit (spec §9.4, docs/PREFIX_CACHE.md) — the serialized form of a
// SequenceState after a token prefix. A unit holds what cannot be rebuilt cheaply:
//   * the prefix's token ids (a hit must match them exactly; at image positions the identity
//     ids of runtime/prompt_images.h, negative) and the image spans that begin in it,
//   * every KV source's global rows (packed FP4 compressed KV + index keys, spec §10.1),
//   * the ratio-2 compressor tails (fp32 k / gate of a half-filled group: persisted, not
//     recomputed, so that the global rows formed after a restore equal the cold run's),
//   * the Engram history (mapped ids of the last max_ngram-1 tokens) and n_tokens,
// and optionally the window rings + window_from ("exact restore"). Without the window a restored
// state has dropped rings (SequenceState::drop_window(): window_from = n_tokens) and must be
// completed by SWA Bounded Replay (Transformer::replay) before the next forward. dec_tokens is
// restored as n_tokens; ced_stream is never stored (a unit of an open CED prompt carries its
// complete global part and no window).
//
// A unit may extend a base unit (the unit of a shorter prefix of the same tokens): it then holds
// only the token ids and global rows after the base, plus its own tails, Engram history and
// window. Long prompts cut at fixed intervals and multi-turn histories thus write each token's
// rows once instead of once per unit (self-contained units would cost O(N^2 / interval) bytes).
//
// File layout (little-endian), 120-byte header then the payload:
//   0  magic "CEDARKV1"        8
//   8  format version u32      (kSnapshotVersion)
//  12  flags u32               bit 0: window rings present
//  16  model fingerprint       32 (model_fingerprint())
//  48  n_tokens i64            the prefix length this unit restores
//  56  base_tokens i64         0, or the length of the base unit it extends
//  64  base unit id            16 (UnitId of the base; zero when base_tokens == 0)
//  80  payload bytes u64
//  88  checksum                32: SHA-256 over header bytes [0, 88) and the payload
// Every read verifies magic, version, fingerprint, sizes and checksum before trusting a byte,
// then checks the payload's structure against the model config and the base; failures throw
// SnapshotError with the file's label and the reason. docs/PREFIX_CACHE.md has the payload.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/dir_fd.h"
#include "model/config.h"
#include "state/sequence_state.h"

namespace cedar {

// 2 added the image spans after the token ids; version-1 units (no spans) are still read.
inline constexpr uint32_t kSnapshotVersion = 2;
inline constexpr size_t kSnapshotHeaderBytes = 120;
inline constexpr char kSnapshotMagic[8] = {'C', 'E', 'D', 'A', 'R', 'K', 'V', '1'};

using ModelFingerprint = std::array<uint8_t, 32>;
using UnitId = std::array<uint8_t, 16>;  // names a unit (the disk cache: hash of model + prefix)

// SHA-256 over a domain tag, the bytes of <dir>/config.json and of the tokenizer file
// (tokenizer_path, "": <dir>/tokenizer.json), and, for every *.safetensors file of the directory
// in name order, its name, size, header (8-byte length + JSON) and a sample of its tensor bytes:
// 64 blocks of 4 KiB spread evenly over the data and its last block. The sample tells apart
// checkpoints whose headers agree (the same shapes trained twice, a fine-tune, a re-generated
// random model) without reading hundreds of GB; `extra` (the kernel table) is hashed last.
// model_dir may be a GGUF file instead: its whole header (config and tokenizer keys, tensor
// table), size and the same sample of its data. Throws naming the file.
ModelFingerprint model_fingerprint(const std::string& model_dir,
                                   const std::string& tokenizer_path = {},
                                   std::string_view extra = {});
std::string fingerprint_hex(const ModelFingerprint& fp);

// Why a unit was refused (the reason is also in what()).
class SnapshotError : public std::runtime_error {
 public:
  enum class Reason { kIo, kTruncated, kMagic, kVersion, kFingerprint, kChecksum, kLayout };
  SnapshotError(Reason r, const std::string& msg) : std::runtime_error(msg), reason_(r) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

// The fixed header, readable without the payload (the disk cache indexes units by it).
struct SnapshotHeader {
  uint32_t version = 0;
  bool has_window = false;
  ModelFingerprint fingerprint{};
  int64_t n_tokens = 0;
  int64_t base_tokens = 0;
  UnitId parent{};
  uint64_t payload_bytes = 0;
  std::array<uint8_t, 32> checksum{};
};

// A deserialized unit.
struct SnapshotUnit {
  std::vector<int32_t> tokens;  // the prefix, tokens.size() == state.n_tokens
  SequenceState state;          // window dropped (window_from = n_tokens) unless has_window
  bool has_window = false;
};

// Serializes `state` after the prefix `tokens` (tokens.size() must equal state.n_tokens; throws
// std::invalid_argument otherwise). with_window adds window_from and the rings of every layer
// (std::invalid_argument on an open CED prompt, whose decoder rings are incomplete).
// base_tokens > 0 writes only what follows the base unit `parent` of that many tokens (whose
// rows must be this state's first rows: the caller guarantees it; 0 <= base_tokens < n_tokens).
std::vector<uint8_t> serialize_snapshot(const SequenceState& state, std::span<const int32_t> tokens,
                                        const ModelFingerprint& fp, bool with_window,
                                        int64_t base_tokens = 0, const UnitId& parent = {});

// Size in bytes that serialize_snapshot would produce (no allocation of the payload) for a
// unit whose own positions begin `new_images` image spans.
uint64_t snapshot_bytes(const ModelConfig& cfg, int64_t n_tokens, bool with_window,
                        int64_t base_tokens = 0, int new_images = 0);

// Parses only the header; throws SnapshotError (kTruncated, kMagic) on a short or foreign file.
// Does not check version, fingerprint or checksum (the caller decides).
SnapshotHeader parse_snapshot_header(const uint8_t* data, size_t size, const std::string& label);

// Verifies everything (magic, version, fingerprint == expected, payload size, checksum, structure
// against cfg) and rebuilds the state. `label` (a path) starts every error message. A unit with
// base_tokens > 0 needs `base`: the deserialized unit it extends (its tokens and state are moved
// into the result, also when this throws after the checksum passed).
SnapshotUnit deserialize_snapshot(const uint8_t* data, size_t size, const ModelConfig& cfg,
                                  const ModelFingerprint& expected, const std::string& label,
                                  SnapshotUnit* base = nullptr);

// Files: units of a directory (base/dir_fd.h), written by DirFd::write_file (a fresh temp name,
// fsync, rename: a crash never leaves a half-written unit under the final name) and read whole;
// a symbolic link in the directory is never followed, and only regular files are read. Errors
// throw SnapshotError(kIo) naming the path. The path forms open the file's directory first.
void write_snapshot_file(const DirFd& dir, const std::string& name,
                         const std::vector<uint8_t>& bytes);
SnapshotUnit read_snapshot_file(const DirFd& dir, const std::string& name, const ModelConfig& cfg,
                                const ModelFingerprint& expected, SnapshotUnit* base = nullptr);
SnapshotHeader read_snapshot_file_header(const DirFd& dir, const std::string& name);
void write_snapshot_file(const std::string& path, const std::vector<uint8_t>& bytes);
SnapshotUnit read_snapshot_file(const std::string& path, const ModelConfig& cfg,
                                const ModelFingerprint& expected, SnapshotUnit* base = nullptr);
SnapshotHeader read_snapshot_file_header(const std::string& path);

}  // namespace cedar
