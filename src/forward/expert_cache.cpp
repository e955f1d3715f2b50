#include "forward/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

namespace cedar {

namespace {

constexpr size_t kAlign = 64;

// One tensor of an expert: which field it is, where it is mapped, how long.
struct Piece {
  int field;  // 2 * projection + (0 weight, 1 scale)
  const uint8_t* data;
  size_t n;
};

// The weight (and scale) tensors of one bound projection, as the checkpoint holds them.
void pieces_of(const Checkpoint& ck, const Linear& L, int proj, std::vector<Piece>& out) {
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
}

ExpertCache::~ExpertCache() { std::free(arena_); }

// Every routed expert of one MoE layer: its tensors located in the shards and grouped into runs
// of adjacent bytes, each run placed in the slot at the file offset's residue modulo 64.
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

// The slot to evict among those holding no pinned expert (-1: every slot is pinned): a free
// one, else the least used (LFU) or least recent (LRU; the tie-break of LFU).
int ExpertCache::victim() const {
  int best = -1;
  uint32_t best_uses = 0;
  uint64_t best_last = 0;
  for (int i = 0; i < n_slots_; ++i) {
    const Slot& s = slots_[size_t(i)];
    if (s.layer < 0) return i;
    const Expert& e = layers_[size_t(s.layer)][size_t(s.id)];
    if (e.pins > 0) continue;
    const uint32_t uses = policy_ == EvictionPolicy::kLfu ? e.uses : 0;
    if (best < 0 || uses < best_uses || (uses == best_uses && s.last_use < best_last)) {
      best = i;
      best_uses = uses;
      best_last = s.last_use;
    }
  }
  return best;
}

void ExpertCache::load(Expert& e, int layer, int id, int slot) {
  Slot& s = slots_[size_t(slot)];
  if (s.layer >= 0) {
    layers_[size_t(s.layer)][size_t(s.id)].slot = -1;
    ++stats_.evictions;
  }
  s.layer = -1;  // until the reads succeed
  uint8_t* base = arena_ + size_t(slot) * slot_bytes_;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Run& r : e.runs) {
    const FileReader& f = *files_[size_t(r.file)];
    f.read(r.offset, r.n, base + r.at);
    f.drop_cached(r.offset, r.n);
    stats_.bytes_read += int64_t(r.n);
    ++stats_.reads;
  }
  stats_.read_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.w = e.bound;
  for (int p = 0; p < 3; ++p) {
    Linear& L = proj_of(s.w, p);
    L.w = base + e.field_at[2 * p];
    if (L.scale) L.scale = base + e.field_at[2 * p + 1];
  }
  s.layer = layer;
  s.id = id;
  e.slot = slot;
}

void ExpertCache::acquire(int layer, const int* ids, int n, const ExpertWeights** out) {
  std::lock_guard<std::mutex> lk(mu_);
  if (layer < 0 || size_t(layer) >= layers_.size() || n > n_slots_)
    throw std::runtime_error("expert cache: acquire of " + std::to_string(n) +
                             " experts of layer " + std::to_string(layer) + " (capacity " +
                             std::to_string(n_slots_) + ")");
  std::vector<Expert>& L = layers_[size_t(layer)];
  int done = 0;
  try {
    for (; done < n; ++done) {
      Expert& e = L.at(size_t(ids[done]));
      ++stats_.lookups;
      ++e.uses;
      if (++clock_ % (uint64_t(n_slots_) * 8) == 0)
        for (auto& layer : layers_)
          for (Expert& x : layer) x.uses /= 2;
      if (e.runs.empty()) {
        out[done] = &e.bound;
        ++stats_.hits;
      } else {
        if (e.slot >= 0) {
          ++stats_.hits;
        } else {
          const int v = victim();
          if (v < 0) throw std::runtime_error("expert cache: every slot is pinned");
          load(e, layer, ids[done], v);
        }
        slots_[size_t(e.slot)].last_use = clock_;
        out[done] = &slots_[size_t(e.slot)].w;
      }
      ++e.pins;
    }
  } catch (...) {
    for (int i = 0; i < done; ++i) --L[size_t(ids[i])].pins;
    throw;
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
