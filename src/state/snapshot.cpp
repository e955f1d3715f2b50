#include "state/snapshot.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/file_reader.h"
#include "base/json_limits.h"
#include "model/gguf_files.h"
#include "text/sha256.h"

namespace cedar {

static_assert(std::endian::native == std::endian::little,
              "snapshot files are little-endian; a big-endian port must byte-swap here");

namespace {

constexpr uint32_t kFlagWindow = 1u;
constexpr size_t kPayloadAt = 80;
constexpr uint64_t kImageSpanBytes = 16;  // first_pos i64, n_h i32, n_w i32
constexpr size_t kChecksumAt = 88;        // header bytes [0, 88) are covered by the checksum

// Appends raw little-endian values and byte runs.
class Writer {
 public:
  explicit Writer(size_t reserve) { buf_.reserve(reserve); }
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<uint8_t>& buf() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

// Bounds-checked reads of the payload: a length that lies never reads past the end.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& label) : p_(p), n_(n), label_(label) {}
  template <class T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, need(sizeof(T), what), sizeof(T));
    return v;
  }
  void bytes(void* out, size_t n, const char* what) {
    if (n) std::memcpy(out, need(n, what), n);
  }
  size_t left() const { return n_ - off_; }

 private:
  const uint8_t* need(size_t n, const char* what) {
    if (n > n_ - off_)
      throw SnapshotError(SnapshotError::Reason::kLayout, label_ + ": payload ends inside " + what);
    const uint8_t* r = p_ + off_;
    off_ += n;
    return r;
  }
  const uint8_t* p_;
  size_t n_, off_ = 0;
  const std::string& label_;
};

[[noreturn]] void layout_error(const std::string& label, const std::string& msg) {
  throw SnapshotError(SnapshotError::Reason::kLayout, label + ": " + msg);
}

// The values a writer with a valid checksum could still get wrong (a scrambled unit re-summed,
// a bug): quantizers never produce NaN codes (E4M3 0x7F/0xFF, UE8M0 0xFF), the compressor tails
// are finite, the Engram history holds ids of the vocabulary. Only the rows this unit adds are
// read (its base was checked when it was loaded).
bool nan_e4m3(uint8_t c) { return (c & 0x7F) == 0x7F; }

// The image spans a unit's positions begin (format version 2): ascending, disjoint, after the
// base's spans, starting inside [base_tokens, n_tokens) with a grid the processor can make.
void read_images(Reader& r, const SnapshotHeader& h, const ModelConfig& cfg,
                 const std::string& label, SequenceState* st) {
  const uint32_t n = r.get<uint32_t>("image span count");
  if (n > 0 && !cfg.has_vision) layout_error(label, "image spans in a model without a tower");
  if (uint64_t(n) > r.left() / kImageSpanBytes)
    layout_error(label, "image spans exceed the payload");
  for (uint32_t k = 0; k < n; ++k) {
    ImageSpan sp;
    sp.first_pos = r.get<int64_t>("image span start");
    sp.n_h = r.get<int32_t>("image span rows");
    sp.n_w = r.get<int32_t>("image span columns");
    const int64_t prev_end = st->images.empty() ? 0 : st->images.back().end();
    if (sp.first_pos < std::max(h.base_tokens, prev_end) || sp.first_pos >= h.n_tokens ||
        sp.n_h <= 0 || sp.n_w <= 0 || sp.length() > cfg.vision.max_image_tokens)
      layout_error(label, "image span at " + std::to_string(sp.first_pos) + " (" +
                              std::to_string(sp.n_h) + " x " + std::to_string(sp.n_w) +
                              ") is out of order, out of range or larger than an image can be");
    st->images.push_back(sp);
  }
}

