// Checkpoint::open_gguf: a dialect-A or dialect-B GGUF file (or split model) as the release-layout
// tensors the engine reads (issue 15, spec v41-gguf.md). The config comes from the file's keys
// (gguf_dialect*.cpp); each release tensor is found under its dialect's name (a routed expert as
// its slice of the merged tensor) and then either
//   * viewed in place, when the file stores it as the release does (BF16 and F32 tensors; ds4's
//     native Engram rows as two strided views, codes and scales), or
//   * left in the file as a block weight, an FP8- or FP4-role projection stored as Q8_0, Q4_0,
//     Q5_0, Q2_K..Q6_K, IQ2_XXS, IQ1_S, IQ1_M or MXFP4, which the kernel families of those types
//     compute in place (unless OpenOptions::blocks_in_place is off); MXFP4 holds the release's FP4
//     codes and scales, and its families are the FP4 families reading that layout (the same bits
//     as the release's routed experts); or an Engram table stored in a block type (dialect A's
//     Q8_0 .. Q2_K tables), whose rows are decoded as they are gathered (forward/engram.cpp), or
//   * re-encoded into the release's format at load: FP8-role weights and Engram tables stored as
//     F16/BF16/F32 (or any type with --gguf-requant) to E4M3 + UE8M0 with the release's block
//     rule, routed experts from MXFP4 blocks to
//     E2M1 pairs + UE8M0 when blocks are not computed in place (a byte shuffle: the same codes and
//     scales), BF16/F32-role tensors stored in another type decoded and rounded once.
// So an FP8 weight stored as the BF16 of its exact values gets its FP8 GEMM semantics back (the
// same codes times the same powers of two, or another power-of-two split of the same values, which
// every kernel sums identically) and the file gives the release's logits bit for bit. A value the
// release formats cannot hold (a lossy or fine-tuned file) is rounded as the release's quantizer
// rounds, and counted in load_stats().
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "base/thread_pool.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "model/gguf.h"
#include "model/gguf_decode.h"
#include "model/gguf_dialect.h"
#include "model/gguf_encode.h"
#include "model/gguf_files.h"
#include "model/gguf_tokenizer.h"
#include "model/weight_quant.h"
#include "numerics/bf16.h"

namespace cedar {

namespace {

std::string ne_str(const gguf::TensorInfo& t) {
  std::string r = "[";
  for (int d = 0; d < t.n_dims; ++d) r += (d ? ", " : "") + std::to_string(t.ne[d]);
  return r + "]";
}

// Places the release tensors of one parsed model.
class Placer {
 public:
  // blocks: where FP8/FP4-role weights stored in a block type with a kernel family go, computed
  // in place (nullptr: every such weight is re-encoded)
  Placer(const gguf::Files& files, gguf::Dialect dialect, const std::string& label,
         std::function<uint8_t*(size_t)> allocate, std::map<std::string, TensorView>& out,
         std::map<std::string, Checkpoint::BlockWeight>* blocks, Checkpoint::LoadStats& stats,
         ThreadPool& pool)
      : pool_(pool),
        files_(files),
        dialect_(dialect),
        label_(label),
        allocate_(std::move(allocate)),
        out_(out),
        blocks_(blocks),
        stats_(stats) {}

  // t: a release tensor; scale: its ".scale" tensor for FP8/FP4 weights (nullptr otherwise).
  void place(const ExpectedTensor& t, const ExpectedTensor* scale) {
    int expert = -1;
    const std::string name = gguf::gguf_tensor_name(t.name, &expert, dialect_);
    if (name.empty())
      throw std::runtime_error(label_ + ": tensor '" + t.name + "' has no GGUF form");
    const gguf::TensorInfo* ti = files_.merged.tensor(name);
    if (!ti)
      throw std::runtime_error(label_ + ": tensor '" + name +
                               "' is missing (it holds the release's " + t.name + ")");
    std::vector<int64_t> want = t.shape;         // the logical [out, in] of the stored tensor
    if (t.dtype == DType::I8) want.back() *= 2;  // FP4 pairs
    const bool native_rows = ti->type == gguf::kI8 && is_engram_table(t);
    if (native_rows) want.back() += want.back() / 32;  // ds4's rows: codes, then scales
    check_shape(*ti, want, expert, name, t.name);
    if (native_rows) return place_engram_rows(t, *scale, *ti);
    if (scale && blocks_ && computed_in_place(t, ti->type)) {
      place_block(t, *ti, expert, want);
      ++stats_.blocks;
      stats_.block_bytes += (*blocks_)[t.name].nbytes;
    } else if (scale && blocks_ && is_engram_table(t) && is_block_type(ti->type)) {
      place_block(t, *ti, expert, want);  // rows decoded as they are gathered
      ++stats_.in_place;
    } else if (scale) {
      if (t.dtype == DType::I8)
        place_fp4(t, *scale, *ti, expert);
      else
        place_fp8(t, *scale, *ti);
    } else {
      place_plain(t, *ti);
    }
  }

