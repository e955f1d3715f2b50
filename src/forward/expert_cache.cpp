#include "forward/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>

namespace cedar {

namespace {

// Runs start at the file offset's residue modulo a page, so that a direct read of the whole
// pages around a run lands in the slot (and the kernels see the alignment the mapping gave them)
constexpr size_t kAlign = FileReader::kDirectAlign;

// One tensor of an expert: which field it is, where it is mapped, how long.
struct Piece {
  int field;  // 2 * projection + (0 weight, 1 scale)
  const uint8_t* data;
  size_t n;
};

// The weight (and scale) tensors of one bound projection, as the checkpoint holds them: a GGUF
// block weight (its scales inside its blocks) or a release tensor and its scale.
void pieces_of(const Checkpoint& ck, const Linear& L, int proj, std::vector<Piece>& out) {
  if (const Checkpoint::BlockWeight* b = ck.block_weight(L.name + ".weight")) {
    out.push_back({2 * proj, L.w, b->data == L.w ? b->nbytes : 0});
    return;
  }
  const std::string wn = ck.has(L.name + ".weight") ? L.name + ".weight" : L.name;
  const TensorView& w = ck.get(wn);
  out.push_back({2 * proj, L.w, w.data == L.w ? w.nbytes : 0});
  if (L.scale) out.push_back({2 * proj + 1, L.scale, ck.get(L.name + ".scale").nbytes});
}

Linear& proj_of(ExpertWeights& e, int p) { return p == 0 ? e.w1 : p == 1 ? e.w2 : e.w3; }

}  // namespace

EvictionPolicy eviction_policy_from(const std::string& name) {
  if (name == "lfu") return EvictionPolicy::kLfu;
  if (name == "lru") return EvictionPolicy::kLru;
  throw std::runtime_error("expert eviction policy must be lfu or lru, got '" + name + "'");
}

ExpertCache::ExpertCache(const Checkpoint& ck, const ModelWeights& w, size_t budget_bytes,
                         int min_slots, int max_slots, EvictionPolicy policy)
    : policy_(policy) {
  for (const LayerWeights& lw : w.layers) add_layer(ck, lw);
  for (const LayerWeights& lw : w.dspark.stages) add_layer(ck, lw);
  if (slot_bytes_ == 0) throw std::runtime_error("expert cache: the model has no routed experts");
  n_slots_ = int(std::min<size_t>(
      {budget_bytes / slot_bytes_, size_t(n_experts_), size_t(std::max(0, max_slots))}));
  if (n_slots_ < min_slots)
    throw std::runtime_error("expert cache: " + std::to_string(budget_bytes >> 20) + " MiB hold " +
                             std::to_string(n_slots_) + " experts of " +
                             std::to_string(slot_bytes_ >> 10) + " KiB, a pass needs at least " +
                             std::to_string(min_slots) +
                             " (the experts one token selects): raise --mem-budget");
  arena_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, size_t(n_slots_) * slot_bytes_));
  if (!arena_) throw std::runtime_error("expert cache: cannot allocate its slots");
  slots_.resize(size_t(n_slots_));
  io_ = std::make_unique<IoQueue>(
      mu_, kIoThreads, [this](int64_t slot) { return take_read(int(slot)); },
      [this](int64_t slot, std::exception_ptr err, int64_t bytes, double seconds) {
        read_done(int(slot), err, bytes, seconds);
      });
}

ExpertCache::~ExpertCache() {
  io_.reset();  // the reads write into the arena
  std::free(arena_);
}

// Every routed expert of one MoE layer: its tensors located in the shards and grouped into runs
// of adjacent bytes, each run placed in the slot at the file offset's residue modulo a page.
void ExpertCache::add_layer(const Checkpoint& ck, const LayerWeights& lw) {
  std::map<std::string, int> file_of;
  for (size_t i = 0; i < files_.size(); ++i) file_of[files_[i]->path()] = int(i);
  std::vector<Expert>& out = layers_.emplace_back(lw.experts.size());
  for (size_t e = 0; e < lw.experts.size(); ++e) {
    Expert& ex = out[e];
    ex.bound = lw.experts[e];
    std::vector<Piece> ps;
    for (int p = 0; p < 3; ++p) pieces_of(ck, proj_of(ex.bound, p), p, ps);
    struct Loc {
      Piece piece;
      int file;
      uint64_t offset;
    };
    std::vector<Loc> locs;
    bool resident = false;
    for (const Piece& p : ps) {
      const auto where = p.n ? ck.locate(p.data, p.n) : std::nullopt;
      if (!where) {
        resident = true;  // copied at load (a small misaligned tensor): already in RAM
        break;
      }
      auto it = file_of.find(where->path);
      if (it == file_of.end()) {
        it = file_of.emplace(where->path, int(files_.size())).first;
        files_.push_back(FileReader::open(where->path));
        direct_.emplace_back(files_.back()->open_direct());
      }
      locs.push_back({p, it->second, where->offset});
    }
    ++n_experts_;
    if (resident) continue;
    std::sort(locs.begin(), locs.end(), [](const Loc& a, const Loc& b) {
      return a.file != b.file ? a.file < b.file : a.offset < b.offset;
    });
    size_t cursor = 0;
    for (const Loc& l : locs) {
      expert_bytes_ += int64_t(l.piece.n);
      Run* r = ex.runs.empty() ? nullptr : &ex.runs.back();
      if (r && r->file == l.file && r->offset + r->n == l.offset) {
        ex.field_at[l.piece.field] = r->at + r->n;
        r->n += l.piece.n;
      } else {
        const size_t at = (cursor + kAlign - 1) / kAlign * kAlign + l.offset % kAlign;
        ex.runs.push_back({l.file, l.offset, l.piece.n, at});
        ex.field_at[l.piece.field] = at;
      }
      cursor = ex.runs.back().at + ex.runs.back().n;
    }
    slot_bytes_ = std::max(slot_bytes_, (cursor + kAlign - 1) / kAlign * kAlign);
  }
}