void check_values(const SequenceState& st, const ModelConfig& cfg, int64_t base_tokens,
                  bool with_window, const std::string& label) {
  // the history's ids are of the last positions; an image position's is -1 (DEAD)
  const int64_t h0 = st.n_tokens - int64_t(st.engram_history.size());
  for (size_t i = 0; i < st.engram_history.size(); ++i) {
    const int32_t id = st.engram_history[i];
    const bool image = st.in_image(h0 + int64_t(i));
    if (image ? id != -1 : (id < 0 || id >= cfg.vocab_size))
      layout_error(
          label, "Engram history id " + std::to_string(id) + " at position " +
                     std::to_string(h0 + int64_t(i)) +
                     (image ? " is not DEAD (-1) in an image span" : " is outside the vocabulary"));
  }
  for (size_t l = 0; l < st.compressed.size(); ++l) {
    const CompressedKv& c = st.compressed[l];
    if (c.ratio == 0) continue;
    const size_t r0 = size_t(base_tokens / c.ratio), n = size_t(c.n_rows);
    const std::string where = "layer " + std::to_string(l) + ": ";
    for (size_t i = r0 * size_t(c.head_dim / 16); i < n * size_t(c.head_dim / 16); ++i)
      if (nan_e4m3(c.kv_scale[i])) layout_error(label, where + "NaN compressed KV scale");
    for (size_t i = r0 * size_t(c.index_head_dim / 32); i < n * size_t(c.index_head_dim / 32); ++i)
      if (c.ik_scale[i] == 0xFF) layout_error(label, where + "NaN index key scale");
    const size_t tail = size_t(c.n_tail) * size_t(c.head_dim);
    for (size_t i = 0; i < tail; ++i)
      if (!std::isfinite(c.tail_k[i]) || !std::isfinite(c.tail_z[i]))
        layout_error(label, where + "non-finite compressor tail");
  }
  if (!with_window) return;
  for (size_t l = 0; l < st.window.size(); ++l) {
    for (const uint8_t c : st.window[l].codes)
      if (nan_e4m3(c)) layout_error(label, "layer " + std::to_string(l) + ": NaN window code");
    for (const uint8_t s : st.window[l].scales)
      if (s == 0xFF) layout_error(label, "layer " + std::to_string(l) + ": NaN window scale");
  }
}

std::array<uint8_t, 32> checksum_of(const uint8_t* header, const uint8_t* payload, size_t n) {
  text::Sha256 h;
  h.update(header, kChecksumAt);
  if (n) h.update(payload, n);
  return h.digest();
}

size_t engram_keep(const ModelConfig& cfg) {
  return cfg.engram_layer_ids.empty() ? 0 : size_t(std::max(0, cfg.engram_max_ngram_size - 1));
}

// Rows and tail of a source after n tokens: the compressor pools every complete group of `ratio`.
void expect_rows(const CompressedKv& c, int64_t n_tokens, int layer, const std::string& label) {
  const int64_t rows = n_tokens / c.ratio;
  const int tail = int(n_tokens % c.ratio);
  if (c.n_rows != rows || c.n_tail != tail)
    layout_error(label, "layer " + std::to_string(layer) + " has " + std::to_string(c.n_rows) +
                            " compressed rows and a tail of " + std::to_string(c.n_tail) +
                            " after " + std::to_string(n_tokens) + " tokens at ratio " +
                            std::to_string(c.ratio) + " (expected " + std::to_string(rows) +
                            " and " + std::to_string(tail) + ")");
}

}  // namespace

std::string fingerprint_hex(const ModelFingerprint& fp) { return text::to_hex(fp); }

