#include "forward/engram_store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "model/gguf_decode.h"

namespace cedar {

namespace {
// (layer position, row) as one key: row ids stay far below 2^56
int64_t key_of(int index, int64_t row) { return (int64_t(index) << 56) | row; }
}  // namespace

std::string engram_nan_row(int layer, int64_t row) {
  return "layers." + std::to_string(layer) + ".engram.embed.weight: row " + std::to_string(row) +
         " holds a NaN code or scale (ds4's native rows; ds4 refuses such rows too)";
}

EngramStore::EngramStore(const Checkpoint& ck, const ModelConfig& cfg, const ModelWeights& w,
                         size_t cache_bytes)
    : hd_(cfg.engram_head_dim) {
  std::map<std::string, const FileReader*> by_path;
  auto locate = [&](const uint8_t* p, size_t n, const char* what) {
    const auto at = ck.locate(p, n);
    if (!at)
      throw std::runtime_error(std::string("engram store: the ") + what +
                               " of an Engram table is not in a mapped shard");
    if (!by_path.count(at->path)) {
      files_.push_back(FileReader::open(at->path));
      files_.back()->advise_random();
      by_path[at->path] = files_.back().get();
    }
    return *at;
  };
  for (int l : cfg.engram_layer_ids) {
    const LayerWeights& lw = w.layers.at(size_t(l));
    Table t;
    t.rows = lw.engram_rows;
    t.codes_stride = lw.engram_stride;
    t.scales_stride = lw.engram_scale_stride;
    t.native = lw.engram_native;
    t.type = lw.engram_type;
    t.layer = l;
    if (t.type) {  // a GGUF table of ggml blocks: dense rows of engram_stride bytes
      t.bytes = lw.engram_stride;
      const auto r = locate(lw.engram_table, size_t(t.rows) * t.bytes, "rows");
      t.file = by_path.at(r.path);
      t.codes_at = r.offset;
    } else {
      t.bytes = size_t(hd_ + hd_ / 32);
      const auto c =
          locate(lw.engram_table, size_t(t.rows - 1) * t.codes_stride + size_t(hd_), "codes");
      const auto s = locate(lw.engram_table_scale,
                            size_t(t.rows - 1) * t.scales_stride + size_t(hd_ / 32), "scales");
      t.file = by_path.at(c.path);
      if (by_path.at(s.path) != t.file)
        throw std::runtime_error(
            "engram store: a table's codes and scales are in different shards");
      t.codes_at = c.offset;
      t.scales_at = s.offset;
    }
    table_bytes_ += t.rows * int64_t(t.bytes);
    slot_bytes_ = std::max(slot_bytes_, t.bytes);
    tables_.push_back(t);
  }
  slot_bytes_ = std::max<size_t>(slot_bytes_, 1);
  cap_ = std::max<size_t>(1, cache_bytes / slot_bytes_);
  cache_.resize(cap_ * slot_bytes_);
  slot_key_.assign(cap_, -1);
  slot_ref_.assign(cap_, 0);
  slot_loading_.assign(cap_, 0);
  slot_fresh_.assign(cap_, 0);
  slot_error_.resize(cap_);
  // one thread: a token's rows are a few hundred bytes each, read in file order
  io_ = std::make_unique<IoQueue>(
      mu_, 1, [this](int64_t slot) { return take_read(size_t(slot)); },
      [this](int64_t slot, std::exception_ptr err, int64_t bytes, double seconds) {
        read_done(size_t(slot), err, bytes, seconds);
      });
}

EngramStore::~EngramStore() { io_.reset(); }

size_t EngramStore::claim(int64_t key) {
  // the clock: the first slot neither referenced since the hand last passed it nor being read
  for (;;) {
    const size_t s = hand_;
    hand_ = (hand_ + 1) % cap_;
    if (slot_loading_[s]) continue;
    if (slot_ref_[s]) {
      slot_ref_[s] = 0;
      continue;
    }
    if (slot_key_[s] >= 0) where_.erase(slot_key_[s]);
    slot_key_[s] = key;
    slot_error_[s] = nullptr;
    slot_fresh_[s] = 0;
    where_[key] = s;
    return s;
  }
}

void EngramStore::read_row(const Table& t, int64_t r, size_t slot) {
  uint8_t* dst = cache_.data() + slot * slot_bytes_;
  const int sb = hd_ / 32;
  const uint64_t c = t.codes_at + uint64_t(r) * t.codes_stride,
                 s = t.scales_at + uint64_t(r) * t.scales_stride;
  if (t.native || t.type) {  // ds4's row (its codes and scales together) or a row of blocks
    t.file->read(c, t.bytes, dst);
    t.file->drop_cached(c, t.bytes);
    if (t.native && !gguf::engram_row_valid(dst, hd_))
      throw std::runtime_error(engram_nan_row(t.layer, r));
    return;
  }
  t.file->read(c, size_t(hd_), dst);
  t.file->read(s, size_t(sb), dst + hd_);
  t.file->drop_cached(c, size_t(hd_));
  t.file->drop_cached(s, size_t(sb));
}

IoQueue::Read EngramStore::take_read(size_t slot) {
  const int64_t key = slot_key_[slot];
  const Table& t = tables_[size_t(key >> 56)];
  return [this, &t, key, slot] {
    read_row(t, key & ((int64_t(1) << 56) - 1), slot);
    return int64_t(t.bytes);
  };
}

void EngramStore::read_done(size_t slot, std::exception_ptr err, int64_t bytes, double seconds) {
  stats_.read_seconds += seconds;
  stats_.bytes_read += bytes;
  stats_.reads += reads_per_row(tables_[size_t(slot_key_[slot] >> 56)]);
  slot_error_[slot] = err;
  slot_loading_[slot] = 0;
  --n_loading_;
  done_cv_.notify_all();
}

void EngramStore::prefetch(int index, const int64_t* rows, int n) {
  if (n <= 0) return;
  // in file order, once each: the reads of one chunk go out sorted and without repeats
  std::vector<int64_t> want(rows, rows + n);
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  std::lock_guard<std::mutex> lk(mu_);
  if (index < 0 || size_t(index) >= tables_.size()) return;
  const Table& t = tables_[size_t(index)];
  // reads in flight take at most half the cache, so that a prefetch never evicts its own
  // rows and a slot is always free for gather()
  for (size_t i = 0; i < want.size() && n_loading_ < cap_ / 2; ++i) {
    const int64_t r = want[i];
    if (r < 0 || r >= t.rows || where_.count(key_of(index, r))) continue;
    const size_t s = claim(key_of(index, r));
    slot_ref_[s] = 1;
    slot_loading_[s] = 1;
    slot_fresh_[s] = 1;
    ++n_loading_;
    io_->push_locked(int64_t(s));
  }
}

void EngramStore::gather(int index, const int64_t* rows, int n, uint8_t* out) {
  std::unique_lock<std::mutex> lk(mu_);
  const Table& t = tables_.at(size_t(index));
  for (int i = 0; i < n; ++i) {
    const int64_t r = rows[i];
    if (r < 0 || r >= t.rows)
      throw std::runtime_error("engram row id " + std::to_string(r) + " out of range");
    ++stats_.lookups;
    const int64_t key = key_of(index, r);
    auto it = where_.find(key);
    if (it != where_.end() && !slot_loading_[it->second] && slot_error_[it->second]) {
      // a prefetch of it failed: forget that slot and read the row here (reporting the error
      // if it fails again)
      slot_key_[it->second] = -1;
      slot_error_[it->second] = nullptr;
      where_.erase(it);
      it = where_.end();
    }
    size_t slot;
    if (it != where_.end() && !slot_loading_[it->second]) {
      slot = it->second;
      ++(slot_fresh_[slot] ? stats_.prefetched : stats_.hits);
    } else if (it != where_.end() && slot_loading_[it->second]) {
      slot = it->second;  // prefetched, still in flight
      ++stats_.prefetched;
      done_cv_.wait(lk, [&] { return !slot_loading_[slot]; });
      if (slot_error_[slot]) {
        const std::exception_ptr err = slot_error_[slot];
        where_.erase(key);
        slot_key_[slot] = -1;
        slot_error_[slot] = nullptr;
        std::rethrow_exception(err);
      }
    } else {
      // not cached (never prefetched, dropped, or a failed prefetch): read it here
      slot = claim(key);
      slot_loading_[slot] = 1;
      ++n_loading_;
      lk.unlock();
      std::exception_ptr err;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        read_row(t, r, slot);
      } catch (...) {
        err = std::current_exception();
      }
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      lk.lock();
      slot_loading_[slot] = 0;
      --n_loading_;
      stats_.read_seconds += secs;
      stats_.bytes_read += int64_t(t.bytes);
      stats_.reads += reads_per_row(t);
      if (err) {
        where_.erase(key);
        slot_key_[slot] = -1;
        std::rethrow_exception(err);
      }
    }
    slot_ref_[slot] = 1;
    slot_fresh_[slot] = 0;
    std::memcpy(out + size_t(i) * t.bytes, cache_.data() + slot * slot_bytes_, t.bytes);
  }
}

EngramStoreStats EngramStore::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace cedar
