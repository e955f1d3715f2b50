#include "runtime/prefix_cache.h"

#include <algorithm>
#include <chrono>
#include <iostream>

namespace cedar::runtime {

namespace {

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return int64_t(i);
}

// The longest prefix <= len of a state with image spans that a bounded replay can rebuild: the
// replay re-embeds positions [len - window, len) from ids, which cannot give an image's rows, so
// the cut moves to the start of a span it would replay (the text before the image stays).
int64_t replayable_prefix(const SequenceState& st, int64_t len, int64_t window) {
  for (auto it = st.images.rbegin(); it != st.images.rend(); ++it)
    if (it->first_pos < len && it->end() > std::max<int64_t>(0, len - window)) len = it->first_pos;
  return len;
}

}  // namespace

const char* source_name(RestoreInfo::Source s) {
  switch (s) {
    case RestoreInfo::Source::kMemory:
      return "memory";
    case RestoreInfo::Source::kDisk:
      return "disk";
    default:
      return "none";
  }
}

namespace {

// What a disk unit must have been computed with to be restored here: the checkpoint, the
// tokenizer and the kernel table (the fast tables' states differ from the reference's in the
// last bits). The caller passes `opt` on as a copy: with std::move(opt) in the same argument
// list the move may run first (GCC evaluates right to left) and leave disk_dir empty here -- the
// bug that made every fingerprint the empty one.
ModelFingerprint cache_fingerprint(const Engine& engine, const PrefixCacheOptions& opt) {
  if (opt.disk_dir.empty()) return {};
  return model_fingerprint(engine.options().model_dir, engine.options().tokenizer_path,
                           engine.kernels().name);
}

}  // namespace

PrefixCache::PrefixCache(const Engine& engine, PrefixCacheOptions opt)
    : PrefixCache(engine.config(), cache_fingerprint(engine, opt), opt) {}

PrefixCache::PrefixCache(const ModelConfig& cfg, const ModelFingerprint& fp, PrefixCacheOptions opt)
    : cfg_(cfg), opt_(std::move(opt)) {
  if (opt_.interval < 0) throw std::runtime_error("prefix cache: negative save interval");
  if (!opt_.disk_dir.empty()) {
    DiskCacheOptions d;
    d.dir = opt_.disk_dir;
    d.max_bytes = opt_.disk_bytes;
    d.chain = opt_.chain_units;
    d.warn = opt_.warn;
    disk_ = std::make_unique<DiskCache>(cfg_, fp, std::move(d));
  }
}