// The slot to evict among those neither pinned nor loading (-1: none): a free one, else the
// least used (LFU) or least recent (LRU; LFU's tie-break), a fresh prefetch only when nothing
// else is left.
int ExpertCache::victim() const {
  int best = -1;
  uint64_t best_key[3] = {};
  for (int i = 0; i < n_slots_; ++i) {
    const Slot& s = slots_[size_t(i)];
    if (s.layer < 0) return i;
    const Expert& e = layers_[size_t(s.layer)][size_t(s.id)];
    if (e.pins > 0 || s.loading) continue;
    const uint64_t key[3] = {uint64_t(s.fresh),
                             policy_ == EvictionPolicy::kLfu ? uint64_t(e.uses) : 0, s.last_use};
    if (best < 0 || std::lexicographical_compare(key, key + 3, best_key, best_key + 3)) {
      best = i;
      std::copy(key, key + 3, best_key);
    }
  }
  return best;
}

int ExpertCache::start_read(int layer, int id) {
  const int v = victim();
  if (v < 0) return -1;
  Slot& s = slots_[size_t(v)];
  if (s.layer >= 0) {
    layers_[size_t(s.layer)][size_t(s.id)].slot = -1;
    ++stats_.evictions;
  }
  s.layer = layer;
  s.id = id;
  s.loading = true;
  s.fresh = false;
  s.last_use = clock_;
  Expert& e = layers_[size_t(layer)][size_t(id)];
  e.slot = v;
  e.error = nullptr;
  io_->push_locked(v);
  return v;
}

// A run into its slot: direct I/O of the whole pages around it where the file system allows
// (nothing cached, nothing copied), else a buffered read whose pages are dropped afterwards.
void ExpertCache::read_run(const Run& r, uint8_t* base) {
  const FileReader& f = *files_[size_t(r.file)];
  if (direct_[size_t(r.file)]) {
    const uint64_t a0 = r.offset / kAlign * kAlign;
    const uint64_t a1 = (r.offset + r.n + kAlign - 1) / kAlign * kAlign;
    if (f.read_direct(a0, size_t(a1 - a0), size_t(r.offset + r.n - a0),
                      base + r.at - (r.offset - a0)))
      return;
    direct_[size_t(r.file)] = 0;  // refused: buffered from now on
  }
  f.read(r.offset, r.n, base + r.at);
  f.drop_cached(r.offset, r.n);
}

// One I/O thread: reads queued slots outside the lock; a failed read frees its slot and leaves
// the error with the expert for the acquire() waiting on it.
IoQueue::Read ExpertCache::take_read(int slot) {
  const Expert& e = layers_[size_t(slots_[size_t(slot)].layer)][size_t(slots_[size_t(slot)].id)];
  uint8_t* base = arena_ + size_t(slot) * slot_bytes_;
  return [this, &e, base] {
    int64_t bytes = 0;
    for (const Run& r : e.runs) {  // runs are immutable after construction
      read_run(r, base);
      bytes += int64_t(r.n);
    }
    return bytes;
  };
}

void ExpertCache::read_done(int slot, std::exception_ptr err, int64_t bytes, double seconds) {
  Slot& s = slots_[size_t(slot)];
  Expert& e = layers_[size_t(s.layer)][size_t(s.id)];
  stats_.read_seconds += seconds;
  stats_.bytes_read += bytes;
  stats_.reads += int64_t(e.runs.size());
  if (err) {
    e.error = err;
    e.slot = -1;
    s.layer = s.id = -1;
  } else {
    uint8_t* base = arena_ + size_t(slot) * slot_bytes_;
    s.w = e.bound;
    for (int p = 0; p < 3; ++p) {
      Linear& L = proj_of(s.w, p);
      L.w = base + e.field_at[2 * p];
      if (L.scale) L.scale = base + e.field_at[2 * p + 1];
    }
  }
  s.loading = false;
  done_cv_.notify_all();
}

