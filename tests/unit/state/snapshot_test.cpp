// Snapshot (prefix-cache unit) format: lossless round trip with and without the window rings,
// the size formula, refusal of foreign / old / corrupt / truncated units with the right reason,
// structural checks against the config, the model fingerprint, and the release layout's
// bytes-per-token arithmetic (docs/PREFIX_CACHE.md).
#include "state/snapshot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/presets.h"
#include "text/sha256.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;

ModelConfig released() {
  ModelConfig c = ModelConfig::from_file(std::string(CEDAR_SOURCE_DIR) +
                                         "/tests/fixtures/released-config.json");
  c.validate();
  return c;
}

ModelConfig tiny() {
  ModelConfig c = preset_config("tiny");
  c.validate();
  return c;
}

ModelFingerprint fp_of(uint8_t seed) {
  ModelFingerprint f{};
  for (size_t i = 0; i < f.size(); ++i) f[i] = uint8_t(seed + 7 * i);
  return f;
}

// A state after n tokens with random bytes everywhere a real forward would write (never the NaN
// codes 0x7F / 0xFF, which no quantizer produces: deserialization refuses them).
SequenceState random_state(const ModelConfig& cfg, int64_t n, std::vector<int32_t>* tokens,
                           unsigned seed) {
  std::mt19937 rng(seed);
  auto byte = [&] {
    uint8_t b;
    do b = uint8_t(rng() & 0xFF);
    while ((b & 0x7F) == 0x7F);
    return b;
  };
  SequenceState st(cfg);
  st.n_tokens = st.dec_tokens = n;
  tokens->resize(size_t(n));
  for (auto& t : *tokens) t = int32_t(rng() % uint32_t(cfg.vocab_size));
  const size_t keep = cfg.engram_layer_ids.empty() ? 0 : size_t(cfg.engram_max_ngram_size - 1);
  for (size_t i = 0; i < std::min<size_t>(keep, size_t(n)); ++i)
    st.engram_history.push_back(int32_t(rng() % 99092));
  for (auto& c : st.compressed) {
    if (c.ratio == 0) continue;
    std::vector<uint8_t> kp(size_t(c.head_dim / 2)), ks(size_t(c.head_dim / 16)),
        ip(size_t(c.index_head_dim / 2)), is(size_t(c.index_head_dim / 32));
    for (int64_t r = 0; r < n / c.ratio; ++r) {
      for (auto* v : {&kp, &ks, &ip, &is})
        for (auto& b : *v) b = byte();
      c.append(kp.data(), ks.data(), ip.data(), is.data());
    }
    c.n_tail = int(n % c.ratio);
    std::normal_distribution<float> nd;
    for (int i = 0; i < c.n_tail * c.head_dim; ++i) {
      c.tail_k[size_t(i)] = nd(rng);
      c.tail_z[size_t(i)] = nd(rng);
    }
  }
  for (auto& w : st.window) {
    for (auto& b : w.codes) b = byte();
    for (auto& b : w.scales) b = byte();
  }
  return st;
}

void expect_same_global(const SequenceState& a, const SequenceState& b) {
  EXPECT_EQ(a.n_tokens, b.n_tokens);
  EXPECT_EQ(a.engram_history, b.engram_history);
  ASSERT_EQ(a.compressed.size(), b.compressed.size());
  for (size_t l = 0; l < a.compressed.size(); ++l) {
    const auto &x = a.compressed[l], &y = b.compressed[l];
    EXPECT_EQ(x.ratio, y.ratio) << l;
    EXPECT_EQ(x.n_rows, y.n_rows) << l;
    EXPECT_EQ(x.kv_fp4, y.kv_fp4) << l;
    EXPECT_EQ(x.kv_scale, y.kv_scale) << l;
    EXPECT_EQ(x.ik_fp4, y.ik_fp4) << l;
    EXPECT_EQ(x.ik_scale, y.ik_scale) << l;
    EXPECT_EQ(x.n_tail, y.n_tail) << l;
    const size_t t = size_t(x.n_tail) * size_t(x.head_dim);
    EXPECT_TRUE(std::equal(x.tail_k.begin(), x.tail_k.begin() + long(t), y.tail_k.begin())) << l;
    EXPECT_TRUE(std::equal(x.tail_z.begin(), x.tail_z.begin() + long(t), y.tail_z.begin())) << l;
  }
}

