#include "model/gguf_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "model/gguf_files.h"

namespace cedar::gguf {

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

}  // namespace

Writer::Writer(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || alignment % 8 != 0)
    throw std::invalid_argument("GGUF alignment must be a non-zero multiple of 8");
  if (alignment != 32) add_u32("general.alignment", alignment);
}

template <class T>
void Writer::raw(T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  kv_.insert(kv_.end(), b, b + sizeof(T));
}

void Writer::str(const std::string& s) {
  raw<uint64_t>(s.size());
  kv_.insert(kv_.end(), s.begin(), s.end());
}

void Writer::key(const std::string& k, ValueType t) {
  str(k);
  raw<uint32_t>(uint32_t(t));
  ++n_kv_;
}

void Writer::add_u16(const std::string& k, uint16_t v) {
  key(k, ValueType::kU16);
  raw(v);
}
void Writer::add_u32(const std::string& k, uint32_t v) {
  key(k, ValueType::kU32);
  raw(v);
}
void Writer::add_i32(const std::string& k, int32_t v) {
  key(k, ValueType::kI32);
  raw(v);
}
void Writer::add_u64(const std::string& k, uint64_t v) {
  key(k, ValueType::kU64);
  raw(v);
}
void Writer::add_f32(const std::string& k, float v) {
  key(k, ValueType::kF32);
  raw(v);
}
void Writer::add_bool(const std::string& k, bool v) {
  key(k, ValueType::kBool);
  raw<uint8_t>(v ? 1 : 0);
}
void Writer::add_string(const std::string& k, const std::string& v) {
  key(k, ValueType::kString);
  str(v);
}

template <class T>
void Writer::array(const std::string& k, ValueType t, const std::vector<T>& v) {
  key(k, ValueType::kArray);
  raw<uint32_t>(uint32_t(t));
  raw<uint64_t>(v.size());
  for (const T& x : v) raw(x);
}
void Writer::add_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  array(k, ValueType::kI32, v);
}
void Writer::add_u32_array(const std::string& k, const std::vector<uint32_t>& v) {
  array(k, ValueType::kU32, v);
}
void Writer::add_u64_array(const std::string& k, const std::vector<uint64_t>& v) {
  array(k, ValueType::kU64, v);
}
void Writer::add_f32_array(const std::string& k, const std::vector<float>& v) {
  array(k, ValueType::kF32, v);
}

void Writer::add_string_array(const std::string& k, const std::vector<std::string>& v) {
  key(k, ValueType::kArray);
  raw<uint32_t>(uint32_t(ValueType::kString));
  raw<uint64_t>(v.size());
  for (const std::string& s : v) str(s);
}

uint64_t Writer::tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne) {
  const TypeInfo* t = type_info(type);
  if (!t) throw std::invalid_argument("unknown ggml type " + std::to_string(type));
  if (ne.empty() || ne.size() > 4 || ne[0] % uint64_t(t->block_elems) != 0)
    throw std::invalid_argument(std::string("bad shape for ") + t->name);
  uint64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  return ne[0] / uint64_t(t->block_elems) * uint64_t(t->block_bytes) * rows;
}

void Writer::add_tensor(const std::string& name, uint32_t type, const std::vector<uint64_t>& ne,
                        Fill fill) {
  const uint64_t bytes = tensor_bytes(type, ne);
  tensors_.push_back({name, type, ne, bytes, data_bytes_, std::move(fill)});
  data_bytes_ = align_up(data_bytes_ + bytes, alignment_);
}

void Writer::write(const std::string& path) const {
  std::vector<uint8_t> head;
  auto put = [&](const void* p, size_t n) {
    head.insert(head.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  auto put64 = [&](uint64_t v) { put(&v, 8); };
  auto put32 = [&](uint32_t v) { put(&v, 4); };
  put("GGUF", 4);
  put32(3);
  put64(tensors_.size());
  put64(n_kv_);
  head.insert(head.end(), kv_.begin(), kv_.end());
  for (const Tensor& t : tensors_) {
    put64(t.name.size());
    put(t.name.data(), t.name.size());
    put32(uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) put64(d);
    put32(t.type);
    put64(t.offset);
  }
  head.resize(size_t(align_up(head.size(), alignment_)), 0);

  const std::string tmp = path + ".tmp";
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (!f) throw std::runtime_error(tmp + ": cannot create");
  auto out = [&](const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f.get()) != n) throw std::runtime_error(tmp + ": write failed");
  };
  out(head.data(), head.size());
  std::vector<uint8_t> buf;
  uint64_t at = 0;  // bytes of the data section written
  for (const Tensor& t : tensors_) {
    buf.assign(size_t(t.offset - at), 0);  // the previous tensor's padding
    out(buf.data(), buf.size());
    buf.assign(size_t(t.bytes), 0);
    t.fill(buf.data());
    out(buf.data(), buf.size());
    at = t.offset + t.bytes;
    if (progress_) progress_(at, data_bytes_);
  }
  buf.assign(size_t(data_bytes_ - at), 0);
  out(buf.data(), buf.size());
  if (std::fflush(f.get()) != 0) throw std::runtime_error(tmp + ": write failed");
  f.reset();
  std::filesystem::rename(tmp, path);
}

std::vector<std::string> Writer::write_split(const std::string& path, size_t max_tensors) const {
  if (max_tensors == 0) throw std::invalid_argument("write_split: max_tensors must be positive");
  if (tensors_.size() <= max_tensors) {
    write(path);
    return {path};
  }
  const size_t count = (tensors_.size() + max_tensors - 1) / max_tensors;
  if (count > 65535) throw std::invalid_argument("write_split: more than 65535 shards");
  std::vector<std::string> paths;
  uint64_t before = 0;  // data bytes of the shards written
  for (size_t no = 0; no < count; ++no) {
    Writer w(alignment_);
    if (progress_)
      w.on_progress([&](uint64_t done, uint64_t) { progress_(before + done, data_bytes_); });
    if (no == 0) {  // every key of the model (general.alignment included)
      w.kv_ = kv_;
      w.n_kv_ = n_kv_;
    }
    w.add_u16("split.no", uint16_t(no));
    w.add_u16("split.count", uint16_t(count));
    w.add_i32("split.tensors.count", int32_t(tensors_.size()));
    for (size_t i = no * max_tensors; i < std::min(tensors_.size(), (no + 1) * max_tensors); ++i)
      w.add_tensor(tensors_[i].name, tensors_[i].type, tensors_[i].ne, tensors_[i].fill);
    paths.push_back(split_path(path, int(no), int(count)));
    w.write(paths.back());
    before += w.data_bytes_;
  }
  return paths;
}

}  // namespace cedar::gguf
