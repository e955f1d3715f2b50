#include "forward/engram_store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

namespace cedar {

namespace {
// (layer position, row) as one key: row ids stay far below 2^56
int64_t key_of(int index, int64_t row) { return (int64_t(index) << 56) | row; }
}  // namespace

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
    const auto c = locate(lw.engram_table, size_t(t.rows) * size_t(hd_), "codes");
    const auto s = locate(lw.engram_table_scale, size_t(t.rows) * size_t(hd_ / 32), "scales");
    t.file = by_path.at(c.path);
    if (by_path.at(s.path) != t.file)
      throw std::runtime_error("engram store: a table's codes and scales are in different shards");
    t.codes_at = c.offset;
    t.scales_at = s.offset;
    table_bytes_ += t.rows * row_bytes();
    tables_.push_back(t);
  }
  cap_ = std::max<size_t>(1, cache_bytes / size_t(row_bytes()));
  cache_.resize(cap_ * size_t(row_bytes()));
  slot_key_.assign(cap_, -1);
  slot_ref_.assign(cap_, 0);
}

void EngramStore::gather(int index, const int64_t* rows, int n, uint8_t* codes, uint8_t* scales) {
  std::lock_guard<std::mutex> lk(mu_);
  const Table& t = tables_.at(size_t(index));
  const int sb = hd_ / 32, rb = row_bytes();
  for (int i = 0; i < n; ++i) {
    const int64_t r = rows[i];
    if (r < 0 || r >= t.rows)
      throw std::runtime_error("engram row id " + std::to_string(r) + " out of range");
    ++stats_.lookups;
    const int64_t key = key_of(index, r);
    auto it = where_.find(key);
    size_t slot;
    if (it != where_.end()) {
      slot = it->second;
      ++stats_.hits;
    } else {
      // clock: the first slot not referenced since the hand last passed it
      while (slot_ref_[hand_]) slot_ref_[hand_] = 0, hand_ = (hand_ + 1) % cap_;
      slot = hand_;
      hand_ = (hand_ + 1) % cap_;
      if (slot_key_[slot] >= 0) where_.erase(slot_key_[slot]);
      slot_key_[slot] = -1;
      uint8_t* dst = cache_.data() + slot * size_t(rb);
      const auto t0 = std::chrono::steady_clock::now();
      t.file->read(t.codes_at + uint64_t(r) * uint64_t(hd_), size_t(hd_), dst);
      t.file->read(t.scales_at + uint64_t(r) * uint64_t(sb), size_t(sb), dst + hd_);
      t.file->drop_cached(t.codes_at + uint64_t(r) * uint64_t(hd_), size_t(hd_));
      t.file->drop_cached(t.scales_at + uint64_t(r) * uint64_t(sb), size_t(sb));
      stats_.read_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      stats_.bytes_read += rb;
      stats_.reads += 2;
      slot_key_[slot] = key;
      where_[key] = slot;
    }
    slot_ref_[slot] = 1;
    const uint8_t* src = cache_.data() + slot * size_t(rb);
    std::memcpy(codes + size_t(i) * size_t(hd_), src, size_t(hd_));
    std::memcpy(scales + size_t(i) * size_t(sb), src + hd_, size_t(sb));
  }
}

EngramStoreStats EngramStore::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace cedar