namespace {

// The fingerprint's sample of a shard's tensor bytes: kSampleBlocks blocks of kSampleBlock bytes
// spread evenly over [begin, end), and the last block.
constexpr int kSampleBlocks = 64;
constexpr uint64_t kSampleBlock = 4096;

void hash_named(text::Sha256& h, const std::string& name, const std::string& data) {
  const uint64_t sizes[2] = {name.size(), data.size()};
  h.update(sizes, sizeof(sizes));
  h.update(name.data(), name.size());
  h.update(data.data(), data.size());
}

// `head` (the file's header bytes), the file size, then the sampled blocks of [begin, end of file).
std::string sampled_digest_input(const std::filesystem::path& p, std::string head, uint64_t begin) {
  const auto f = FileReader::open(p.string());
  std::string data = std::move(head);
  const uint64_t size = f->size();
  const uint64_t span = size > begin ? size - begin : 0;
  data.append(reinterpret_cast<const char*>(&size), sizeof(size));
  auto sample = [&](uint64_t at) {
    const size_t n = size_t(std::min(kSampleBlock, size - at)), old = data.size();
    data.resize(old + n);
    f->read(at, n, reinterpret_cast<uint8_t*>(data.data() + old));
  };
  if (span > 0) {
    for (int i = 0; i < kSampleBlocks; ++i) sample(begin + span / kSampleBlocks * uint64_t(i));
    sample(size - std::min(kSampleBlock, span));
  }
  return data;
}

// 8-byte header length, header JSON, the sampled data blocks of one shard.
std::string shard_digest_input(const std::filesystem::path& p) {
  const auto f = FileReader::open(p.string());
  if (f->size() < 8)
    throw std::runtime_error("model fingerprint: " + p.string() + " is shorter than 8 bytes");
  uint8_t len8[8];
  f->read(0, 8, len8);
  uint64_t len = 0;
  std::memcpy(&len, len8, 8);
  if (len > (uint64_t(100) << 20) || len > f->size() - 8)
    throw std::runtime_error("model fingerprint: " + p.string() + " header length " +
                             std::to_string(len) + " is implausible");
  std::string data(reinterpret_cast<const char*>(len8), 8);
  std::string json(size_t(len), '\0');
  f->read(8, json.size(), reinterpret_cast<uint8_t*>(json.data()));
  return sampled_digest_input(p, data + json, 8 + len);
}

// A GGUF model: per file (every shard of a split one), its whole header (keys with the config and
// tokenizer, the tensor table), then the sampled data blocks.
std::string gguf_digest_input(const std::string& path) {
  const gguf::Files files = gguf::open_files(path);
  std::string data;
  for (size_t i = 0; i < files.files.size(); ++i) {
    const MappedFile& f = *files.files[i];
    const uint64_t start = files.shards[i].data_start;
    data += sampled_digest_input(
        f.path(), std::string(reinterpret_cast<const char*>(f.data()), size_t(start)), start);
  }
  return data;
}

}  // namespace

ModelFingerprint model_fingerprint(const std::string& model_dir, const std::string& tokenizer_path,
                                   std::string_view extra) {
  namespace fs = std::filesystem;
  text::Sha256 h;
  static const char kTag[] = "cedar-model-fingerprint-v2";
  h.update(kTag, sizeof(kTag));
  if (fs::is_regular_file(model_dir)) {  // a GGUF file: the header holds config and tokenizer
    hash_named(h, "gguf", gguf_digest_input(model_dir));
    if (!tokenizer_path.empty())
      hash_named(h, "tokenizer.json",
                 read_regular_file(tokenizer_path, kMaxTokenizerJsonBytes, "tokenizer file"));
    hash_named(h, "extra", std::string(extra));
    return h.digest();
  }
  const fs::path dir(model_dir);
  hash_named(h, "config.json",
             read_regular_file((dir / "config.json").string(), kMaxConfigJsonBytes, "config.json"));
  hash_named(
      h, "tokenizer.json",
      read_regular_file(tokenizer_path.empty() ? (dir / "tokenizer.json").string() : tokenizer_path,
                        kMaxTokenizerJsonBytes, "tokenizer file"));
  std::vector<fs::path> shards;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path());
  if (ec) throw std::runtime_error("model fingerprint: cannot list " + model_dir);
  if (shards.empty())
    throw std::runtime_error("model fingerprint: no *.safetensors file in " + model_dir);
  std::sort(shards.begin(), shards.end());
  for (const auto& s : shards) hash_named(h, s.filename().string(), shard_digest_input(s));
  hash_named(h, "extra", std::string(extra));
  return h.digest();
}

uint64_t snapshot_bytes(const ModelConfig& cfg, int64_t n_tokens, bool with_window,
                        int64_t base_tokens, int new_images) {
  uint64_t b = kSnapshotHeaderBytes + 4 * uint64_t(n_tokens - base_tokens);
  b += 4 + kImageSpanBytes * uint64_t(new_images);
  b += 4 + 4 * std::min<uint64_t>(engram_keep(cfg), uint64_t(n_tokens));
  b += 4;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    const LayerPlan& p = cfg.plan(l);
    if (!p.is_kv_source) continue;
    const uint64_t rows = uint64_t(n_tokens / p.ratio - base_tokens / p.ratio),
                   tail = uint64_t(n_tokens % p.ratio);
    b += 4 + 4 + 8 + 8 + 4;
    b += rows * uint64_t(cfg.head_dim / 2 + cfg.head_dim / 16 + cfg.index_head_dim / 2 +
                         cfg.index_head_dim / 32);
    b += 2 * tail * uint64_t(cfg.head_dim) * 4;
  }
  if (with_window)
    b += 8 + 4 +
         uint64_t(cfg.num_hidden_layers) * uint64_t(cfg.sliding_window) *
             uint64_t(cfg.head_dim + cfg.head_dim / 32);
  return b;
}