SnapshotError::Reason refusal(const std::vector<uint8_t>& bytes, const ModelConfig& cfg,
                              const ModelFingerprint& fp) {
  try {
    deserialize_snapshot(bytes.data(), bytes.size(), cfg, fp, "unit");
  } catch (const SnapshotError& e) {
    EXPECT_NE(std::string(e.what()).find("unit: "), std::string::npos) << e.what();
    return e.reason();
  }
  ADD_FAILURE() << "unit was accepted";
  return SnapshotError::Reason::kIo;
}

TEST(Snapshot, RoundTripWithoutWindowKeepsGlobalStateAndZeroesRings) {
  const ModelConfig cfg = tiny();
  for (int64_t n : {0, 1, 2, 3, 129, 300, 301}) {
    std::vector<int32_t> toks;
    const SequenceState st = random_state(cfg, n, &toks, unsigned(n) + 1);
    const auto bytes = serialize_snapshot(st, toks, fp_of(1), false);
    EXPECT_EQ(bytes.size(), snapshot_bytes(cfg, n, false)) << n;
    const SnapshotUnit u = deserialize_snapshot(bytes.data(), bytes.size(), cfg, fp_of(1), "u");
    EXPECT_FALSE(u.has_window);
    EXPECT_EQ(u.tokens, toks);
    expect_same_global(st, u.state);
    EXPECT_EQ(u.state.dec_tokens, n);
    EXPECT_EQ(u.state.window_from, n);  // dropped: replay must refill the rings
    for (const auto& w : u.state.window) {
      EXPECT_TRUE(std::all_of(w.codes.begin(), w.codes.end(), [](uint8_t b) { return b == 0; }));
      EXPECT_TRUE(std::all_of(w.scales.begin(), w.scales.end(), [](uint8_t b) { return b == 0; }));
    }
  }
}

TEST(Snapshot, RoundTripWithWindowIsTheWholeState) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  SequenceState st = random_state(cfg, 301, &toks, 9);
  st.dec_tokens = 301;
  st.window_from = 173;  // e.g. after a bounded replay
  const auto bytes = serialize_snapshot(st, toks, fp_of(1), true);
  EXPECT_EQ(bytes.size(), snapshot_bytes(cfg, 301, true));
  const SnapshotUnit u = deserialize_snapshot(bytes.data(), bytes.size(), cfg, fp_of(1), "u");
  EXPECT_TRUE(u.has_window);
  expect_same_global(st, u.state);
  EXPECT_EQ(u.state.window_from, 173);
  EXPECT_EQ(u.state.dec_tokens, 301);
  for (size_t l = 0; l < st.window.size(); ++l) {
    EXPECT_EQ(st.window[l].codes, u.state.window[l].codes);
    EXPECT_EQ(st.window[l].scales, u.state.window[l].scales);
  }
  // serializing the restored state again gives the same bytes
  EXPECT_EQ(serialize_snapshot(u.state, u.tokens, fp_of(1), true), bytes);
}

// The state of the first n tokens of `st` (n even: no tails), as a forward would have left it.
SequenceState prefix_of(const SequenceState& st, int64_t n) {
  SequenceState p = st;
  p.n_tokens = p.dec_tokens = n;
  for (auto& c : p.compressed) {
    if (c.ratio == 0) continue;
    c.n_rows = n / c.ratio;
    c.kv_fp4.resize(size_t(c.n_rows) * size_t(c.head_dim / 2));
    c.kv_scale.resize(size_t(c.n_rows) * size_t(c.head_dim / 16));
    c.ik_fp4.resize(size_t(c.n_rows) * size_t(c.index_head_dim / 2));
    c.ik_scale.resize(size_t(c.n_rows) * size_t(c.index_head_dim / 32));
    c.n_tail = int(n % c.ratio);
  }
  p.engram_history = {int32_t(n), int32_t(n + 1), int32_t(n + 2)};
  return p;
}

