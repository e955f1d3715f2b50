// GGUF containers (model/gguf, model/gguf_writer): a file the writer makes parses back to the
// same keys, values, shapes and bytes; typed reads widen integers and refuse what does not fit;
// every hostile header of spec §8.1 is refused with a message naming the problem, and no prefix
// of a valid file parses (or reads past its end).
#include "model/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/gguf_writer.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;
using gguf::Header;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct TmpDir {
  fs::path p = fs::temp_directory_path() / ("cedar-gguf-" + std::to_string(::getpid()));
  TmpDir() { fs::create_directories(p); }
  ~TmpDir() { fs::remove_all(p); }
  std::string file(const std::string& n) const { return (p / n).string(); }
};

// A small valid file: every value type, three tensors of three types.
std::vector<uint8_t> sample(const TmpDir& d, uint32_t alignment = 32) {
  gguf::Writer w(alignment);
  w.add_string("general.architecture", "deepseek41");
  w.add_u32("deepseek41.block_count", 7);
  w.add_i32("neg", -5);
  w.add_u64("big", uint64_t(1) << 63);
  w.add_f32("deepseek41.rope.freq_base", 10000.0f);
  w.add_bool("flag", true);
  w.add_i32_array("ratios", {0, 0, 2, 2, 1});
  w.add_u64_array("primes", {16000057, 16000069});
  w.add_f32_array("clamp", {10.0f, 10.0f});
  w.add_string_array("tokens", {"a", "bc", ""});
  w.add_tensor("t.f32", gguf::kF32, {4, 2}, [](uint8_t* p) {
    for (int i = 0; i < 8; ++i) {
      const float v = float(i) * 0.5f;
      std::memcpy(p + 4 * i, &v, 4);
    }
  });
  w.add_tensor("t.q8", gguf::kQ8_0, {64, 3}, [](uint8_t* p) {
    for (int i = 0; i < 6 * 34; ++i) p[i] = uint8_t(i);
  });
  w.add_tensor("t.bf16", gguf::kBF16, {8, 1, 2}, [](uint8_t* p) { std::memset(p, 0x3f, 32); });
  const std::string path = d.file("sample.gguf");
  w.write(path);
  return read_all(path);
}

Header parse(const std::vector<uint8_t>& b) { return gguf::parse_header(b.data(), b.size(), "f"); }