 private:
  // ggml's ne is the release shape reversed, with the expert count last for a merged tensor.
  void check_shape(const gguf::TensorInfo& ti, const std::vector<int64_t>& want, int expert,
                   const std::string& name, const std::string& release) const {
    std::vector<int64_t> ne;
    for (auto it = want.rbegin(); it != want.rend(); ++it) ne.push_back(*it);
    if (expert >= 0) {
      if (ti.n_dims != 3 || int64_t(ti.ne[2]) <= expert)
        throw std::runtime_error(label_ + ": tensor '" + name + "' " + ne_str(ti) +
                                 " is not a merged expert tensor holding expert " +
                                 std::to_string(expert) + " (" + release + ")");
      ne.push_back(int64_t(ti.ne[2]));
    }
    bool same = ti.n_dims == int(ne.size());
    for (size_t d = 0; same && d < ne.size(); ++d) same = int64_t(ti.ne[d]) == ne[d];
    if (same) return;
    std::string msg = label_ + ": tensor '" + name + "' has ne " + ne_str(ti) + ", expected " +
                      shape_str(ne) + " (the release's " + release + " " + shape_str(want) + ")";
    if (ti.n_dims == 2 && ne.size() == 2 && int64_t(ti.ne[0]) == ne[1] &&
        int64_t(ti.ne[1]) == ne[0])
      msg += ": it is stored transposed";
    throw std::runtime_error(msg);
  }

  static bool is_engram_table(const ExpectedTensor& t) {
    return t.name.find(".engram.embed.") != std::string::npos;
  }

  // The ggml block types cedar reads in place (WeightFormat kQ8_0 .. kMXFP4): not F32/F16/BF16,
  // in which a lossless file stores exact values, nor ds4's I8 rows.
  static bool is_block_type(uint32_t type) {
    WeightFormat f;
    return block_format(type, &f);
  }

  // Block types for the weights that go through linear(), whose kernel families compute them: not
  // the Engram table (rows gathered, not multiplied) and not wo_a (a bf16-weight product, sliced
  // per output group).
  static bool computed_in_place(const ExpectedTensor& t, uint32_t type) {
    return is_block_type(type) && !is_engram_table(t) &&
           t.name.find(".attn.wo_a.") == std::string::npos;
  }

  // A weight (or an expert's slice of a merged tensor), or an Engram table, left in the file as
  // ggml blocks.
  void place_block(const ExpectedTensor& t, const gguf::TensorInfo& ti, int expert,
                   const std::vector<int64_t>& logical) {
    Checkpoint::BlockWeight b;
    b.ggml_type = ti.type;
    b.out = logical[0];
    b.in = logical[1];
    b.nbytes = size_t(b.out) * size_t(gguf::row_bytes(ti));
    b.data = files_.data(ti) + (expert >= 0 ? size_t(expert) * b.nbytes : 0);
    (*blocks_)[t.name] = b;
  }

  TensorView& view(const ExpectedTensor& t, const uint8_t* data, size_t nbytes) {
    TensorView v;
    v.name = t.name;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.data = data;
    v.nbytes = nbytes;
    return out_[t.name] = v;
  }

  // fn(r0, n, values) for groups of `group` rows of the tensor (or expert slice), decoded to fp32
  // a group at a time (a release Engram table is 98 G values: never the whole tensor) on the
  // pool's threads; fn counts what it could not hold exactly.
  template <class Fn>
  void each_group(const gguf::TensorInfo& ti, int expert, int64_t rows, int64_t group, Fn&& fn) {
    const int64_t cols = int64_t(ti.ne[0]), n_groups = (rows + group - 1) / group;
    std::atomic<int64_t> inexact{0};
    pool_.parallel_for(n_groups, [&](int64_t g0, int64_t g1) {
      std::vector<float> v(size_t(group * cols));
      int64_t mine = 0;
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t r0 = g * group, n = std::min(group, rows - r0);
        gguf::decode_rows(files_.header(ti), files_.file(ti), ti, expert, r0, n, v.data());
        mine += fn(r0, n, v.data());
      }
      inexact += mine;
    });
    stats_.inexact_values += inexact.load();
  }