TEST(Snapshot, ChainedUnitsRebuildTheWholeState) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  SequenceState st = random_state(cfg, 301, &toks, 12);
  st.window_from = 173;
  const UnitId id100{1}, id200{2};
  const auto b100 =
      serialize_snapshot(prefix_of(st, 100), std::span(toks).first(100), fp_of(1), false);
  const auto b200 = serialize_snapshot(prefix_of(st, 200), std::span(toks).first(200), fp_of(1),
                                       false, 100, id100);
  const auto b301 = serialize_snapshot(st, toks, fp_of(1), true, 200, id200);
  EXPECT_EQ(b200.size(), snapshot_bytes(cfg, 200, false, 100));
  EXPECT_EQ(b301.size(), snapshot_bytes(cfg, 301, true, 200));
  EXPECT_LT(b200.size(), b100.size() + 200);  // 100 more tokens cost about as much as 100
  const SnapshotHeader h = parse_snapshot_header(b301.data(), b301.size(), "u");
  EXPECT_EQ(h.base_tokens, 200);
  EXPECT_EQ(h.parent, id200);
  SnapshotUnit u = deserialize_snapshot(b100.data(), b100.size(), cfg, fp_of(1), "u100");
  u = deserialize_snapshot(b200.data(), b200.size(), cfg, fp_of(1), "u200", &u);
  EXPECT_EQ(u.state.window_from, 200);  // no window in that unit
  u = deserialize_snapshot(b301.data(), b301.size(), cfg, fp_of(1), "u301", &u);
  EXPECT_EQ(u.tokens, toks);
  EXPECT_TRUE(u.has_window);
  EXPECT_EQ(u.state.window_from, 173);
  expect_same_global(st, u.state);
  for (size_t l = 0; l < st.window.size(); ++l)
    EXPECT_EQ(st.window[l].codes, u.state.window[l].codes);
  // the full state serialized self-contained gives back the same state
  const auto whole = serialize_snapshot(u.state, u.tokens, fp_of(1), true);
  EXPECT_EQ(whole, serialize_snapshot(st, toks, fp_of(1), true));
}

TEST(Snapshot, ChainedUnitNeedsItsOwnBase) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  const SequenceState st = random_state(cfg, 300, &toks, 13);
  const auto b300 = serialize_snapshot(st, toks, fp_of(1), false, 100, UnitId{7});
  EXPECT_EQ(refusal(b300, cfg, fp_of(1)), SnapshotError::Reason::kLayout);  // no base given
  const auto b98 =
      serialize_snapshot(prefix_of(st, 98), std::span(toks).first(98), fp_of(1), false);
  SnapshotUnit wrong = deserialize_snapshot(b98.data(), b98.size(), cfg, fp_of(1), "u98");
  try {
    deserialize_snapshot(b300.data(), b300.size(), cfg, fp_of(1), "u300", &wrong);
    ADD_FAILURE() << "a base of the wrong length was accepted";
  } catch (const SnapshotError& e) {
    EXPECT_EQ(e.reason(), SnapshotError::Reason::kLayout);
    EXPECT_NE(std::string(e.what()).find("base unit of 100 tokens"), std::string::npos) << e.what();
  }
  EXPECT_THROW(serialize_snapshot(st, toks, fp_of(1), false, 300), std::invalid_argument);
  EXPECT_THROW(serialize_snapshot(st, toks, fp_of(1), false, -1), std::invalid_argument);
}

TEST(Snapshot, RefusesForeignFingerprint) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  const SequenceState st_bytes = random_state(cfg, 40, &toks, 2);
  const auto bytes = serialize_snapshot(st_bytes, toks, fp_of(1), false);
  EXPECT_EQ(refusal(bytes, cfg, fp_of(2)), SnapshotError::Reason::kFingerprint);
}

TEST(Snapshot, RefusesOtherFormatVersion) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  const SequenceState st_bytes = random_state(cfg, 40, &toks, 2);
  auto bytes = serialize_snapshot(st_bytes, toks, fp_of(1), false);
  const uint32_t v = kSnapshotVersion + 1;
  std::memcpy(bytes.data() + 8, &v, 4);
  EXPECT_EQ(refusal(bytes, cfg, fp_of(1)), SnapshotError::Reason::kVersion);
}