std::vector<uint8_t> serialize_snapshot(const SequenceState& st, std::span<const int32_t> tokens,
                                        const ModelFingerprint& fp, bool with_window,
                                        int64_t base_tokens, const UnitId& parent) {
  if (int64_t(tokens.size()) != st.n_tokens)
    throw std::invalid_argument("serialize_snapshot: " + std::to_string(tokens.size()) +
                                " token ids for a state of " + std::to_string(st.n_tokens) +
                                " tokens");
  if (base_tokens < 0 || base_tokens >= std::max<int64_t>(st.n_tokens, 1))
    throw std::invalid_argument("serialize_snapshot: base unit of " + std::to_string(base_tokens) +
                                " tokens for a state of " + std::to_string(st.n_tokens));
  // The global part of an open CED prompt is complete (the encoder and the candidate source's
  // projection ran on every row), so a unit without the window may be taken mid-prompt; the
  // decoder rings of an open prompt are not, so an exact-restore unit may not.
  if (with_window && st.prompt_open())
    throw std::invalid_argument(
        "serialize_snapshot: the window of an open CED prompt (decoder at " +
        std::to_string(st.dec_tokens) + " of " + std::to_string(st.n_tokens) +
        " tokens) cannot be stored");
  Writer w(kSnapshotHeaderBytes + tokens.size() * 4 + st.bytes());
  // header (payload size and checksum patched at the end)
  w.bytes(kSnapshotMagic, 8);
  w.put<uint32_t>(kSnapshotVersion);
  w.put<uint32_t>(with_window ? kFlagWindow : 0u);
  w.bytes(fp.data(), fp.size());
  w.put<int64_t>(st.n_tokens);
  w.put<int64_t>(base_tokens);
  const UnitId none{};
  w.bytes(base_tokens > 0 ? parent.data() : none.data(), parent.size());
  w.put<uint64_t>(0);
  const std::array<uint8_t, 32> zero{};
  w.bytes(zero.data(), zero.size());

  w.bytes(tokens.data() + base_tokens, size_t(st.n_tokens - base_tokens) * 4);
  // the image spans this unit's positions begin (the base's spans are in the base)
  uint32_t n_images = 0;
  for (const ImageSpan& sp : st.images) n_images += sp.first_pos >= base_tokens ? 1 : 0;
  w.put<uint32_t>(n_images);
  for (const ImageSpan& sp : st.images)
    if (sp.first_pos >= base_tokens) {
      w.put<int64_t>(sp.first_pos);
      w.put<int32_t>(sp.n_h);
      w.put<int32_t>(sp.n_w);
    }
  w.put<uint32_t>(uint32_t(st.engram_history.size()));
  w.bytes(st.engram_history.data(), st.engram_history.size() * 4);
  uint32_t n_sources = 0;
  for (const auto& c : st.compressed) n_sources += c.ratio > 0 ? 1 : 0;
  w.put<uint32_t>(n_sources);
  for (size_t l = 0; l < st.compressed.size(); ++l) {
    const CompressedKv& c = st.compressed[l];
    if (c.ratio == 0) continue;
    expect_rows(c, st.n_tokens, int(l), "serialize_snapshot");
    const int64_t first = base_tokens / c.ratio;  // the base unit holds rows [0, first)
    w.put<uint32_t>(uint32_t(l));
    w.put<uint32_t>(uint32_t(c.ratio));
    w.put<int64_t>(first);
    w.put<int64_t>(c.n_rows);
    w.put<uint32_t>(uint32_t(c.n_tail));
    const size_t r0 = size_t(first), r = size_t(c.n_rows - first);
    const size_t kv = size_t(c.head_dim / 2), ks = size_t(c.head_dim / 16),
                 ik = size_t(c.index_head_dim / 2), is = size_t(c.index_head_dim / 32);
    w.bytes(c.kv_fp4.data() + r0 * kv, r * kv);
    w.bytes(c.kv_scale.data() + r0 * ks, r * ks);
    w.bytes(c.ik_fp4.data() + r0 * ik, r * ik);
    w.bytes(c.ik_scale.data() + r0 * is, r * is);
    w.bytes(c.tail_k.data(), size_t(c.n_tail) * size_t(c.head_dim) * 4);
    w.bytes(c.tail_z.data(), size_t(c.n_tail) * size_t(c.head_dim) * 4);
  }
  if (with_window) {
    w.put<int64_t>(st.window_from);
    w.put<uint32_t>(uint32_t(st.window.size()));
    for (const auto& ring : st.window) {
      w.bytes(ring.codes.data(), ring.codes.size());
      w.bytes(ring.scales.data(), ring.scales.size());
    }
  }
  std::vector<uint8_t>& buf = w.buf();
  const uint64_t payload = buf.size() - kSnapshotHeaderBytes;
  std::memcpy(buf.data() + kPayloadAt, &payload, 8);
  const auto sum = checksum_of(buf.data(), buf.data() + kSnapshotHeaderBytes, payload);
  std::memcpy(buf.data() + kChecksumAt, sum.data(), sum.size());
  return std::move(buf);
}

