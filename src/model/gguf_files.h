// The files of one GGUF model (spec v41-gguf.md §1.3, §8.1 rule 5): a single file, or the shards
// of a split one (<stem>-00001-of-0000N.gguf, each a complete GGUF with its own tensor table and
// data; the metadata in the first), mapped, parsed and merged into one header whose tensors know
// their shard.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "model/gguf.h"

namespace cedar::gguf {

// `path` alone, or for a name ending -NNNNN-of-MMMMM.gguf the M shard paths in order (whichever
// shard was named). Throws naming a missing shard.
std::vector<std::string> split_paths(const std::string& path);
// The name of shard `no` (0-based) of `count` for a model written to `path` (x.gguf ->
// x-00002-of-00003.gguf).
std::string split_path(const std::string& path, int no, int count);

struct Files {
  std::vector<std::unique_ptr<MappedFile>> files;  // one per shard
  std::vector<Header> shards;                      // parsed, one per file
  Header merged;  // shard 0's keys, every shard's tensors (TensorInfo::shard set)
  // the bytes of a tensor of `merged`
  const uint8_t* data(const TensorInfo& t) const {
    return files[size_t(t.shard)]->data() + shards[size_t(t.shard)].data_start + t.offset;
  }
  const Header& header(const TensorInfo& t) const { return shards[size_t(t.shard)]; }
  const uint8_t* file(const TensorInfo& t) const { return files[size_t(t.shard)]->data(); }
};
// Maps, parses and merges; refuses (naming the file and key) shards whose split.no, split.count
// or split.tensors.count disagree with their names and each other, a tensor held by two shards,
// and a file whose split.count says it is one shard of several but is not named like one.
Files open_files(const std::string& path);

}  // namespace cedar::gguf
