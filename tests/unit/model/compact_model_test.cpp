// The compact default-model form (models/default/): expansion gives every used id its own
// embedding/head row and every other id the "other" row, keeps every other tensor byte for byte,
// passes the checkpoint's inventory check, and refuses malformed compact files with named errors.
#include "model/compact_model.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "model/checkpoint.h"
#include "model/make_model.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"

namespace cedar {
namespace {

namespace fs = std::filesystem;

class CompactModel : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("cedar-compact-" + std::to_string(getpid()));
    fs::remove_all(root_);
    MakeModelOptions o;
    o.preset = "tiny";
    o.seed = 3;
    o.out_dir = (root_ / "full").string();
    o.tokenizer = CEDAR_DEFAULT_TOKENIZER;
    make_model(o);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes root_/compact from the full model: used ids `ids`, row i of both tables filled with
  // the byte value i+1 (the "other" row: ids.size()+1); `edit` may change the tensor list.
  fs::path write_compact(const std::vector<int32_t>& ids,
                         const std::function<void(std::vector<SafetensorsOutput>&)>& edit = {}) {
    const auto ck = Checkpoint::open((root_ / "full").string());
    const int64_t D = ck->config().hidden_size, n = int64_t(ids.size());
    rows_.assign(size_t(n + 1) * size_t(D) * 2, 0);
    for (int64_t i = 0; i <= n; ++i)
      std::memset(&rows_[size_t(i * D * 2)], int(i + 1), size_t(D * 2));
    ids_ = ids;
    std::vector<SafetensorsOutput> t;
    t.push_back({"compact.used_ids",
                 DType::I32,
                 {n},
                 reinterpret_cast<const uint8_t*>(ids_.data()),
                 ids_.size() * 4});
    t.push_back({"compact.embed_rows", DType::BF16, {n + 1, D}, rows_.data(), rows_.size()});
    t.push_back({"compact.head_rows", DType::BF16, {n + 1, D}, rows_.data(), rows_.size()});
    for (const auto& [name, v] : ck->tensors())
      if (name != "embed.weight" && name != "head.weight")
        t.push_back({name, v.dtype, v.shape, v.data, v.nbytes});
    if (edit) edit(t);
    const fs::path dir = root_ / "compact";
    fs::create_directories(dir);
    write_safetensors((dir / "compact.safetensors").string(), t);
    fs::copy_file(root_ / "full" / "config.json", dir / "config.json",
                  fs::copy_options::overwrite_existing);
    return dir;
  }

  void expect_error(const std::vector<int32_t>& ids, const std::string& needle,
                    const std::function<void(std::vector<SafetensorsOutput>&)>& edit = {}) {
    const fs::path dir = write_compact(ids, edit);
    try {
      expand_compact_model(dir.string(), CEDAR_DEFAULT_TOKENIZER, (root_ / "out").string());
      ADD_FAILURE() << "expected an error containing " << needle;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(root_ / "out" / "model.safetensors"));
    EXPECT_FALSE(fs::exists(root_ / "out.tmp"));
  }