SnapshotHeader parse_snapshot_header(const uint8_t* data, size_t size, const std::string& label) {
  if (size < kSnapshotHeaderBytes)
    throw SnapshotError(SnapshotError::Reason::kTruncated,
                        label + ": truncated (" + std::to_string(size) +
                            " bytes, shorter than the " + std::to_string(kSnapshotHeaderBytes) +
                            "-byte header)");
  if (std::memcmp(data, kSnapshotMagic, 8) != 0)
    throw SnapshotError(SnapshotError::Reason::kMagic,
                        label + ": not a cedar prefix-cache unit (bad magic)");
  SnapshotHeader h;
  uint32_t flags = 0;
  std::memcpy(&h.version, data + 8, 4);
  std::memcpy(&flags, data + 12, 4);
  h.has_window = (flags & kFlagWindow) != 0;
  std::memcpy(h.fingerprint.data(), data + 16, 32);
  std::memcpy(&h.n_tokens, data + 48, 8);
  std::memcpy(&h.base_tokens, data + 56, 8);
  std::memcpy(h.parent.data(), data + 64, 16);
  std::memcpy(&h.payload_bytes, data + kPayloadAt, 8);
  std::memcpy(h.checksum.data(), data + kChecksumAt, 32);
  return h;
}

SnapshotUnit deserialize_snapshot(const uint8_t* data, size_t size, const ModelConfig& cfg,
                                  const ModelFingerprint& expected, const std::string& label,
                                  SnapshotUnit* base) {
  using R = SnapshotError::Reason;
  const SnapshotHeader h = parse_snapshot_header(data, size, label);
  if (h.version != kSnapshotVersion && h.version != 1)
    throw SnapshotError(R::kVersion, label + ": format version " + std::to_string(h.version) +
                                         ", this build reads versions 1 to " +
                                         std::to_string(kSnapshotVersion));
  if (h.fingerprint != expected)
    throw SnapshotError(R::kFingerprint, label + ": made by another model (fingerprint " +
                                             fingerprint_hex(h.fingerprint).substr(0, 16) +
                                             "…, this model " +
                                             fingerprint_hex(expected).substr(0, 16) + "…)");
  const uint64_t have = size - kSnapshotHeaderBytes;
  if (h.payload_bytes > have)
    throw SnapshotError(R::kTruncated, label + ": truncated (payload " + std::to_string(have) +
                                           " of " + std::to_string(h.payload_bytes) + " bytes)");
  if (h.payload_bytes < have)
    throw SnapshotError(R::kLayout, label + ": " + std::to_string(have - h.payload_bytes) +
                                        " trailing bytes after the payload");
  const uint8_t* payload = data + kSnapshotHeaderBytes;
  if (checksum_of(data, payload, h.payload_bytes) != h.checksum)
    throw SnapshotError(R::kChecksum, label + ": checksum mismatch (corrupt unit)");

  // From here the bytes are what the writer wrote; still check the structure against cfg (and
  // the base) so that no length in the file can overrun a buffer or misplace a row.
  if (h.n_tokens < 0 || h.base_tokens < 0 || (h.base_tokens > 0 && h.base_tokens >= h.n_tokens))
    layout_error(label, "token range [" + std::to_string(h.base_tokens) + ", " +
                            std::to_string(h.n_tokens) + ") is invalid");
  if (h.base_tokens > 0 && (base == nullptr || int64_t(base->tokens.size()) != h.base_tokens ||
                            base->state.n_tokens != h.base_tokens))
    layout_error(label, "extends a base unit of " + std::to_string(h.base_tokens) +
                            " tokens, which was not supplied");
  Reader r(payload, h.payload_bytes, label);
  SnapshotUnit u;
  if (h.base_tokens > 0) {
    u.tokens = std::move(base->tokens);
    u.state = std::move(base->state);
  } else {
    u.state = SequenceState(cfg);
  }
  SequenceState& st = u.state;
  st.n_tokens = st.dec_tokens = h.n_tokens;
  const uint64_t n_new = uint64_t(h.n_tokens - h.base_tokens);
  if (n_new > r.left() / 4) layout_error(label, "token count exceeds the payload");
  u.tokens.resize(size_t(h.n_tokens));
  r.bytes(u.tokens.data() + h.base_tokens, size_t(n_new) * 4, "token ids");
  if (h.version >= 2) read_images(r, h, cfg, label, &st);
  // text positions hold ids of the vocabulary, image positions identity ids (negative)
  for (size_t i = size_t(h.base_tokens); i < u.tokens.size(); ++i) {
    const bool image = st.in_image(int64_t(i));
    if (image ? u.tokens[i] >= 0 : (u.tokens[i] < 0 || u.tokens[i] >= cfg.vocab_size))
      layout_error(label,
                   "token id " + std::to_string(u.tokens[i]) + " at position " + std::to_string(i) +
                       (image ? " is not an image identity id" : " is outside the vocabulary"));
  }
  const uint32_t n_hist = r.get<uint32_t>("Engram history length");
  const uint64_t want_hist = std::min<uint64_t>(engram_keep(cfg), uint64_t(h.n_tokens));
  if (n_hist != want_hist)
    layout_error(label, "Engram history of " + std::to_string(n_hist) + " ids (expected " +
                            std::to_string(want_hist) + ")");
  st.engram_history.resize(n_hist);
  r.bytes(st.engram_history.data(), size_t(n_hist) * 4, "Engram history");

  uint32_t expected_sources = 0;
  for (const auto& c : st.compressed) expected_sources += c.ratio > 0 ? 1 : 0;
  const uint32_t n_sources = r.get<uint32_t>("source count");
  if (n_sources != expected_sources)
    layout_error(label, std::to_string(n_sources) + " KV sources, the model has " +
                            std::to_string(expected_sources));
  std::vector<bool> seen(st.compressed.size(), false);
  for (uint32_t s = 0; s < n_sources; ++s) {
    const uint32_t layer = r.get<uint32_t>("source layer");
    if (layer >= st.compressed.size() || st.compressed[layer].ratio == 0)
      layout_error(label, "layer " + std::to_string(layer) + " is not a KV source of this model");
    if (seen[layer])
      layout_error(label, "KV source layer " + std::to_string(layer) + " appears twice");
    seen[layer] = true;
    CompressedKv& c = st.compressed[layer];
    const uint32_t ratio = r.get<uint32_t>("source ratio");
    if (int(ratio) != c.ratio)
      layout_error(label, "layer " + std::to_string(layer) + " has ratio " + std::to_string(ratio) +
                              ", the model says " + std::to_string(c.ratio));
    const int64_t first = r.get<int64_t>("first row");
    const int64_t rows = r.get<int64_t>("row count");
    if (first != h.base_tokens / c.ratio || c.n_rows != first)
      layout_error(label, "layer " + std::to_string(layer) + " continues at row " +
                              std::to_string(first) + ", the base holds " +
                              std::to_string(c.n_rows));
    c.n_rows = rows;
    c.n_tail = int(r.get<uint32_t>("tail length"));
    expect_rows(c, st.n_tokens, int(layer), label);
    const size_t r0 = size_t(first), n = size_t(rows - first);
    const size_t kv = size_t(c.head_dim / 2), ks = size_t(c.head_dim / 16),
                 ik = size_t(c.index_head_dim / 2), is = size_t(c.index_head_dim / 32);
    c.kv_fp4.resize(size_t(rows) * kv);
    c.kv_scale.resize(size_t(rows) * ks);
    c.ik_fp4.resize(size_t(rows) * ik);
    c.ik_scale.resize(size_t(rows) * is);
    r.bytes(c.kv_fp4.data() + r0 * kv, n * kv, "compressed KV");
    r.bytes(c.kv_scale.data() + r0 * ks, n * ks, "compressed KV scales");
    r.bytes(c.ik_fp4.data() + r0 * ik, n * ik, "index keys");
    r.bytes(c.ik_scale.data() + r0 * is, n * is, "index key scales");
    const size_t tail = size_t(c.n_tail) * size_t(c.head_dim);
    std::fill(c.tail_k.begin(), c.tail_k.end(), 0.0f);
    std::fill(c.tail_z.begin(), c.tail_z.end(), 0.0f);
    r.bytes(c.tail_k.data(), tail * 4, "compressor tail k");
    r.bytes(c.tail_z.data(), tail * 4, "compressor tail gate");
  }
  u.has_window = h.has_window;
  if (h.has_window) {
    st.window_from = r.get<int64_t>("window start");
    if (st.window_from < 0 || st.window_from > st.n_tokens)
      layout_error(label, "window start " + std::to_string(st.window_from) + " outside [0, " +
                              std::to_string(st.n_tokens) + "]");
    const uint32_t n_rings = r.get<uint32_t>("window ring count");
    if (n_rings != st.window.size())
      layout_error(label, std::to_string(n_rings) + " window rings, the model has " +
                              std::to_string(st.window.size()) + " layers");
    for (auto& ring : st.window) {
      r.bytes(ring.codes.data(), ring.codes.size(), "window ring codes");
      r.bytes(ring.scales.data(), ring.scales.size(), "window ring scales");
    }
  } else {
    st.drop_window();  // rings empty: Transformer::replay() must run before the next forward
  }
  if (r.left() != 0) layout_error(label, std::to_string(r.left()) + " unread payload bytes");
  check_values(st, cfg, h.base_tokens, h.has_window, label);
  return u;
}