  uint8_t* fresh(const ExpectedTensor& t) {
    const size_t n =
        size_t(TensorView{"", t.dtype, t.shape, nullptr, 0}.numel()) * dtype_size(t.dtype);
    stats_.reencoded_bytes += n;
    return allocate_(n);
  }

  // BF16 / F32 tensors: in place when stored so, else decoded and rounded to the release dtype.
  void place_plain(const ExpectedTensor& t, const gguf::TensorInfo& ti) {
    const uint32_t same = t.dtype == DType::BF16 ? gguf::kBF16 : gguf::kF32;
    if (t.dtype != DType::BF16 && t.dtype != DType::F32)
      throw std::runtime_error(label_ + ": tensor '" + t.name + "' has release dtype " +
                               dtype_name(t.dtype) + ", which no GGUF type maps to");
    if (ti.type == same) {
      view(t, files_.data(ti), size_t(ti.bytes));
      ++stats_.in_place;
      return;
    }
    uint8_t* dst = fresh(t);
    const int64_t cols = t.shape.back(), rows = int64_t(ti.elements()) / cols;
    const size_t width = dtype_size(t.dtype);
    each_group(ti, -1, rows, 64, [&](int64_t r0, int64_t n, const float* v) {
      int64_t inexact = 0;
      uint8_t* d = dst + size_t(r0 * cols) * width;
      for (int64_t k = 0; k < n * cols; ++k) {
        if (t.dtype == DType::F32) {
          std::memcpy(d + 4 * k, v + k, 4);
        } else {
          const uint16_t b = f32_to_bf16_bits(v[k]);
          std::memcpy(d + 2 * k, &b, 2);
          inexact += bf16_to_f32(b) != v[k];
        }
      }
      return inexact;
    });
    view(t, dst, size_t(rows * cols) * width);
    ++stats_.reencoded;
  }

  // FP8-role weights (32x32 blocks) and Engram tables (per row and 32 channels).
  void place_fp8(const ExpectedTensor& t, const ExpectedTensor& s, const gguf::TensorInfo& ti) {
    uint8_t* codes = fresh(t);
    uint8_t* scales = fresh(s);
    const int64_t o = t.shape[0], i = t.shape[1];
    const bool per_row = is_engram_table(t);
    // 32-row groups: whole rows of 32x32 blocks, whose scales are rows of the scale tensor
    each_group(ti, -1, o, 32, [&](int64_t r0, int64_t n, const float* v) {
      return per_row ? quantize_fp8_rows(v, n, i, codes + r0 * i, scales + r0 * (i / 32))
                     : quantize_fp8_blocks(v, n, i, codes + r0 * i, scales + r0 / 32 * s.shape[1]);
    });
    view(t, codes, size_t(o * i));
    view(s, scales, size_t(s.shape[0] * s.shape[1]));
    stats_.reencoded += 2;
  }

  // One routed expert's projection: MXFP4 blocks shuffled into the release's pairs (exact), any
  // other decodable type re-quantized.
  void place_fp4(const ExpectedTensor& t, const ExpectedTensor& s, const gguf::TensorInfo& ti,
                 int expert) {
    const int64_t o = t.shape[0], i = t.shape[1] * 2, nb = i / 32;
    uint8_t* packed = fresh(t);
    uint8_t* scales = fresh(s);
    if (ti.type == gguf::kMXFP4) {
      const uint8_t* base = files_.data(ti) + size_t(expert) * size_t(o * nb * 17);
      pool_.parallel_for(
          o * nb,
          [&](int64_t b0, int64_t b1) {
            for (int64_t b = b0; b < b1; ++b)
              gguf::mxfp4_block_to_pairs(base + b * 17, packed + b * 16, scales + b);
          },
          4096);
    } else {
      each_group(ti, expert, o, 32, [&](int64_t r0, int64_t n, const float* v) {
        return quantize_fp4(v, n, i, packed + r0 * (i / 2), scales + r0 * nb);
      });
    }
    view(t, packed, size_t(o * i / 2));
    view(s, scales, size_t(o * nb));
    stats_.reencoded += 2;
  }

  // ds4's native Engram rows stay in the file: the release's codes and scales are two strided
  // views of them (a release table is 189 GiB: never copied). A row holding a NaN code or scale
  // is refused when it is read (forward/engram.cpp), as ds4 refuses it at read time.
  void place_engram_rows(const ExpectedTensor& t, const ExpectedTensor& s,
                         const gguf::TensorInfo& ti) {
    const int64_t rows = t.shape[0], cols = t.shape[1], nb = cols / 32;
    const uint8_t* base = files_.data(ti);
    view(t, base, size_t(rows * cols)).row_stride = size_t(cols + nb);
    view(s, base + cols, size_t(rows * nb)).row_stride = size_t(cols + nb);
    stats_.in_place += 2;
  }