void ExpertCache::prefetch(int layer, const int* ids, int n, bool guess) {
  std::lock_guard<std::mutex> lk(mu_);
  if (layer < 0 || size_t(layer) >= layers_.size() || n <= 0) return;
  std::vector<Expert>& L = layers_[size_t(layer)];
  n = std::min(n, n_slots_);
  for (int i = 0; i < n; ++i)
    if (ids[i] < 0 || size_t(ids[i]) >= L.size()) return;
  // the asked-for experts already in a slot are held while the others find theirs, so that a
  // read never evicts a member of the same request
  for (int i = 0; i < n; ++i) ++L[size_t(ids[i])].pins;
  for (int i = 0; i < n; ++i) {
    Expert& e = L[size_t(ids[i])];
    if (e.runs.empty() || e.slot >= 0) continue;
    const int v = start_read(layer, ids[i]);
    if (v < 0) break;
    slots_[size_t(v)].fresh = true;
    slots_[size_t(v)].guess = guess;
    if (guess) ++stats_.guessed;
  }
  for (int i = 0; i < n; ++i) --L[size_t(ids[i])].pins;
}

void ExpertCache::acquire(int layer, const int* ids, int n, const ExpertWeights** out) {
  std::unique_lock<std::mutex> lk(mu_);
  if (layer < 0 || size_t(layer) >= layers_.size() || n > n_slots_)
    throw std::runtime_error("expert cache: acquire of " + std::to_string(n) +
                             " experts of layer " + std::to_string(layer) + " (capacity " +
                             std::to_string(n_slots_) + ")");
  std::vector<Expert>& L = layers_[size_t(layer)];
  for (int i = 0; i < n; ++i)
    if (ids[i] < 0 || size_t(ids[i]) >= L.size())
      throw std::runtime_error("expert cache: layer " + std::to_string(layer) + " has no expert " +
                               std::to_string(ids[i]));
  // pin every expert already in a slot (or resident) first, so that the reads of the others
  // never evict a member of this group
  for (int i = 0; i < n; ++i) {
    Expert& e = L[size_t(ids[i])];
    ++stats_.lookups;
    ++e.uses;
    if (++clock_ % (uint64_t(n_slots_) * 8) == 0)
      for (auto& layer_experts : layers_)
        for (Expert& x : layer_experts) x.uses /= 2;
    if (e.runs.empty()) {
      ++stats_.hits;
    } else if (e.slot >= 0) {
      Slot& s = slots_[size_t(e.slot)];
      if (s.fresh) {
        s.fresh = false;
        ++stats_.prefetched;
      } else {
        ++stats_.hits;
      }
      s.last_use = clock_;
    }
    ++e.pins;
  }
  auto unpin = [&] {
    for (int i = 0; i < n; ++i) --L[size_t(ids[i])].pins;
  };
  // then a slot for each miss: n <= capacity and only this group is pinned, so one frees up
  // once the reads in flight (guesses) are done
  for (int i = 0; i < n; ++i) {
    Expert& e = L[size_t(ids[i])];
    if (e.runs.empty() || e.slot >= 0) continue;
    for (;;) {
      if (start_read(layer, ids[i]) >= 0) break;
      bool loading = false;
      for (const Slot& s : slots_) loading = loading || s.loading;
      if (!loading) {
        unpin();
        throw std::runtime_error("expert cache: every slot is pinned");
      }
      done_cv_.wait(lk);
    }
    slots_[size_t(e.slot)].last_use = clock_;
  }
  // prefetches of this layer that this pass did not ask for were wrong guesses: no longer kept
  for (Slot& s : slots_)
    if (s.fresh && s.layer == layer && L[size_t(s.id)].pins == 0) {
      s.fresh = false;
      if (s.guess) ++stats_.guess_unused;
    }
  // wait for the reads still in flight
  auto in_flight = [&] {
    for (int i = 0; i < n; ++i) {
      const Expert& e = L[size_t(ids[i])];
      if (e.slot >= 0 && slots_[size_t(e.slot)].loading) return true;
    }
    return false;
  };
  if (in_flight()) {
    const auto t0 = std::chrono::steady_clock::now();
    done_cv_.wait(lk, [&] { return !in_flight(); });
    stats_.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  for (int i = 0; i < n; ++i) {
    Expert& e = L[size_t(ids[i])];
    if (!e.error) continue;
    std::exception_ptr err = e.error;
    for (int j = 0; j < n; ++j) L[size_t(ids[j])].error = nullptr;
    unpin();
    std::rethrow_exception(err);
  }
  for (int i = 0; i < n; ++i) {
    const Expert& e = L[size_t(ids[i])];
    out[i] = e.runs.empty() ? &e.bound : &slots_[size_t(e.slot)].w;
  }
}

void ExpertCache::release(int layer, const int* ids, int n) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Expert>& L = layers_.at(size_t(layer));
  for (int i = 0; i < n; ++i) {
    Expert& e = L.at(size_t(ids[i]));
    if (e.pins > 0) --e.pins;
  }
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace cedar