namespace {

[[noreturn]] void io_error(const std::string& what) {
  throw SnapshotError(SnapshotError::Reason::kIo, what);
}

// The directory of `path` (opened, never created) and the file's name in it.
std::pair<DirFd, std::string> split(const std::string& path) {
  const std::filesystem::path p(path);
  try {
    return {DirFd::open(p.has_parent_path() ? p.parent_path().string() : ".", false),
            p.filename().string()};
  } catch (const std::runtime_error& e) {
    io_error(e.what());
  }
}

// The first `limit` bytes of a unit (all of them: limit == size_t(-1)).
std::vector<uint8_t> read_unit(const DirFd& dir, const std::string& name, size_t limit) {
  try {
    uint64_t size = 0;
    UniqueFd fd = dir.open_file(name, &size);
    const auto f = FileReader::adopt(std::move(fd), size, dir.label(name));
    std::vector<uint8_t> buf(size_t(std::min<uint64_t>(size, limit)));
    f->read(0, buf.size(), buf.data());
    return buf;
  } catch (const std::runtime_error& e) {
    io_error(e.what());
  }
}

}  // namespace

void write_snapshot_file(const DirFd& dir, const std::string& name,
                         const std::vector<uint8_t>& bytes) {
  try {
    dir.write_file(name, bytes.data(), bytes.size());
  } catch (const std::runtime_error& e) {
    io_error(e.what());
  }
}

SnapshotUnit read_snapshot_file(const DirFd& dir, const std::string& name, const ModelConfig& cfg,
                                const ModelFingerprint& expected, SnapshotUnit* base) {
  const std::vector<uint8_t> buf = read_unit(dir, name, size_t(-1));
  return deserialize_snapshot(buf.data(), buf.size(), cfg, expected, dir.label(name), base);
}

SnapshotHeader read_snapshot_file_header(const DirFd& dir, const std::string& name) {
  const std::vector<uint8_t> buf = read_unit(dir, name, kSnapshotHeaderBytes);
  return parse_snapshot_header(buf.data(), buf.size(), dir.label(name));
}

void write_snapshot_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  const auto [dir, name] = split(path);
  write_snapshot_file(dir, name, bytes);
}

SnapshotUnit read_snapshot_file(const std::string& path, const ModelConfig& cfg,
                                const ModelFingerprint& expected, SnapshotUnit* base) {
  const auto [dir, name] = split(path);
  return read_snapshot_file(dir, name, cfg, expected, base);
}

SnapshotHeader read_snapshot_file_header(const std::string& path) {
  const auto [dir, name] = split(path);
  return read_snapshot_file_header(dir, name);
}

}  // namespace cedar