TEST(Snapshot, RefusesAnyFlippedByteByChecksum) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  const SequenceState st_good = random_state(cfg, 77, &toks, 3);
  const auto good = serialize_snapshot(st_good, toks, fp_of(1), true);
  // every region: flags, n_tokens, base, base id, checksum itself, tokens, rows,
  // tail, window
  for (size_t at : {size_t(12), size_t(48), size_t(60), size_t(70), size_t(100), size_t(130),
                    good.size() / 3, good.size() / 2, good.size() - 1}) {
    auto bad = good;
    bad[at] ^= 0x10;
    const auto r = refusal(bad, cfg, fp_of(1));
    // a flipped n_tokens / flags byte may also be caught as a layout error after the checksum;
    // the checksum check comes first, so it is always the reason
    EXPECT_EQ(r, SnapshotError::Reason::kChecksum) << "byte " << at;
  }
  auto bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_EQ(refusal(bad_magic, cfg, fp_of(1)), SnapshotError::Reason::kMagic);
}

// A unit whose checksum is right but whose values no forward could have written (a scrambled
// unit re-summed) is refused before anything is restored or chained on it.
TEST(Snapshot, RefusesNaNCodesAndNonFiniteTailsBehindAValidChecksum) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  const SequenceState good = random_state(cfg, 301, &toks, 4);
  auto refused = [&](const SequenceState& st, bool window, const char* what) {
    const auto bytes = serialize_snapshot(st, toks, fp_of(1), window);  // checksum recomputed
    try {
      deserialize_snapshot(bytes.data(), bytes.size(), cfg, fp_of(1), "u");
      ADD_FAILURE() << what << " was accepted";
    } catch (const SnapshotError& e) {
      EXPECT_EQ(e.reason(), SnapshotError::Reason::kLayout) << what;
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  size_t src = 0;
  while (good.compressed[src].ratio == 0) ++src;
  {
    SequenceState st = good;
    st.compressed[src].kv_scale.back() = 0x7F;
    refused(st, false, "NaN compressed KV scale");
  }
  {
    SequenceState st = good;
    st.compressed[src].ik_scale[3] = 0xFF;
    refused(st, false, "NaN index key scale");
  }
  for (auto& c : good.compressed)
    if (c.n_tail > 0) {
      SequenceState st = good;
      st.compressed[size_t(&c - good.compressed.data())].tail_z[0] = NAN;
      refused(st, false, "non-finite compressor tail");
      break;
    }
  {
    SequenceState st = good;
    st.window[2].codes[17] = 0xFF;
    refused(st, true, "NaN window code");
    const auto bytes = serialize_snapshot(st, toks, fp_of(1), false);  // without the window: fine
    EXPECT_NO_THROW(deserialize_snapshot(bytes.data(), bytes.size(), cfg, fp_of(1), "u"));
  }
  ASSERT_FALSE(good.engram_history.empty());
  {
    SequenceState st = good;
    st.engram_history[0] = int32_t(cfg.vocab_size);
    refused(st, false, "Engram history id");
  }
}

// A state with image spans: their positions hold identity ids (negative), their Engram history
// entries -1 (DEAD). The spans a unit's positions begin are stored with it (a chained unit gets
// the base's spans from the base), and values no forward could write are refused.
SequenceState with_images(const ModelConfig& cfg, std::vector<int32_t>* toks) {
  SequenceState st = random_state(cfg, 300, toks, 21);
  st.images = {ImageSpan{10, 3, 4}, ImageSpan{290, 5, 5}};  // the second goes on past 300
  for (const ImageSpan& sp : st.images)
    for (int64_t p = sp.first_pos; p < std::min<int64_t>(sp.end(), 300); ++p)
      (*toks)[size_t(p)] = -1000 - int32_t(p);
  st.engram_history = {-1, -1, -1};  // positions 297..299
  return st;
}

TEST(Snapshot, ImageSpansRoundTripChainAndAreChecked) {
  const ModelConfig cfg = tiny();
  ASSERT_TRUE(cfg.has_vision);
  std::vector<int32_t> toks;
  const SequenceState st = with_images(cfg, &toks);
  const auto bytes = serialize_snapshot(st, toks, fp_of(1), false);
  EXPECT_EQ(bytes.size(), snapshot_bytes(cfg, 300, false, 0, 2));
  SnapshotUnit u = deserialize_snapshot(bytes.data(), bytes.size(), cfg, fp_of(1), "u");
  EXPECT_EQ(u.tokens, toks);
  EXPECT_EQ(u.state.images, st.images);
  EXPECT_EQ(u.state.engram_history, st.engram_history);
  // chained on a base of 100 tokens that holds the first span
  SequenceState base = prefix_of(st, 100);
  base.images = {st.images[0]};
  const auto b100 = serialize_snapshot(base, std::span(toks).first(100), fp_of(1), false);
  const auto b300 = serialize_snapshot(st, toks, fp_of(1), false, 100, UnitId{1});
  EXPECT_EQ(b300.size(), snapshot_bytes(cfg, 300, false, 100, 1));
  SnapshotUnit c = deserialize_snapshot(b100.data(), b100.size(), cfg, fp_of(1), "b");
  c = deserialize_snapshot(b300.data(), b300.size(), cfg, fp_of(1), "c", &c);
  EXPECT_EQ(c.state.images, st.images);
  EXPECT_EQ(c.tokens, toks);
  auto refused = [&](const SequenceState& s, const std::vector<int32_t>& t, const ModelConfig& m,
                     const char* what) {
    const auto b = serialize_snapshot(s, t, fp_of(1), false);
    try {
      deserialize_snapshot(b.data(), b.size(), m, fp_of(1), "u");
      ADD_FAILURE() << what << " was accepted";
    } catch (const SnapshotError& e) {
      EXPECT_EQ(e.reason(), SnapshotError::Reason::kLayout) << what;
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  {
    auto t = toks;
    t[5] = -3;  // a text position
    refused(st, t, cfg, "outside the vocabulary");
    t = toks;
    t[12] = 7;  // inside the first span
    refused(st, t, cfg, "not an image identity id");
  }
  {
    SequenceState s = st;
    s.engram_history[1] = 5;
    refused(s, toks, cfg, "is not DEAD");
    s = st;
    s.images = {ImageSpan{10, 3, 4}, ImageSpan{20, 5, 5}};  // overlaps the first
    refused(s, toks, cfg, "out of order");
    s = st;
    s.images[1].n_w = 2000;  // longer than max_image_tokens
    refused(s, toks, cfg, "larger than an image can be");
  }
  ModelConfig text_only = cfg;
  text_only.has_vision = false;
  refused(st, toks, text_only, "without a tower");
}

// Units of format version 1 (before image spans) are still read: a version-2 unit without
// images, less its image count, under version 1 and a recomputed checksum.
TEST(Snapshot, ReadsFormatVersionOne) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  const SequenceState st = random_state(cfg, 50, &toks, 5);
  std::vector<uint8_t> v2 = serialize_snapshot(st, toks, fp_of(1), false);
  const size_t count_at = kSnapshotHeaderBytes + toks.size() * 4;
  std::vector<uint8_t> v1(v2.begin(), v2.begin() + long(count_at));
  v1.insert(v1.end(), v2.begin() + long(count_at) + 4, v2.end());
  const uint32_t one = 1;
  std::memcpy(v1.data() + 8, &one, 4);
  const uint64_t payload = v1.size() - kSnapshotHeaderBytes;
  std::memcpy(v1.data() + 80, &payload, 8);
  text::Sha256 sha;
  sha.update(v1.data(), 88);
  sha.update(v1.data() + kSnapshotHeaderBytes, payload);
  const auto sum = sha.digest();
  std::memcpy(v1.data() + 88, sum.data(), 32);
  const SnapshotUnit u = deserialize_snapshot(v1.data(), v1.size(), cfg, fp_of(1), "v1");
  EXPECT_EQ(u.tokens, toks);
  EXPECT_TRUE(u.state.images.empty());
  expect_same_global(st, u.state);
}

TEST(Snapshot, RefusesTruncatedAndPaddedFiles) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  const SequenceState st_good = random_state(cfg, 77, &toks, 4);
  const auto good = serialize_snapshot(st_good, toks, fp_of(1), false);
  for (size_t n : {size_t(0), size_t(10), kSnapshotHeaderBytes - 1, kSnapshotHeaderBytes,
                   kSnapshotHeaderBytes + 5, good.size() / 2, good.size() - 1}) {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));
    EXPECT_EQ(refusal(cut, cfg, fp_of(1)), SnapshotError::Reason::kTruncated) << n;
  }
  auto padded = good;
  padded.push_back(0);
  EXPECT_EQ(refusal(padded, cfg, fp_of(1)), SnapshotError::Reason::kLayout);
}