void expect_refused(const std::vector<uint8_t>& b, const std::string& needle) {
  try {
    parse(b);
    FAIL() << "accepted; expected an error containing '" << needle << "'";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Gguf, WriterOutputParsesBack) {
  TmpDir d;
  for (uint32_t align : {32u, 64u, 16384u}) {
    const auto b = sample(d, align);
    const Header h = parse(b);
    EXPECT_EQ(h.version, 3u);
    EXPECT_EQ(h.alignment, align);
    EXPECT_EQ(h.data_start % align, 0u);
    EXPECT_EQ(gguf::get_string(h, "general.architecture", "f"), "deepseek41");
    EXPECT_EQ(gguf::get_uint(h, "deepseek41.block_count", "f"), 7u);
    EXPECT_EQ(gguf::get_int(h, "neg", "f"), -5);
    EXPECT_EQ(gguf::get_uint(h, "big", "f"), uint64_t(1) << 63);
    EXPECT_EQ(gguf::get_float(h, "deepseek41.rope.freq_base", "f"), 10000.0);
    EXPECT_TRUE(gguf::get_bool(h, "flag", "f"));
    EXPECT_EQ(gguf::get_int_array(h, "ratios", "f"), (std::vector<int64_t>{0, 0, 2, 2, 1}));
    EXPECT_EQ(gguf::get_uint_array(h, "primes", "f"), (std::vector<uint64_t>{16000057, 16000069}));
    EXPECT_EQ(gguf::get_float_array(h, "clamp", "f"), (std::vector<double>{10.0, 10.0}));
    const auto& toks = gguf::get_string_array(h, "tokens", "f");
    ASSERT_EQ(toks.size(), 3u);
    EXPECT_EQ(toks[1], "bc");
    EXPECT_EQ(toks[2], "");
    ASSERT_EQ(h.tensors.size(), 3u);
    const gguf::TensorInfo* q8 = h.tensor("t.q8");
    ASSERT_NE(q8, nullptr);
    EXPECT_EQ(q8->n_dims, 2);
    EXPECT_EQ(q8->ne[0], 64u);
    EXPECT_EQ(q8->ne[1], 3u);
    EXPECT_EQ(q8->bytes, 6u * 34u);
    EXPECT_EQ(q8->offset % align, 0u);
    const uint8_t* q8data = b.data() + h.data_start + q8->offset;
    for (int i = 0; i < 6 * 34; ++i) ASSERT_EQ(q8data[i], uint8_t(i));
    const gguf::TensorInfo* f = h.tensor("t.f32");
    float v;
    std::memcpy(&v, b.data() + h.data_start + f->offset + 4 * 5, 4);
    EXPECT_EQ(v, 2.5f);
    EXPECT_EQ(h.tensor("t.bf16")->elements(), 16u);
    EXPECT_EQ(h.tensor("absent"), nullptr);
  }
}

TEST(Gguf, TypedReadsWidenAndRefuse) {
  TmpDir d;
  const auto b = sample(d);  // (the header views its bytes: they must outlive it)
  const Header h = parse(b);
  EXPECT_THROW(gguf::get_uint(h, "neg", "f"), std::runtime_error);     // negative
  EXPECT_THROW(gguf::get_int(h, "big", "f"), std::runtime_error);      // past INT64_MAX
  EXPECT_THROW(gguf::get_uint(h, "tokens", "f"), std::runtime_error);  // an array
  EXPECT_THROW(gguf::get_string(h, "flag", "f"), std::runtime_error);  // a bool
  EXPECT_THROW(gguf::get_float_array(h, "ratios", "f"), std::runtime_error);
  try {
    gguf::get_uint(h, "deepseek41.engram.pad_id", "model.gguf");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "model.gguf: key not found: deepseek41.engram.pad_id");
  }
  try {
    gguf::get_string(h, "ratios", "f");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "f: key 'ratios' is ARRAY of INT32, expected STRING");
  }
}

TEST(Gguf, EveryPrefixOfAValidFileIsRefused) {
  TmpDir d;
  const auto b = sample(d);
  for (size_t n = 0; n < b.size(); ++n) {
    const std::vector<uint8_t> cut(b.begin(), b.begin() + long(n));
    EXPECT_THROW(parse(cut), std::runtime_error) << "prefix of " << n << " bytes";
  }
  EXPECT_NO_THROW(parse(b));
}

void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

TEST(Gguf, HostileHeadersAreRefusedByName) {
  TmpDir d;
  const auto good = sample(d);
  const Header h = parse(good);
  auto name_pos = [&](size_t i) {
    return size_t(reinterpret_cast<const uint8_t*>(h.tensors[i].name.data()) - good.data());
  };
  // fields after tensor i's name: n_dims u32, ne u64 x n_dims, type u32, offset u64
  auto dims_pos = [&](size_t i) { return name_pos(i) + h.tensors[i].name.size(); };
  auto type_pos = [&](size_t i) { return dims_pos(i) + 4 + 8 * size_t(h.tensors[i].n_dims); };
  auto offset_pos = [&](size_t i) { return type_pos(i) + 4; };

  auto b = good;
  b[0] = 'X';
  expect_refused(b, "not a GGUF file");
  b = good;
  put_u32(b, 4, 0x03000000u);
  expect_refused(b, "big-endian");
  b = good;
  put_u32(b, 4, 2);
  expect_refused(b, "version 2");
  b = good;
  put_u64(b, 8, uint64_t(1) << 60);  // tensor count
  expect_refused(b, "tensor count");
  b = good;
  put_u64(b, 16, uint64_t(1) << 60);  // key/value count
  expect_refused(b, "key/value count");
  b = good;
  put_u32(b, type_pos(1), 77);
  expect_refused(b, "tensor 't.q8': unknown ggml type id 77");
  b = good;
  put_u64(b, dims_pos(1) + 4, 48);  // ne0 = 48: not whole Q8_0 blocks
  expect_refused(b, "not a multiple of Q8_0's block of 32");
  b = good;
  put_u64(b, dims_pos(1) + 4, 0);
  expect_refused(b, "tensor 't.q8': a zero dimension");
  b = good;
  put_u32(b, dims_pos(0), 5);
  expect_refused(b, "tensor 't.f32': 5 dimensions");
  b = good;
  put_u64(b, offset_pos(2), h.tensors[2].offset + 8);
  expect_refused(b, "not a multiple of the alignment");
  b = good;
  put_u64(b, offset_pos(2), h.tensors[1].offset);  // on top of t.q8
  expect_refused(b, "overlap");
  b = good;
  put_u64(b, offset_pos(2), uint64_t(1) << 40);
  expect_refused(b, "run past the end of the file");
  b = good;
  put_u64(b, dims_pos(1) + 12, uint64_t(1) << 62);  // ne1 huge: the size overflows
  expect_refused(b, "overflows");
  // the truncated data section
  b = good;
  b.resize(b.size() - 1);
  expect_refused(b, "run past the end of the file");
}

