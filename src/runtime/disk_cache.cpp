#include "runtime/disk_cache.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <limits>
#include <set>

#include "text/sha256.h"

namespace cedar::runtime {

namespace {

constexpr const char* kExt = ".cdkv";
constexpr const char kNameTag[] = "cedar-prefix-unit-v1";

// A temp file whose writer (another process) is gone: the leftover of a crash.
bool abandoned_temp(const std::string& name) {
  long pid = 0;
  return DirFd::is_temp_name(name, &pid) && pid != long(::getpid()) && ::kill(pid_t(pid), 0) != 0 &&
         errno == ESRCH;
}

// The prefix hash state before any token: tag and fingerprint. Token ids are streamed after it,
// so the ids of every prefix length come out of one pass over the ids.
text::Sha256 id_hasher(const ModelFingerprint& fp) {
  text::Sha256 h;
  h.update(kNameTag, sizeof(kNameTag));
  h.update(fp.data(), fp.size());
  return h;
}

UnitId id_from(text::Sha256 h) {  // by value: finalizes a copy
  const auto d = h.digest();
  UnitId id;
  std::copy(d.begin(), d.begin() + long(id.size()), id.begin());
  return id;
}

std::string hex(const UnitId& id) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : id) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string name_of(const UnitId& id) { return hex(id) + kExt; }

}  // namespace

DiskCache::DiskCache(const ModelConfig& cfg, const ModelFingerprint& fp, DiskCacheOptions opt)
    : cfg_(cfg), fp_(fp), opt_(std::move(opt)), latest_stamp_(unix_now_ns()) {
  if (opt_.dir.empty()) throw std::runtime_error("prefix cache: no cache directory given");
  try {
    dir_ = DirFd::open(opt_.dir, /*create=*/true);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("prefix cache: cache directory ") + e.what());
  }
  const std::string problem = dir_.private_problem();
  if (!problem.empty())
    throw std::runtime_error("prefix cache: refusing the cache directory " + opt_.dir + ": " +
                             problem +
                             ". Another user could plant files or symbolic links in it; use a "
                             "directory only you can write (chmod go-w, or a new one)");
  scan();
  std::lock_guard<std::mutex> lk(mu_);
  evict_to_fit("");
}

void DiskCache::warn(const std::string& msg) const {
  if (opt_.warn)
    opt_.warn(msg);
  else
    std::cerr << "cedar: prefix cache: " << msg << "\n";
}

std::string DiskCache::path_of(const std::string& name) const { return dir_.label(name); }

UnitId DiskCache::unit_id(std::span<const int32_t> ids) const {
  text::Sha256 h = id_hasher(fp_);
  h.update(ids.data(), ids.size() * sizeof(int32_t));
  return id_from(h);
}

std::string DiskCache::unit_name(std::span<const int32_t> ids) const {
  return name_of(unit_id(ids));
}

void DiskCache::scan() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<DirFd::Entry> list;
  try {
    list = dir_.list();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("prefix cache: ") + e.what());
  }
  for (const DirFd::Entry& e : list) {
    if (abandoned_temp(e.name) && e.kind != DirFd::Kind::kOther) {
      dir_.remove(e.name);
      continue;
    }
    if (!e.name.ends_with(kExt)) continue;
    if (e.kind == DirFd::Kind::kSymlink) {  // never followed: the link itself goes
      warn(path_of(e.name) + ": a symbolic link, not a unit; removing the link (not its target)");
      dir_.remove(e.name);
      continue;
    }
    if (e.kind != DirFd::Kind::kRegular) {
      warn(path_of(e.name) + ": not a regular file; ignored");
      continue;
    }
    Entry en;
    en.bytes = e.size;
    en.stamp = e.mtime_ns;
    latest_stamp_ = std::max(latest_stamp_, en.stamp);
    try {
      const SnapshotHeader h = read_snapshot_file_header(dir_, e.name);
      if (h.version == kSnapshotVersion && h.fingerprint == fp_ &&
          kSnapshotHeaderBytes + h.payload_bytes == en.bytes && h.n_tokens >= 0 &&
          h.base_tokens >= 0 && h.base_tokens < std::max<int64_t>(h.n_tokens, 1)) {
        en.n_tokens = h.n_tokens;
        en.base_tokens = h.base_tokens;
        en.parent = h.base_tokens > 0 ? name_of(h.parent) : "";
        en.has_window = h.has_window;
      }
      // else: another model's / version's unit, or sizes that cannot be right (found when it
      // is loaded); counted in the budget, never offered
    } catch (const SnapshotError& err) {
      warn(std::string(err.what()) + "; deleting it");
      dir_.remove(e.name);
      continue;
    }
    entries_[e.name] = en;
    used_ += en.bytes;
  }
}