TEST(Snapshot, LayoutOfAnotherConfigIsRefusedNotTrusted) {
  // Same fingerprint by construction (a caller bug), other geometry: must fail cleanly.
  const ModelConfig a = tiny();
  ModelConfig b = preset_config("small");
  b.validate();
  std::vector<int32_t> toks;
  const SequenceState st_bytes = random_state(a, 50, &toks, 5);
  const auto bytes = serialize_snapshot(st_bytes, toks, fp_of(1), true);
  EXPECT_EQ(refusal(bytes, b, fp_of(1)), SnapshotError::Reason::kLayout);
}

TEST(Snapshot, SerializeChecksTokensAndRowCounts) {
  const ModelConfig cfg = tiny();
  std::vector<int32_t> toks;
  SequenceState st = random_state(cfg, 20, &toks, 6);
  toks.pop_back();
  EXPECT_THROW(serialize_snapshot(st, toks, fp_of(1), false), std::invalid_argument);
  toks.push_back(1);
  st.dec_tokens = 12;  // an open CED prompt: global part storable, window not
  EXPECT_NO_THROW(serialize_snapshot(st, toks, fp_of(1), false));
  EXPECT_THROW(serialize_snapshot(st, toks, fp_of(1), true), std::invalid_argument);
  st.dec_tokens = 20;
  st.compressed[2].n_tail = 1;  // 20 tokens at ratio 2 leave no tail
  EXPECT_THROW(serialize_snapshot(st, toks, fp_of(1), false), SnapshotError);
}

