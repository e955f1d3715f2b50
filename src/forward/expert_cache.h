// ExpertCache: the routed experts read from the checkpoint's shards on demand (pread) into a
// fixed number of RAM slots instead of being mapped (issue "Beyond RAM"). The dense weights stay
// mapped; an expert's bytes are never touched through the mapping, so the page cache holds them
// only while a read is in flight (each read drops its pages afterwards). The MoE pins a group
// only for its GEMMs; a miss evicts an unpinned slot by the policy. A token visits the layers in
// order, so when the cache is smaller than one token's experts LRU evicts exactly the experts
// the next layers need (a cyclic scan: no hits at all). LFU (lookup counts, halved every
// 8 x slots lookups so that the counts follow the routing, ties to the least recent) keeps the
// popular experts instead; docs/MEMORY.md has the measurements that chose it as the default.
//
// A slot holds one expert's w1, w2 and w3 with their scales, laid out as the file lays them out
// (runs of adjacent tensors read with one pread, each run placed at the same offset modulo 64 as
// in the file, so the kernels see the alignment the mapping gave them). The reads run on a few
// I/O threads (pread blocks in the kernel, so they cost no compute): prefetch() queues the
// missing experts right after the router and returns, the shared expert computes meanwhile, and
// acquire() waits only for what is still in flight. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/file_reader.h"
#include "base/io_queue.h"
#include "forward/expert_source.h"
#include "forward/weights.h"
#include "model/checkpoint.h"

namespace cedar {

struct ExpertCacheStats {
  int64_t lookups = 0;    // experts asked for
  int64_t hits = 0;       // ... found in a slot
  int64_t evictions = 0;  // misses that replaced another expert
  int64_t bytes_read = 0;
  int64_t reads = 0;          // pread runs
  int64_t prefetched = 0;     // misses whose read a prefetch() had started
  int64_t guessed = 0;        // reads a guessing prefetch() started (the next layer's experts)
  int64_t guess_unused = 0;   // ... of experts that layer's pass did not ask for
  double read_seconds = 0.0;  // I/O threads' time in reads (summed over threads)
  double wait_seconds = 0.0;  // acquire()'s time waiting for reads: the stall the forward sees
  double hit_rate() const { return lookups ? double(hits) / double(lookups) : 0.0; }
};

enum class EvictionPolicy { kLfu, kLru };
// "lfu" | "lru"; throws std::runtime_error naming the value otherwise.
EvictionPolicy eviction_policy_from(const std::string& name);

class ExpertCache final : public ExpertSource {
 public:
  // Reads in flight at once: an SSD serves several requests in parallel (queue depth), and a
  // thread blocked in pread costs no compute.
  static constexpr int kIoThreads = 4;

  // The routed experts of every backbone layer and DSpark stage of `w` (bound from `ck`), in
  // min(budget_bytes / slot_bytes(), max_slots) slots. Throws std::runtime_error when the
  // budget holds fewer than `min_slots` slots (naming both) or a shard cannot be opened.
  ExpertCache(const Checkpoint& ck, const ModelWeights& w, size_t budget_bytes, int min_slots,
              int max_slots = 1 << 30, EvictionPolicy policy = EvictionPolicy::kLfu);
  ~ExpertCache() override;

  int capacity() const override { return n_slots_; }
  void acquire(int layer, const int* ids, int n, const ExpertWeights** out) override;
  void release(int layer, const int* ids, int n) override;
  void prefetch(int layer, const int* ids, int n, bool guess = false) override;

  size_t slot_bytes() const { return slot_bytes_; }
  // Bytes of every routed expert on disk (what an all-resident run maps).
  int64_t expert_bytes() const { return expert_bytes_; }
  int64_t experts() const { return n_experts_; }
  ExpertCacheStats stats() const;

 private:
  struct Run {  // adjacent tensors of one expert read with one pread
    int file = 0;
    uint64_t offset = 0;
    size_t n = 0;
    size_t at = 0;  // offset in the slot
  };
  struct Expert {
    ExpertWeights bound;      // as bound at load (pointers into the mapping)
    std::vector<Run> runs;    // empty: copied at load (served from `bound`)
    size_t field_at[6] = {};  // slot offsets of w1, w1 scale, w2, w2 scale, w3, w3 scale
    int slot = -1;            // holding it, or reading it
    int pins = 0;
    uint32_t uses = 0;         // lookups since the last halving (LFU)
    std::exception_ptr error;  // its last read failed (reported by the next acquire)
  };
  struct Slot {
    int layer = -1, id = -1;  // the expert it holds (-1: free)
    ExpertWeights w;          // that expert's weights pointing into this slot
    uint64_t last_use = 0;    // lookup clock
    bool loading = false;     // its read is queued or in flight
    bool fresh = false;       // read by a prefetch, not acquired yet (kept unless nothing else)
    bool guess = false;       // ... by a guessing one
  };

  void add_layer(const Checkpoint& ck, const LayerWeights& lw);
  int victim() const;
  // A slot for expert `id` of `layer` (evicting by the policy) with its read queued; -1 when
  // every slot is pinned or loading. Under mu_.
  int start_read(int layer, int id);
  // The I/O threads' two steps (base/io_queue.h), under mu_: the read of a slot's runs, and
  // the slot bound to its weights (or the read's error recorded) after it.
  IoQueue::Read take_read(int slot);
  void read_done(int slot, std::exception_ptr err, int64_t bytes, double seconds);
  void read_run(const Run& r, uint8_t* base);

  std::vector<std::unique_ptr<FileReader>> files_;
  std::deque<std::atomic<char>> direct_;  // per file: direct I/O works (until refused)
  std::vector<std::vector<Expert>> layers_;
  size_t slot_bytes_ = 0;
  int n_slots_ = 0;
  int64_t expert_bytes_ = 0, n_experts_ = 0;
  uint8_t* arena_ = nullptr;
  std::vector<Slot> slots_;
  EvictionPolicy policy_;
  uint64_t clock_ = 0;  // lookups so far
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  ExpertCacheStats stats_;
  std::unique_ptr<IoQueue> io_;  // reads slots; last, so that it stops first
};

}  // namespace cedar
