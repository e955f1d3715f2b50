#include "forward/stage.h"

#include <algorithm>
#include <sstream>

#include "numerics/bf16.h"

namespace cedar {

StageSplit::StageSplit(std::vector<int> first, int layers)
    : first_(std::move(first)), layers_(layers) {
  if (first_.empty() || first_[0] != 0)
    throw std::runtime_error("stage split: rank 0 must start at layer 0");
  for (size_t r = 1; r < first_.size(); ++r)
    if (first_[r] <= first_[r - 1] || first_[r] >= layers)
      throw std::runtime_error(
          "stage split: the first layers of the ranks must ascend strictly "
          "and stay below " +
          std::to_string(layers) + " (" + describe() + ")");
}

StageSplit StageSplit::by_bytes(const std::vector<uint64_t>& layer_bytes, uint64_t head_bytes,
                                int ranks) {
  const int L = int(layer_bytes.size());
  if (ranks < 1 || ranks > L)
    throw std::runtime_error("stage split: " + std::to_string(ranks) + " ranks for " +
                             std::to_string(L) + " layers (each rank needs at least one layer)");
  uint64_t total = head_bytes;
  for (uint64_t b : layer_bytes) total += b;
  std::vector<int> first{0};
  uint64_t run = head_bytes;
  for (int l = 0; l < L && int(first.size()) < ranks; ++l) {
    run += layer_bytes[size_t(l)];
    const int r = int(first.size());  // the rank whose share ends next
    // leave at least one layer for every rank still to come
    const bool must = L - (l + 1) == ranks - r;
    if (must || double(run) >= double(total) * r / ranks) first.push_back(l + 1);
  }
  return StageSplit(std::move(first), L);
}

StageSplit StageSplit::parse(const std::string& cuts, int layers, int ranks) {
  std::vector<int> first{0};
  std::stringstream ss(cuts);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok.empty() || tok.size() > 6 || tok.find_first_not_of("0123456789") != std::string::npos)
      throw std::runtime_error("--stage-cuts: '" + tok + "' is not a layer number");
    first.push_back(std::stoi(tok));
  }
  if (int(first.size()) != ranks)
    throw std::runtime_error("--stage-cuts names " + std::to_string(first.size() - 1) + " cuts; " +
                             std::to_string(ranks) + " ranks need " + std::to_string(ranks - 1));
  try {
    return StageSplit(std::move(first), layers);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("--stage-cuts: ") + e.what());
  }
}

int StageSplit::owner(int layer) const {
  if (layer >= layers_) return ranks() - 1;
  const auto it = std::upper_bound(first_.begin(), first_.end(), layer);
  return int(it - first_.begin()) - 1;
}

std::string StageSplit::describe() const {
  std::string s;
  for (int r = 0; r < ranks(); ++r) {
    if (r) s += "|";
    const int b = first_[size_t(r)];
    const int e = r + 1 < ranks() ? first_[size_t(r) + 1] : layers_;
    s += std::to_string(b);
    if (e - 1 > b) s += "-" + std::to_string(e - 1);
  }
  return s;
}

Crossing crossing(const ModelConfig& cfg, int cut) {
  Crossing x;
  const int L = cfg.num_hidden_layers;
  for (int s = 0; s < cut && s < L; ++s) {
    const LayerPlan& ps = cfg.plan(s);
    bool kv = false, topk = false;
    for (int m = cut; m < L; ++m) {
      const LayerPlan& pm = cfg.plan(m);
      if (ps.is_kv_source && pm.kv_source == s) kv = true;
      if (ps.is_index_source && pm.index_source == s && !pm.is_index_source) topk = true;
      if (ps.is_candidate_source && pm.uses_candidates && !pm.is_candidate_source)
        x.candidates = true;
    }
    if (kv) x.kv_sources.push_back(s);
    if (topk) x.topk_sources.push_back(s);
  }
  return x;
}

bool holds_layer(const ModelConfig& cfg, int begin, int end, int l) {
  if (l >= begin && l < end) return true;
  if (l >= begin || !cfg.plan(l).is_kv_source) return false;
  // the rows also pass through to later ranks' consumers: kept here like the local ones'
  for (int m = begin; m < cfg.num_hidden_layers; ++m)
    if (cfg.plan(m).kv_source == l) return true;
  return false;
}

void put_stream(WireWriter& w, const ModelConfig& cfg, const float* h, const float* pre, int row0,
                int rows) {
  const size_t HD = size_t(cfg.hc_mult) * size_t(cfg.hidden_size), hc = size_t(cfg.hc_mult);
  std::vector<uint16_t> bits(size_t(rows) * HD);
  const float* src = h + size_t(row0) * HD;
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16_bits(src[i]);
  w.put_array(bits.data(), bits.size());
  w.put_array(pre + size_t(row0) * hc, size_t(rows) * hc);
}

void get_stream(WireReader& r, const ModelConfig& cfg, float* h, float* pre, int row0, int rows) {
  const size_t HD = size_t(cfg.hc_mult) * size_t(cfg.hidden_size), hc = size_t(cfg.hc_mult);
  const std::vector<uint16_t> bits = r.get_array<uint16_t>();
  const std::vector<float> p = r.get_array<float>();
  if (bits.size() != size_t(rows) * HD || p.size() != size_t(rows) * hc)
    throw std::runtime_error("pipeline: a stream of " + std::to_string(bits.size() / HD) +
                             " rows arrived where " + std::to_string(rows) + " were expected");
  float* dst = h + size_t(row0) * HD;
  for (size_t i = 0; i < bits.size(); ++i) dst[i] = bf16_to_f32(bits[i]);
  std::copy(p.begin(), p.end(), pre + size_t(row0) * hc);
}

