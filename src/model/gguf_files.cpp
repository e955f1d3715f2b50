#include "model/gguf_files.h"

#include <cstdio>
#include <filesystem>
#include <regex>
#include <stdexcept>

namespace cedar::gguf {

namespace {

const std::regex& split_re() {
  static const std::regex re(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  return re;
}

uint64_t split_key(const Header& h, const char* key, const std::string& label) {
  if (!has_key(h, key))
    throw std::runtime_error(label + ": a shard of a split model without the key " + key);
  return get_uint(h, key, label);
}

}  // namespace

std::string split_path(const std::string& path, int no, int count) {
  const std::string stem = path.ends_with(".gguf") ? path.substr(0, path.size() - 5) : path;
  char tail[40];
  std::snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", no + 1, count);
  return stem + tail;
}

std::vector<std::string> split_paths(const std::string& path) {
  std::smatch m;
  if (!std::regex_match(path, m, split_re())) return {path};
  const int count = std::stoi(m[3].str());
  if (count < 1 || std::stoi(m[2].str()) < 1 || std::stoi(m[2].str()) > count)
    throw std::runtime_error(path + ": shard number " + m[2].str() + " of " + m[3].str());
  std::vector<std::string> paths;
  for (int i = 0; i < count; ++i) {
    paths.push_back(split_path(m[1].str() + ".gguf", i, count));
    if (!std::filesystem::is_regular_file(paths.back()))
      throw std::runtime_error(paths.back() + ": missing (shard " + std::to_string(i + 1) +
                               " of the split model " + path + ")");
  }
  return paths;
}

Files open_files(const std::string& path) {
  Files f;
  const std::vector<std::string> paths = split_paths(path);
  for (const std::string& p : paths) {
    f.files.push_back(MappedFile::open(p));
    f.shards.push_back(parse_header(f.files.back()->data(), f.files.back()->size(), p));
  }
  f.merged = f.shards[0];
  if (paths.size() == 1) {
    if (has_key(f.merged, "split.count") && get_uint(f.merged, "split.count", path) > 1)
      throw std::runtime_error(path + ": split.count is " +
                               std::to_string(get_uint(f.merged, "split.count", path)) +
                               ": one shard of a split model; open it by its "
                               "<name>-00001-of-0000N.gguf name with every shard beside it");
    return f;
  }
  uint64_t total = 0;
  const uint64_t declared = split_key(f.shards[0], "split.tensors.count", paths[0]);
  for (size_t i = 0; i < paths.size(); ++i) {
    const Header& h = f.shards[i];
    if (split_key(h, "split.no", paths[i]) != i)
      throw std::runtime_error(paths[i] + ": split.no is " +
                               std::to_string(get_uint(h, "split.no", paths[i])) + ", expected " +
                               std::to_string(i));
    if (split_key(h, "split.count", paths[i]) != paths.size())
      throw std::runtime_error(paths[i] + ": split.count is " +
                               std::to_string(get_uint(h, "split.count", paths[i])) +
                               ", the file names say " + std::to_string(paths.size()));
    if (split_key(h, "split.tensors.count", paths[i]) != declared)
      throw std::runtime_error(paths[i] + ": split.tensors.count differs from the first shard's");
    total += h.tensors.size();
    if (i == 0) continue;
    for (TensorInfo t : h.tensors) {
      t.shard = int(i);
      if (!f.merged.tensor_index_.emplace(t.name, f.merged.tensors.size()).second)
        throw std::runtime_error(paths[i] + ": tensor '" + std::string(t.name) +
                                 "' is in an earlier shard too");
      f.merged.tensors.push_back(t);
    }
  }
  if (total != declared)
    throw std::runtime_error(path + ": the shards hold " + std::to_string(total) +
                             " tensors, split.tensors.count says " + std::to_string(declared));
  return f;
}

}  // namespace cedar::gguf