  ThreadPool& pool_;
  const gguf::Files& files_;
  const gguf::Dialect dialect_;
  const std::string& label_;
  std::function<uint8_t*(size_t)> allocate_;
  std::map<std::string, TensorView>& out_;
  std::map<std::string, Checkpoint::BlockWeight>* blocks_;
  Checkpoint::LoadStats& stats_;
};

// Spec §8.3 rule 10: every tensor of the file is one the model reads, or the optional vision
// routing bias; anything else means another layout or model (a V4 tensor, a compressor on a layer
// whose role the keys say otherwise), so the file is refused naming it -- before the tensors the
// model reads are looked for, so that a renamed tensor is reported as what the file has.
void refuse_unexpected(const gguf::Header& h, gguf::Dialect dialect,
                       const std::vector<ExpectedTensor>& expected, const std::string& label) {
  std::set<std::string> names;
  for (const ExpectedTensor& t : expected) {
    int expert = -1;
    names.insert(gguf::gguf_tensor_name(t.name, &expert, dialect));
  }
  for (const gguf::TensorInfo& ti : h.tensors)
    if (!names.contains(std::string(ti.name)) && !ti.name.ends_with(".exp_probs_b_vl.bias"))
      throw std::runtime_error(label + ": tensor '" + std::string(ti.name) +
                               "' is not one of the model's (an unexpected tensor means another "
                               "layout or model)");
}

// The most release tensors a file can provide: a GGUF tensor is one release tensor or a weight
// and its scales, a merged expert tensor (ne[2] experts) those of each of its experts. The
// tensors' bytes do not overlap inside the file, so the sum stays below the file's size.
size_t release_tensor_capacity(const gguf::Header& h) {
  uint64_t n = 0;
  for (const gguf::TensorInfo& t : h.tensors) n += 2 * (t.n_dims >= 3 ? t.ne[2] : 1);
  return size_t(n);
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open_gguf(const std::string& path, const OpenOptions& opt) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->path_ = path;
  ck->format_ = Format::kGguf;
  gguf::Files files = gguf::open_files(path);
  const gguf::Header& h = files.merged;
  ck->config_ = gguf::config_from_gguf(h, path);
  // The whole tokenizer.json when the file carries it (cedar's converter writes it), else the
  // tokenizer rebuilt from llama.cpp's keys.
  ck->tokenizer_json_ = gguf::has_key(h, "tokenizer.huggingface.json")
                            ? std::string(gguf::get_string(h, "tokenizer.huggingface.json", path))
                            : gguf::tokenizer_json_from_keys(h, path);
  if (gguf::has_key(h, "deepseek41.engram.token_map"))
    for (int64_t v : gguf::get_int_array(h, "deepseek41.engram.token_map", path))
      ck->engram_token_map_.push_back(int32_t(v));

  const std::vector<ExpectedTensor> expected = ck->inventory(release_tensor_capacity(h));
  std::map<std::string, const ExpectedTensor*> by_name;
  for (const ExpectedTensor& t : expected) by_name[t.name] = &t;
  const gguf::Dialect dialect = gguf::detect_dialect(h).dialect;
  refuse_unexpected(h, dialect, expected, path);
  ThreadPool pool;  // the re-encoding runs on every core
  Placer placer(
      files, dialect, path, [&ck](size_t n) { return ck->allocate(n); }, ck->tensors_,
      opt.blocks_in_place ? &ck->blocks_ : nullptr, ck->stats_, pool);
  for (const ExpectedTensor& t : expected) {
    if (t.name.ends_with(".scale")) continue;  // placed with its weight
    const ExpectedTensor* scale = nullptr;
    if (t.dtype == DType::F8_E4M3 || t.dtype == DType::I8) {
      auto it = by_name.find(t.name.substr(0, t.name.size() - 7) + ".scale");  // ".weight"
      if (!t.name.ends_with(".weight") || it == by_name.end())
        throw std::runtime_error(path + ": quantized tensor '" + t.name + "' without a scale");
      scale = it->second;
    }
    placer.place(t, scale);
  }
  ck->validate();
  for (auto& f : files.files) ck->files_.push_back(std::move(f));  // the views point into them
  return ck;
}

}  // namespace cedar