void DiskCache::touch(const std::string& name) {
  // Strictly increasing stamps: two touches within the clock's resolution still order correctly.
  const int64_t stamp = std::max(unix_now_ns(), latest_stamp_ + 1);
  latest_stamp_ = stamp;
  dir_.set_mtime(name, stamp);  // (a failure only costs the order after a restart)
  auto it = entries_.find(name);
  if (it != entries_.end()) it->second.stamp = stamp;
}

bool DiskCache::present(const std::string& name) const {
  const auto e = dir_.stat(name);
  return e && e->kind == DirFd::Kind::kRegular;
}

void DiskCache::touch_chain(const std::string& name) {
  std::vector<std::string> chain;
  for (std::string n = name; !n.empty() && chain.size() <= entries_.size();) {
    auto it = entries_.find(n);
    if (it == entries_.end()) break;
    chain.push_back(n);
    n = it->second.parent;
  }
  // root first, so the unit asked for is the most recent of its chain
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) touch(*it);
}

void DiskCache::drop(const std::string& name_ref, bool remove_file) {
  const std::string name = name_ref;  // may refer to the key erased below
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    used_ -= it->second.bytes;
    entries_.erase(it);
  }
  if (remove_file) dir_.remove(name);
}

int DiskCache::drop_with_descendants(const std::string& name_ref) {
  std::set<std::string> doomed{name_ref};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [n, e] : entries_)
      if (!e.parent.empty() && doomed.count(e.parent) && doomed.insert(n).second) grew = true;
  }
  for (const auto& n : doomed) drop(n, true);
  return int(doomed.size());
}

void DiskCache::evict_to_fit(const std::string& keep) {
  while (used_ > opt_.max_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->first != keep &&
          (victim == entries_.end() || it->second.stamp < victim->second.stamp))
        victim = it;
    if (victim == entries_.end()) break;
    stats_.evictions += drop_with_descendants(victim->first);
  }
}

std::map<int64_t, std::string> DiskCache::prefix_units(std::span<const int32_t> ids,
                                                       int64_t max_len) const {
  max_len = std::min<int64_t>(max_len, int64_t(ids.size()));
  std::vector<int64_t> lens;
  for (const auto& [n, e] : entries_)
    if (e.n_tokens > 0 && e.n_tokens <= max_len) lens.push_back(e.n_tokens);
  std::sort(lens.begin(), lens.end());
  lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
  std::map<int64_t, std::string> out;
  text::Sha256 h = id_hasher(fp_);
  int64_t at = 0;
  for (int64_t len : lens) {
    h.update(ids.data() + at, size_t(len - at) * sizeof(int32_t));
    at = len;
    const std::string name = name_of(id_from(h));
    auto it = entries_.find(name);
    if (it != entries_.end() && it->second.n_tokens == len) out[len] = name;
  }
  return out;
}

uint64_t DiskCache::save(std::span<const int32_t> ids, const SequenceState& state,
                         bool with_window) {
  const UnitId id = unit_id(ids);
  const std::string name = name_of(id);
  const int64_t n = int64_t(ids.size());
  int64_t base = 0;
  UnitId parent{};
  std::string parent_name;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end() && it->second.n_tokens == n &&
        (it->second.has_window || !with_window) && present(name)) {
      touch_chain(name);
      ++stats_.save_skips;
      return 0;
    }
    if (opt_.chain) {
      const auto units = prefix_units(ids, n - 1);
      if (!units.empty()) {
        base = units.rbegin()->first;
        parent_name = units.rbegin()->second;
        parent = unit_id(ids.first(size_t(base)));
        touch_chain(parent_name);  // the base must outlive this save's eviction
      }
    }
  }
  // serialize outside the lock (large states take a while); the write and the index update are
  // atomic under it
  std::vector<uint8_t> bytes;
  try {
    bytes = serialize_snapshot(state, ids, fp_, with_window, base, parent);
  } catch (const std::exception& e) {
    warn("not saving a unit of " + std::to_string(n) + " tokens: " + e.what());
    return 0;
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (!parent_name.empty() && !entries_.count(parent_name)) {
    warn("not saving a unit of " + std::to_string(n) + " tokens: its base unit of " +
         std::to_string(base) + " tokens was evicted meanwhile");
    ++stats_.save_skips;
    return 0;
  }
  if (bytes.size() > opt_.max_bytes) {
    warn("a unit of " + std::to_string(n) + " tokens (" + std::to_string(bytes.size()) +
         " bytes) exceeds the whole cache budget of " + std::to_string(opt_.max_bytes) +
         " bytes; not saved");
    ++stats_.save_skips;
    return 0;
  }
  try {
    write_snapshot_file(dir_, name, bytes);
  } catch (const SnapshotError& e) {
    warn(e.what());
    return 0;
  }
  drop(name, false);  // replaced (e.g. a window-less unit upgraded; its extensions stay valid:
                      // the same prefix, the same rows)
  Entry en;
  en.n_tokens = n;
  en.base_tokens = base;
  en.parent = parent_name;
  en.has_window = with_window;
  en.bytes = bytes.size();
  entries_[name] = en;
  used_ += en.bytes;
  touch(name);
  ++stats_.saves;
  stats_.bytes_written += en.bytes;
  evict_to_fit(name);
  return entries_.count(name) ? en.bytes : 0;
}