TEST(Gguf, HostileKeysAreRefusedByName) {
  TmpDir d;
  auto file_of = [&](auto build) {
    gguf::Writer w;
    build(w);
    const std::string p = d.file("k.gguf");
    w.write(p);
    return read_all(p);
  };
  expect_refused(file_of([](gguf::Writer& w) {
                   w.add_u32("a", 1);
                   w.add_u32("a", 2);
                 }),
                 "duplicate key 'a'");
  expect_refused(file_of([](gguf::Writer& w) {
                   w.add_u32("x", 1);
                   w.add_tensor("t", gguf::kF32, {1}, [](uint8_t*) {});
                   w.add_tensor("t", gguf::kF32, {1}, [](uint8_t*) {});
                 }),
                 "duplicate tensor 't'");
  expect_refused(file_of([](gguf::Writer& w) { w.add_u64("general.alignment", 64); }),
                 "general.alignment must be UINT32");
  expect_refused(file_of([](gguf::Writer& w) { w.add_u32("general.alignment", 12); }),
                 "general.alignment 12");
  expect_refused(file_of([](gguf::Writer& w) {
                   w.add_tensor(std::string(65, 'n'), gguf::kF32, {1}, [](uint8_t*) {});
                 }),
                 "name of 65 bytes");
  // an array that claims 2^33 elements, a string that claims 2^31 bytes, an unknown value type,
  // a nested array: one key written by hand after a valid header
  struct Bytes {
    std::vector<uint8_t> v;
    Bytes& u(uint64_t x, int n) {
      for (int i = 0; i < n; ++i) v.push_back(uint8_t(x >> (8 * i)));
      return *this;
    }
  };
  auto one_key = [](Bytes kv) {
    Bytes b;
    b.v = {'G', 'G', 'U', 'F'};
    b.u(3, 4).u(0, 8).u(1, 8).u(1, 8).u('k', 1);  // version, no tensors, one key named "k"
    b.v.insert(b.v.end(), kv.v.begin(), kv.v.end());
    b.v.resize(b.v.size() + 64, 0);
    return b.v;
  };
  expect_refused(one_key(Bytes().u(9, 4).u(6, 4).u(uint64_t(1) << 33, 8)),
                 "an array of 8589934592 elements");
  expect_refused(one_key(Bytes().u(9, 4).u(5, 4).u(1000, 8)), "truncated");
  expect_refused(one_key(Bytes().u(8, 4).u(uint64_t(1) << 31, 8)), "a string of");
  expect_refused(one_key(Bytes().u(13, 4)), "unknown value type 13");
  expect_refused(one_key(Bytes().u(9, 4).u(9, 4).u(1, 8)), "array of unsupported element type 9");
  expect_refused(one_key(Bytes().u(9, 4).u(8, 4).u(uint64_t(1) << 30, 8)), "truncated");
}

}  // namespace
}  // namespace cedar
