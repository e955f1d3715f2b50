// DiskCache: the persistent half of the prefix cache (spec §9.4 "persistent-cache policy",
// v41-interface.md §5.7, docs/PREFIX_CACHE.md). A directory of snapshot units
// (state/snapshot.h), one file per cached token prefix:
//
//   <dir>/<32 hex = UnitId = first 16 bytes of SHA-256(tag, fingerprint, token ids)>.cdkv
//
// The name is a function of the model and the exact prefix, so a lookup hashes the request's
// prefixes at the lengths of the units the cache holds (one streaming pass over the ids) and
// opens only files whose name matches; the units' own token ids are then compared in full.
//
// Chains: a new unit extends the longest unit already cached for a prefix of its tokens (its
// base), storing only the tokens and global rows after it. Loading a unit loads its chain from
// the root. A unit is therefore only as good as its ancestors: a hit touches the whole chain,
// and evicting or refusing a unit deletes its descendants with it.
//
// The directory is trusted only when it is private: a directory another user could write -- owned
// by another uid, or writable by its group or others (sticky or not: a sticky /tmp-like
// directory still lets others create names) -- is refused at startup, naming the path and the
// reason, since anyone who can add entries can plant a unit or a symbolic link under a name the
// cache will write or read. A path that is itself a symbolic link to a directory (a cache on
// another disk) is followed, once, when the cache opens it; the ownership check applies to the
// directory it leads to, and every later operation is relative to that opened directory
// (base/dir_fd.h), so renaming or replacing the path afterwards changes nothing. Inside it no
// symbolic link is ever followed: units are written to a fresh temp name (O_EXCL|O_NOFOLLOW),
// fsynced and renamed (never half-written under the final name; a planted link is replaced, not
// written through), read O_NOFOLLOW as regular files only, touched and deleted as links; a
// *.cdkv entry that is a link is deleted (the link, never its target) when the directory is
// scanned, and the temp files of a writer that died are removed then.
// Recency is the file's mtime (touched on every hit); when the directory exceeds its byte budget
// the least recently used units are deleted. A unit that fails to load — truncated, corrupt
// (checksum), foreign (fingerprint of another model), of another format version, or whose base
// is missing — is skipped with a warning and never trusted; truncated / corrupt / orphaned ones
// are deleted, foreign / other-version ones are left to the LRU (another engine may own them).
// Thread-safe (one mutex): the server's generators share one cache.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/dir_fd.h"
#include "model/config.h"
#include "state/snapshot.h"

namespace cedar::runtime {

struct DiskCacheOptions {
  std::string dir;                               // created (mode 0700) if absent
  uint64_t max_bytes = uint64_t(16) << 30;       // budget for all *.cdkv files of the directory
  bool chain = true;                             // new units extend the longest cached prefix
  std::function<void(const std::string&)> warn;  // default: "cedar: prefix cache: ..." on stderr
};

struct DiskCacheStats {
  int64_t saves = 0, save_skips = 0, hits = 0, misses = 0, evictions = 0, refused = 0;
  uint64_t bytes_written = 0, bytes_read = 0;
};

class DiskCache {
 public:
  // Opens (creating it with mode 0700 when absent) and scans the directory (headers only).
  // Throws std::runtime_error naming the directory when it cannot be created or listed, or when
  // another user could write it (see above).
  DiskCache(const ModelConfig& cfg, const ModelFingerprint& fp, DiskCacheOptions opt);

  UnitId unit_id(std::span<const int32_t> ids) const;
  // The unit file name for a prefix (no directory).
  std::string unit_name(std::span<const int32_t> ids) const;

  // Saves the state after `ids` (state.n_tokens == ids.size()); with_window stores the rings
  // too (exact restore). An existing unit of the same prefix is kept and touched (unless it lacks
  // the window and with_window asks for it). Returns the bytes written (0: already present or
  // larger than the whole budget — then a warning). I/O failures are warnings, not errors: the
  // cache is an optimisation. The caller guarantees that the state's rows of a cached shorter
  // prefix are that unit's (true when the state was restored from it or grew from one that
  // produced it; see docs/PREFIX_CACHE.md).
  uint64_t save(std::span<const int32_t> ids, const SequenceState& state, bool with_window);

  // The longest unit whose prefix is ids[0..L) with min_len <= L <= max_len, loaded with its
  // chain and verified (nullopt on a miss). Units that fail verification are skipped with a
  // warning and the next shorter one is tried.
  std::optional<SnapshotUnit> load_longest(std::span<const int32_t> ids, int64_t max_len,
                                           int64_t min_len = 1);

  // Lengths of the units of this model the cache holds (ascending, distinct).
  std::vector<int64_t> lengths() const;
  // Base length of the unit of ids (-1: no such unit).
  int64_t base_of(std::span<const int32_t> ids) const;
  uint64_t bytes_used() const;
  size_t units() const;
  DiskCacheStats stats() const;
  const DiskCacheOptions& options() const { return opt_; }

 private:
  struct Entry {
    int64_t n_tokens = -1;  // -1: not a unit of this model (foreign/other version): LRU only
    int64_t base_tokens = 0;
    std::string parent;  // file name of the base unit ("" if none)
    bool has_window = false;
    uint64_t bytes = 0;
    int64_t stamp = 0;  // mtime in ns since the file clock's epoch: the LRU order
  };
  std::string path_of(const std::string& name) const;
  bool present(const std::string& name) const;  // a regular file (not a link) of that name
  void scan();
  // name -> length for every unit of this model whose name is the hash of ids[0..len)
  std::map<int64_t, std::string> prefix_units(std::span<const int32_t> ids, int64_t max_len) const;
  void evict_to_fit(const std::string& keep);
  // Deletes `name` and every unit that extends it (directly or not); returns how many.
  int drop_with_descendants(const std::string& name);
  void drop(const std::string& name, bool remove_file);
  void warn(const std::string& msg) const;
  void touch(const std::string& name);
  void touch_chain(const std::string& name);

  const ModelConfig& cfg_;
  ModelFingerprint fp_;
  DiskCacheOptions opt_;
  DirFd dir_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;  // file name -> entry
  uint64_t used_ = 0;
  int64_t latest_stamp_;
  DiskCacheStats stats_;
};

}  // namespace cedar::runtime