std::optional<SnapshotUnit> DiskCache::load_longest(std::span<const int32_t> ids, int64_t max_len,
                                                    int64_t min_len) {
  std::lock_guard<std::mutex> lk(mu_);
  const auto units = prefix_units(ids, max_len);
  for (auto cand = units.rbegin(); cand != units.rend(); ++cand) {
    if (cand->first < min_len) break;
    if (!entries_.count(cand->second)) continue;  // deleted while trying a longer one
    // the chain, leaf first; every base must be the unit of the request's own shorter prefix
    std::vector<std::string> chain{cand->second};
    bool broken = false;
    for (;;) {
      const Entry& e = entries_.at(chain.back());
      if (e.base_tokens == 0) break;
      auto p = units.find(e.base_tokens);
      if (p == units.end() || p->second != e.parent || !entries_.count(e.parent)) {
        warn(path_of(chain.back()) + ": its base unit of " + std::to_string(e.base_tokens) +
             " tokens is missing; deleting it");
        broken = true;
        break;
      }
      chain.push_back(e.parent);
    }
    if (broken) {
      ++stats_.refused;
      drop_with_descendants(chain.back());
      continue;
    }
    std::optional<SnapshotUnit> u;
    uint64_t read = 0;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const std::string path = path_of(*it);
      try {
        SnapshotUnit next = read_snapshot_file(dir_, *it, cfg_, fp_, u ? &*u : nullptr);
        const int64_t from = entries_.at(*it).base_tokens;
        if (int64_t(next.tokens.size()) != entries_.at(*it).n_tokens ||
            !std::equal(next.tokens.begin() + from, next.tokens.end(), ids.begin() + from)) {
          warn(path + ": its token ids do not match the prefix its name claims; deleting it");
          ++stats_.refused;
          drop_with_descendants(*it);
          u.reset();
          break;
        }
        read += entries_.at(*it).bytes;
        u = std::move(next);
      } catch (const SnapshotError& e) {
        ++stats_.refused;
        u.reset();
        using R = SnapshotError::Reason;
        if (e.reason() == R::kFingerprint || e.reason() == R::kVersion) {
          warn(std::string(e.what()) + "; skipped");
          entries_.at(*it).n_tokens = -1;  // not ours: leave it to the LRU
        } else if (e.reason() == R::kIo) {
          // gone (another process evicted it): what extends it cannot be loaded either
          warn(std::string(e.what()) + "; skipped");
          drop_with_descendants(*it);
        } else {
          warn(std::string(e.what()) + "; skipped and deleted");
          drop_with_descendants(*it);
        }
        break;
      }
    }
    if (!u) continue;
    touch_chain(cand->second);
    ++stats_.hits;
    stats_.bytes_read += read;
    return u;
  }
  ++stats_.misses;
  return std::nullopt;
}

std::vector<int64_t> DiskCache::lengths() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<int64_t> v;
  for (const auto& [n, e] : entries_)
    if (e.n_tokens >= 0) v.push_back(e.n_tokens);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

int64_t DiskCache::base_of(std::span<const int32_t> ids) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(unit_name(ids));
  return it == entries_.end() || it->second.n_tokens != int64_t(ids.size())
             ? -1
             : it->second.base_tokens;
}

uint64_t DiskCache::bytes_used() const {
  std::lock_guard<std::mutex> lk(mu_);
  return used_;
}

size_t DiskCache::units() const {
  std::lock_guard<std::mutex> lk(mu_);
  return entries_.size();
}

DiskCacheStats DiskCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace cedar::runtime