namespace {

template <class T>
void put_lists(WireWriter& w, const std::vector<std::vector<T>>& lists) {
  w.put<uint64_t>(lists.size());
  for (const auto& l : lists) w.put_array(l.data(), l.size());
}

template <class T>
void get_lists(WireReader& r, std::vector<std::vector<T>>& lists) {
  const uint64_t n = r.get<uint64_t>();
  if (n > (uint64_t(1) << 32)) throw std::runtime_error("pipeline: a malformed list count");
  lists.resize(size_t(n));
  for (auto& l : lists) l = r.get_array<T>();
}

// rows [from, n_rows) of one source: main rows, their scales, index keys, their scales
void put_rows(WireWriter& w, const CompressedKv& c, int64_t from) {
  const size_t n = size_t(c.n_rows - from);
  w.put<int64_t>(from);
  w.put_array(c.kv_row(from), n * c.kv_row_bytes());
  w.put_array(c.kv_scales_row(from), n * c.kv_scales_row_bytes());
  w.put_array(c.ik_row(from), n * c.ik_row_bytes());
  w.put_array(c.ik_scales_row(from), n * c.ik_scales_row_bytes());
}

void get_rows(WireReader& r, CompressedKv& c, int layer) {
  const int64_t from = r.get<int64_t>();
  if (from != c.n_rows)
    throw std::runtime_error("pipeline: layer " + std::to_string(layer) + "'s rows arrive from " +
                             std::to_string(from) + ", this rank holds " +
                             std::to_string(c.n_rows));
  // every block checked before any is appended: a malformed message leaves the rows as they were
  std::vector<uint8_t> kv = r.get_array<uint8_t>(), kvs = r.get_array<uint8_t>(),
                       ik = r.get_array<uint8_t>(), iks = r.get_array<uint8_t>();
  const size_t n = kv.size() / c.kv_row_bytes();
  if (kv.size() != n * c.kv_row_bytes() || kvs.size() != n * c.kv_scales_row_bytes() ||
      ik.size() != n * c.ik_row_bytes() || iks.size() != n * c.ik_scales_row_bytes())
    throw std::runtime_error("pipeline: a malformed row block");
  c.append(kv.data(), kvs.data(), ik.data(), iks.data(), int64_t(n));
}

}  // namespace

void pack_hop(WireWriter& w, const ModelConfig& cfg, int cut, std::span<const HopMember> mem) {
  const Crossing x = crossing(cfg, cut);
  for (const HopMember& m : mem) {
    w.put<uint8_t>(m.fp != nullptr);
    if (m.fp) {
      for (int s : x.topk_sources) put_lists(w, m.fp->topk[size_t(s)]);
      if (x.candidates) put_lists(w, m.fp->candidates);
    }
    for (int s : x.kv_sources)
      put_rows(w, m.st->compressed[size_t(s)], (*m.rows_before)[size_t(s)]);
  }
}

void unpack_hop(WireReader& r, const ModelConfig& cfg, int cut, std::span<const HopMember> mem) {
  const Crossing x = crossing(cfg, cut);
  for (const HopMember& m : mem) {
    if (r.get<uint8_t>() != (m.fp != nullptr))
      throw std::runtime_error("pipeline: the ranks disagree on the rows of a call");
    if (m.fp) {
      for (int s : x.topk_sources) get_lists(r, m.fp->topk[size_t(s)]);
      if (x.candidates) get_lists(r, m.fp->candidates);
    }
    for (int s : x.kv_sources) {
      CompressedKv& c = m.st->compressed[size_t(s)];
      get_rows(r, c, s);
      c.n_tail = int(m.n_tokens % c.ratio);
    }
  }
}

std::vector<uint8_t> encode_call(const Call& c) {
  WireWriter w;
  w.put_array(c.released.data(), c.released.size());
  w.put_array(c.copies.data(), c.copies.size());
  w.put<uint64_t>(c.items.size());
  for (const CallItem& it : c.items) {
    w.put(it.state_id);
    w.put(it.first_pos);
    w.put_array(it.ids.data(), it.ids.size());
    w.put(it.mode);
    w.put(it.completes);
    w.put(it.logits);
  }
  return w.take();
}

Call decode_call(const std::vector<uint8_t>& b) {
  WireReader r(b);
  Call c;
  c.released = r.get_array<uint64_t>();
  c.copies = r.get_array<Call::Copy>();
  const uint64_t n = r.get<uint64_t>();
  if (n > (uint64_t(1) << 20)) throw std::runtime_error("pipeline: a malformed call");
  c.items.resize(size_t(n));
  for (CallItem& it : c.items) {
    it.state_id = r.get<uint64_t>();
    it.first_pos = r.get<int64_t>();
    it.ids = r.get_array<int32_t>();
    it.mode = r.get<uint8_t>();
    it.completes = r.get<uint8_t>();
    it.logits = r.get<uint8_t>();
  }
  if (!r.done()) throw std::runtime_error("pipeline: a malformed call");
  return c;
}

}  // namespace cedar