int64_t PrefixCache::restore(Engine& engine, std::span<const int32_t> ids, int64_t max_len,
                             SequenceState* state) {
  const auto t0 = std::chrono::steady_clock::now();
  max_len = std::clamp<int64_t>(max_len, 0, int64_t(ids.size()));
  const int64_t W = cfg_.sliding_window;
  // A state rebuilt by bounded replay costs `window` tokens through every layer, about what
  // prefilling them would: it is worth it only beyond that.
  auto value = [W](int64_t len, bool replay) { return replay ? len - W : len; };

  RestoreInfo info;
  SequenceState st;
  bool have = false, replay = false;
  int64_t len = 0, best_value = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.lookups;
    Entry* best = nullptr;
    for (auto& e : mem_) {
      int64_t c = common_prefix(e->ids, ids.first(size_t(max_len)));
      const bool whole = c == int64_t(e->ids.size());
      if (!whole) c = replayable_prefix(e->state, c, W);
      if (!whole && !opt_.allow_truncate) continue;
      const int64_t v = value(c, !whole);
      if (v > best_value) {
        best = e.get(), best_value = v, len = c, replay = !whole;
      }
    }
    if (best) {
      best->stamp = ++clock_;
      st = best->state;  // a copy: the entry stays for other requests
      have = true;
      info.source = RestoreInfo::Source::kMemory;
      info.cached_len = int64_t(best->ids.size());
    }
  }
  if (disk_) {
    // only a unit that could beat the memory candidate is read
    const int64_t disk_max = opt_.allow_truncate ? int64_t(ids.size()) : max_len;
    auto u = disk_->load_longest(ids, disk_max, len + 1);
    if (u) {
      const int64_t L = int64_t(u->tokens.size());
      const bool drep = !u->has_window || L > max_len;
      const int64_t dlen =
          drep ? replayable_prefix(u->state, std::min(L, max_len), W) : std::min(L, max_len);
      if (value(dlen, drep) > best_value) {
        st = std::move(u->state);
        have = true, len = dlen, replay = drep, best_value = value(dlen, drep);
        info.source = RestoreInfo::Source::kDisk;
        info.cached_len = L;
      }
    }
  }
  if (!have || len <= 0) {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.miss_tokens += int64_t(ids.size());
    last_ = RestoreInfo{};
    last_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return 0;
  }
  try {
    if (st.n_tokens > len) st.truncate(len);  // drops the window: replay below
    if (replay || st.window_from > std::max<int64_t>(0, len - W)) {
      std::lock_guard<std::mutex> lk(engine.forward_mutex());
      info.replay_start = engine.model().replay(st, ids.first(size_t(len)), 0);
      info.replayed = true;
    }
  } catch (const std::exception& e) {
    const std::string msg = std::string("restoring a cached prefix of ") + std::to_string(len) +
                            " tokens failed: " + e.what() + "; prefilling from scratch";
    if (opt_.warn)
      opt_.warn(msg);
    else
      std::cerr << "cedar: prefix cache: " << msg << "\n";
    std::lock_guard<std::mutex> lk(mu_);
    stats_.miss_tokens += int64_t(ids.size());
    last_ = RestoreInfo{};
    return 0;
  }
  *state = std::move(st);
  info.tokens = len;
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.hits;
  if (info.source == RestoreInfo::Source::kMemory) ++stats_.memory_hits;
  if (info.source == RestoreInfo::Source::kDisk) ++stats_.disk_hits;
  if (info.replayed) ++stats_.replays;
  stats_.hit_tokens += len;
  stats_.miss_tokens += int64_t(ids.size()) - len;
  last_ = info;
  return len;
}

void PrefixCache::evict_memory() {
  while (mem_bytes_ > opt_.memory_bytes && !mem_.empty()) {
    auto victim = std::min_element(
        mem_.begin(), mem_.end(), [](const auto& a, const auto& b) { return a->stamp < b->stamp; });
    mem_bytes_ -= (*victim)->bytes;
    mem_.erase(victim);
  }
}

void PrefixCache::offer(std::span<const int32_t> ids, const SequenceState& state, Point where) {
  if (int64_t(ids.size()) != state.n_tokens || ids.empty()) return;  // not a usable pair
  // memory: the states a next request most likely extends (prompt end, answer end), complete
  // with their window; interval points go to disk only
  if (opt_.memory_bytes > 0 && where != Point::kInterval && !state.prompt_open()) {
    std::lock_guard<std::mutex> lk(mu_);
    bool found = false;
    for (auto& e : mem_)
      if (e->ids.size() == ids.size() && std::equal(ids.begin(), ids.end(), e->ids.begin())) {
        e->stamp = ++clock_;
        found = true;
        break;
      }
    const uint64_t bytes = state.bytes() + ids.size() * sizeof(int32_t);
    if (!found && bytes <= opt_.memory_bytes) {
      auto e = std::make_unique<Entry>();
      e->ids.assign(ids.begin(), ids.end());
      e->state = state;
      e->bytes = bytes;
      e->stamp = ++clock_;
      mem_.push_back(std::move(e));
      mem_bytes_ += bytes;
      // evict others first: the new entry has the newest stamp
      evict_memory();
    }
  }
  if (disk_) {
    const bool with_window = opt_.store_window && !state.prompt_open();
    // a window-less unit of <= window tokens is never worth restoring (see restore())
    if (with_window || int64_t(ids.size()) > int64_t(cfg_.sliding_window))
      disk_->save(ids, state, with_window);
  }
}

RestoreInfo PrefixCache::last_restore() const {
  std::lock_guard<std::mutex> lk(mu_);
  return last_;
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  PrefixCacheStats s = stats_;
  s.memory_entries = int64_t(mem_.size());
  s.memory_bytes = mem_bytes_;
  return s;
}

void PrefixCache::clear_memory() {
  std::lock_guard<std::mutex> lk(mu_);
  mem_.clear();
  mem_bytes_ = 0;
}

}  // namespace cedar::runtime
