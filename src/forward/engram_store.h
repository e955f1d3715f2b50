// EngramStore: the Engram tables read from the checkpoint's shards row by row instead of being
// mapped (issue "Beyond RAM"). The release's two tables hold 768M rows (~196B parameters): a
// token gathers only (max_ngram - 1) x heads rows per Engram layer, so a table on an SSD costs a
// few small reads per token and almost no RAM. Rows read are kept in a small cache (the rows of
// frequent n-grams come back); each read drops its pages from the page cache afterwards.
// The row ids of every Engram layer are known before the layer stack runs (they hash token
// ids), so the Transformer hands them to prefetch() first and an I/O thread reads them while
// the layers below compute; Engram::forward then gathers its rows through Ctx::engram, waiting
// only for reads still in flight (and reading itself any row a small cache already dropped).
// The bytes are the checkpoint's, so the result is the mapped run's bit for bit. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/file_reader.h"
#include "base/io_queue.h"
#include "forward/weights.h"
#include "model/checkpoint.h"
#include "model/config.h"

namespace cedar {

// The error for a row of ds4's native Engram rows holding a NaN code (0x7F/0xFF) or scale (255):
// ds4 refuses such rows when it reads them, and so does cedar (the table is never read whole).
std::string engram_nan_row(int layer, int64_t row);

struct EngramStoreStats {
  int64_t lookups = 0, hits = 0, bytes_read = 0, reads = 0;
  int64_t prefetched = 0;  // lookups served by a prefetch's read (misses, not hits)
  double read_seconds = 0.0;
};

class EngramStore {
 public:
  // The tables of every Engram layer of `w` (bound from `ck`); a row cache of at most
  // cache_bytes. Throws std::runtime_error when a table is not in a mapped shard.
  EngramStore(const Checkpoint& ck, const ModelConfig& cfg, const ModelWeights& w,
              size_t cache_bytes);

  // Rows[0 .. n) of the Engram layer at position `index` of engram_layer_ids as stored, each
  // row_bytes(index) bytes at out + i * row_bytes(index): a release table's E4M3 codes
  // [head_dim] then UE8M0 scales [head_dim / 32], or a GGUF table's ggml blocks. Throws naming
  // the file on a read error or a short read; throws on a row outside the table.
  void gather(int index, const int64_t* rows, int n, uint8_t* out);
  size_t row_bytes(int index) const { return tables_.at(size_t(index)).bytes; }
  // Starts the reads of the rows not cached (ids outside the table are left to gather()).
  void prefetch(int index, const int64_t* rows, int n);
  ~EngramStore();

  EngramStoreStats stats() const;
  int64_t table_bytes() const { return table_bytes_; }

 private:
  struct Table {
    const FileReader* file = nullptr;
    uint64_t codes_at = 0, scales_at = 0;  // file offsets of the two tensors' first rows
    uint64_t codes_stride = 0, scales_stride = 0;
    bool native = false;  // ds4's rows: a row's codes and scales in one read, checked for NaN
    uint32_t type = 0;    // a GGUF block type (LayerWeights::engram_type): a row is one read
    size_t bytes = 0;     // a row as gather() gives it
    int layer = 0;
    int64_t rows = 0;
  };
  // preads per row read_row() makes (the stats count them)
  static int reads_per_row(const Table& t) { return t.native || t.type ? 1 : 2; }
  // A slot for `key` by the clock (never one being read); under mu_.
  size_t claim(int64_t key);
  // Reads row `r` of table t into slot `slot`; outside mu_.
  void read_row(const Table& t, int64_t r, size_t slot);
  // The I/O thread's two steps (base/io_queue.h), under mu_.
  IoQueue::Read take_read(size_t slot);
  void read_done(size_t slot, std::exception_ptr err, int64_t bytes, double seconds);

  int hd_ = 0;
  std::vector<std::unique_ptr<FileReader>> files_;
  std::vector<Table> tables_;
  int64_t table_bytes_ = 0;
  // the row cache: (index, row) -> slot; slots [cap, slot_bytes], clock eviction
  size_t cap_ = 0, hand_ = 0, n_loading_ = 0, slot_bytes_ = 0;
  std::vector<uint8_t> cache_;
  std::vector<int64_t> slot_key_;
  std::vector<uint8_t> slot_ref_, slot_loading_, slot_fresh_;
  std::vector<std::exception_ptr> slot_error_;
  std::unordered_map<int64_t, size_t> where_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  EngramStoreStats stats_;
  std::unique_ptr<IoQueue> io_;  // reads rows; last, so that it stops first
};

}  // namespace cedar