  fs::path root_;
  std::vector<uint8_t> rows_;
  std::vector<int32_t> ids_;
};

TEST_F(CompactModel, ExpandsToTheReleaseLayout) {
  const fs::path dir = write_compact({0, 1, 7, 128804});
  const fs::path out = root_ / "out";
  expand_compact_model(dir.string(), CEDAR_DEFAULT_TOKENIZER, out.string());
  const auto full = Checkpoint::open((root_ / "full").string());
  const auto ck = Checkpoint::open(out.string());  // the inventory check passes
  for (const auto& [name, v] : full->tensors()) {
    if (name == "embed.weight" || name == "head.weight") continue;
    const TensorView& w = ck->get(name);
    ASSERT_EQ(w.nbytes, v.nbytes) << name;
    EXPECT_EQ(std::memcmp(w.data, v.data, v.nbytes), 0) << name;
  }
  for (const char* name : {"embed.weight", "head.weight"}) {
    const TensorView& t = ck->get(name);
    const int64_t D = t.dim(1);
    auto row_byte = [&](int64_t id) { return int(t.data[size_t(id * D * 2 + D)]); };
    EXPECT_EQ(row_byte(0), 1) << name;
    EXPECT_EQ(row_byte(1), 2) << name;
    EXPECT_EQ(row_byte(7), 3) << name;
    EXPECT_EQ(row_byte(128804), 4) << name;
    for (int64_t id : {2, 6, 8, 1000, 128803, 129279}) EXPECT_EQ(row_byte(id), 5) << name << id;
  }
  EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

// A trained drafter's Markov tables travel as used + other rows too.
TEST_F(CompactModel, ExpandsTheMarkovTables) {
  const std::string last = "mtp.2.markov_head.";
  const std::vector<int32_t> ids = {0, 5, 128799};
  std::vector<uint8_t> markov;
  const fs::path dir = write_compact(ids, [&](std::vector<SafetensorsOutput>& t) {
    std::erase_if(t, [&](const SafetensorsOutput& o) { return o.name.rfind(last, 0) == 0; });
    const int64_t r = 16;  // the tiny preset's Markov rank
    markov.resize(size_t(ids.size() + 1) * r * 2);
    for (size_t i = 0; i <= ids.size(); ++i)
      std::memset(&markov[i * r * 2], int(10 + i), size_t(r * 2));
    t.push_back({"compact.markov_embed_rows",
                 DType::BF16,
                 {int64_t(ids.size()) + 1, r},
                 markov.data(),
                 markov.size()});
    t.push_back({"compact.markov_head_rows",
                 DType::BF16,
                 {int64_t(ids.size()) + 1, r},
                 markov.data(),
                 markov.size()});
  });
  const fs::path out = root_ / "out";
  expand_compact_model(dir.string(), CEDAR_DEFAULT_TOKENIZER, out.string());
  const auto ck = Checkpoint::open(out.string());
  for (const std::string& name : {last + "embed.weight", last + "head.weight"}) {
    const TensorView& t = ck->get(name);
    ASSERT_EQ(t.shape, (std::vector<int64_t>{129280, 16})) << name;
    auto row_byte = [&](int64_t id) { return int(t.data[size_t(id * 32 + 3)]); };
    EXPECT_EQ(row_byte(0), 10);
    EXPECT_EQ(row_byte(5), 11);
    EXPECT_EQ(row_byte(128799), 12);
    for (int64_t id : {1, 4, 6, 129279}) EXPECT_EQ(row_byte(id), 13) << name << id;
  }
  // a table both in full and as rows is ambiguous
  fs::remove_all(out);
  const auto full = Checkpoint::open((root_ / "full").string());
  const TensorView& emb = full->get(last + "embed.weight");
  expect_error({0, 1}, "in full and as compact rows", [&](std::vector<SafetensorsOutput>& t) {
    t.push_back({"compact.markov_embed_rows", DType::BF16, {3, 16}, emb.data, 3 * 16 * 2});
  });
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The repository keeps the default model as compact.safetensors.gz: the same expansion, byte for
// byte; a damaged .gz or a directory holding both forms is refused.
TEST_F(CompactModel, ExpandsTheGzippedForm) {
  const fs::path dir = write_compact({0, 1, 7, 128804});
  expand_compact_model(dir.string(), CEDAR_DEFAULT_TOKENIZER, (root_ / "plain").string());
  const std::string bytes = read_all(dir / "compact.safetensors");
  gzFile gz = gzopen((dir / "compact.safetensors.gz").c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  auto expand_error = [&] {
    try {
      expand_compact_model(dir.string(), CEDAR_DEFAULT_TOKENIZER, (root_ / "out").string());
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(expand_error().find("both"), std::string::npos);
  fs::remove(dir / "compact.safetensors");
  EXPECT_EQ(expand_error(), "");
  EXPECT_EQ(read_all(root_ / "out" / "model.safetensors"),
            read_all(root_ / "plain" / "model.safetensors"));
  const std::string gz_bytes = read_all(dir / "compact.safetensors.gz");
  std::ofstream(dir / "compact.safetensors.gz", std::ios::binary)
      << gz_bytes.substr(0, gz_bytes.size() - 100);
  EXPECT_NE(expand_error().find("compact.safetensors.gz: truncated"), std::string::npos);
}

TEST_F(CompactModel, RefusesMalformedInput) {
  expect_error({3, 2}, "strictly increasing");
  expect_error({0, 129280}, "strictly increasing");
  expect_error({0, 1}, "compact.head_rows",
               [](std::vector<SafetensorsOutput>& t) { t.erase(t.begin() + 2); });
  expect_error({0, 1}, "compact.embed_rows", [](std::vector<SafetensorsOutput>& t) {
    t[1].shape[0] -= 1;
    t[1].nbytes -= size_t(t[1].shape[1]) * 2;
  });
  expect_error({0, 1}, "layers.0.attn.wq_a.weight", [](std::vector<SafetensorsOutput>& t) {
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i].name == "layers.0.attn.wq_a.weight") t.erase(t.begin() + long(i));
  });
}

}  // namespace
}  // namespace cedar
