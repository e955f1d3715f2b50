// PrefixCache: longest-prefix reuse across requests (spec §9.4, v41-interface.md §5.7,
// docs/PREFIX_CACHE.md), plugged into the Generator through PrefixCacheHook (generator.h).
//
// Two tiers:
//  * memory: full copies of the states offered at the end of a prompt and of an answer (window
//    included, so an exact hit continues bit-identically to the run that produced it), LRU
//    under a byte budget counted from the real allocations (SequenceState::bytes());
//  * disk (optional, DiskCache): a unit at every offer — prompt end, answer end and every
//    `interval` tokens of a prompt — holding the global rows, ratio-2 tails, Engram history and
//    token ids; the window only with store_window (exact restore).
// restore() picks the candidate that saves the most work: the longest reusable prefix of
// ids[0..max_len), where a state that must be rebuilt by SWA Bounded Replay
// (Transformer::replay: a unit without window, or a longer cached state cut to the request by
// SequenceState::truncate) counts `sliding_window` tokens less than one that is ready. Replay
// runs under Engine::forward_mutex(). Thread-safe: the server's generators may share one cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/disk_cache.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "state/sequence_state.h"
#include "state/snapshot.h"

namespace cedar::runtime {

struct PrefixCacheOptions {
  uint64_t memory_bytes = uint64_t(2) << 30;  // in-memory budget; 0: no memory tier
  int64_t interval = 1024;                    // disk unit every N prompt tokens; 0: off
  std::string disk_dir;                       // "": no disk tier
  uint64_t disk_bytes = uint64_t(16) << 30;   // disk budget (DiskCacheOptions::max_bytes)
  bool store_window = false;   // disk units carry the window: exact restore, +L x 128 x 528 B
  bool allow_truncate = true;  // serve a shorter prefix of a cached state (truncate + replay)
  bool chain_units = true;     // disk units extend the longest cached prefix (DiskCacheOptions)
  std::function<void(const std::string&)> warn;  // default: stderr
};

// What the last restore() did (for `cedar run` stats, the server's usage and the tests).
struct RestoreInfo {
  enum class Source { kNone, kMemory, kDisk };
  Source source = Source::kNone;
  int64_t tokens = 0;         // reused prefix length (the hit tokens)
  int64_t cached_len = 0;     // length of the cached state it came from (> tokens: truncated)
  bool replayed = false;      // the window was rebuilt by SWA Bounded Replay
  int64_t replay_start = -1;  // s of the replay (window truncated there)
  double seconds = 0;         // lookup + load + replay
};
const char* source_name(RestoreInfo::Source s);  // "none", "memory", "disk"

struct PrefixCacheStats {
  int64_t lookups = 0, hits = 0, memory_hits = 0, disk_hits = 0, replays = 0;
  int64_t hit_tokens = 0, miss_tokens = 0;  // prompt_cache_hit_tokens / _miss_tokens
  int64_t memory_entries = 0;
  uint64_t memory_bytes = 0;
};

class PrefixCache : public PrefixCacheHook {
 public:
  // The fingerprint is model_fingerprint() of the engine's model directory and tokenizer, with the
  // kernel table's name. Throws std::runtime_error
  // when the disk directory cannot be created.
  PrefixCache(const Engine& engine, PrefixCacheOptions opt);
  PrefixCache(const ModelConfig& cfg, const ModelFingerprint& fp, PrefixCacheOptions opt);

  // PrefixCacheHook
  int64_t restore(Engine& engine, std::span<const int32_t> ids, int64_t max_len,
                  SequenceState* state) override;
  int64_t interval() const override { return disk_ ? opt_.interval : 0; }
  void offer(std::span<const int32_t> ids, const SequenceState& state, Point where) override;

  RestoreInfo last_restore() const;
  PrefixCacheStats stats() const;
  DiskCache* disk() { return disk_.get(); }
  const PrefixCacheOptions& options() const { return opt_; }
  void clear_memory();

 private:
  struct Entry {
    std::vector<int32_t> ids;
    SequenceState state;
    uint64_t bytes = 0;
    uint64_t stamp = 0;
  };
  void evict_memory();

  const ModelConfig& cfg_;
  PrefixCacheOptions opt_;
  std::unique_ptr<DiskCache> disk_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> mem_;
  uint64_t mem_bytes_ = 0, clock_ = 0;
  RestoreInfo last_;
  PrefixCacheStats stats_;
};

}  // namespace cedar::runtime