TEST(Snapshot, FilesAreWrittenAtomicallyAndReadBack) {
  const ModelConfig cfg = tiny();
  const fs::path dir = fs::temp_directory_path() / ("cedar_snapshot_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<int32_t> toks;
  const SequenceState st = random_state(cfg, 33, &toks, 7);
  const std::string path = (dir / "u.cdkv").string();
  write_snapshot_file(path, serialize_snapshot(st, toks, fp_of(3), false));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const SnapshotHeader h = read_snapshot_file_header(path);
  EXPECT_EQ(h.n_tokens, 33);
  EXPECT_EQ(h.fingerprint, fp_of(3));
  EXPECT_FALSE(h.has_window);
  const SnapshotUnit u = read_snapshot_file(path, cfg, fp_of(3));
  expect_same_global(st, u.state);
  fs::resize_file(path, fs::file_size(path) - 3);
  try {
    read_snapshot_file(path, cfg, fp_of(3));
    ADD_FAILURE() << "truncated file accepted";
  } catch (const SnapshotError& e) {
    EXPECT_EQ(e.reason(), SnapshotError::Reason::kTruncated);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  EXPECT_THROW(read_snapshot_file((dir / "missing").string(), cfg, fp_of(3)), SnapshotError);
  fs::remove_all(dir);
}

TEST(Snapshot, ModelFingerprintCoversConfigTokenizerHeadersDataAndExtra) {
  const fs::path dir = fs::temp_directory_path() / ("cedar_fp_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
  };
  auto st_file = [](const std::string& json, const std::string& data) {
    std::string s(8, '\0');
    const uint64_t n = json.size();
    std::memcpy(s.data(), &n, 8);
    return s + json + data;
  };
  const std::string hdr = R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
  write("config.json", R"({"x":1})");
  write("tokenizer.json", R"({"model":{}})");
  write("model.safetensors", st_file(hdr, "abcd"));
  const ModelFingerprint f0 = model_fingerprint(dir.string());
  EXPECT_EQ(model_fingerprint(dir.string()), f0);
  EXPECT_NE(model_fingerprint(dir.string(), {}, "avx2"), f0);  // the kernel table
  write("model.safetensors", st_file(hdr, "wxyz"));            // other weights, the same header
  const ModelFingerprint fw = model_fingerprint(dir.string());
  EXPECT_NE(fw, f0);
  // a large shard: a change inside one sampled block is seen
  std::string big(1 << 20, 'q');
  write("model.safetensors", st_file(hdr, big));
  const ModelFingerprint fb = model_fingerprint(dir.string());
  big[(1 << 20) / 64 * 5 + 17] = 'r';
  write("model.safetensors", st_file(hdr, big));
  EXPECT_NE(model_fingerprint(dir.string()), fb);
  write("model.safetensors", st_file(hdr, "wxyz"));
  write("tokenizer.json", R"({"model":{"x":1}})");
  const ModelFingerprint ft = model_fingerprint(dir.string());
  EXPECT_NE(ft, fw);
  write("tok2.json", R"({"model":{}})");  // a tokenizer given by path
  EXPECT_EQ(model_fingerprint(dir.string(), (dir / "tok2.json").string()), fw);
  write("config.json", R"({"x":2})");
  const ModelFingerprint f1 = model_fingerprint(dir.string());
  EXPECT_NE(f1, ft);
  write("model.safetensors",
        st_file(R"({"a":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]}})", "wxyz"));
  EXPECT_NE(model_fingerprint(dir.string()), f1);
  EXPECT_EQ(fingerprint_hex(f0).size(), 64u);
  fs::remove(dir / "tokenizer.json");
  EXPECT_THROW(model_fingerprint(dir.string()), std::runtime_error);
  write("tokenizer.json", R"({"model":{}})");
  fs::remove(dir / "model.safetensors");
  EXPECT_THROW(model_fingerprint(dir.string()), std::runtime_error);
  fs::remove_all(dir);
  EXPECT_THROW(model_fingerprint(dir.string()), std::runtime_error);
}

// The release layout: 890 B of global KV per token (spec §10.2) + 4 B of token id, against the
// fixed 40 x 128 x 528 B of window rings that an exact-restore unit adds.
TEST(Snapshot, ReleaseLayoutBytesPerToken) {
  const ModelConfig cfg = released();
  const uint64_t fixed = snapshot_bytes(cfg, 0, false);
  for (int64_t n : {1024, 4096, 65536, 1048576}) {
    EXPECT_EQ(snapshot_bytes(cfg, n, false), fixed + 894 * uint64_t(n) + 3 * 4) << n;
    EXPECT_EQ(snapshot_bytes(cfg, n, true) - snapshot_bytes(cfg, n, false), 12u + 2703360u);
    // a unit extending the previous interval's unit pays for its own 1024 tokens only
    EXPECT_EQ(snapshot_bytes(cfg, n, false, n - 1024), fixed + 894u * 1024u + 12u) << n;
  }
  // measured: a real serialized state of 2,000 tokens at the release layout
  std::vector<int32_t> toks;
  const SequenceState st = random_state(cfg, 2000, &toks, 8);
  const auto no_win = serialize_snapshot(st, toks, fp_of(1), false);
  const auto win = serialize_snapshot(st, toks, fp_of(1), true);
  EXPECT_EQ(no_win.size(), fixed + 894u * 2000u + 12u);
  EXPECT_EQ(win.size(), no_win.size() + 12u + 2703360u);
  std::printf("[release layout] fixed %llu B, per token 894 B (890 global + 4 id); window +%u B\n",
              (unsigned long long)fixed, 2703372u);
  for (int64_t n : {1024, 8192, 65536, 131072, 1048576}) {
    const double a = double(snapshot_bytes(cfg, n, false)) / double(n);
    const double b = double(snapshot_bytes(cfg, n, true)) / double(n);
    std::printf("[release layout] N=%7lld: %8.1f B/token on disk, %8.1f with window (x%.2f)\n",
                (long long)n, a, b, b / a);
  }
}

}  // namespace
}  // namespace cedar
