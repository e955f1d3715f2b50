#include "model/gguf_convert.h"

#include <bit>
#include <cstring>
#include <regex>
#include <stdexcept>

#include "model/checkpoint.h"
#include "model/gguf.h"
#include "model/gguf_dialect.h"
#include "model/gguf_writer.h"
#include "numerics/fp8.h"

namespace cedar {

namespace {

// ggml order: the release's [out, in] (row-major) is ne = [in, out]
std::vector<uint64_t> ggml_shape(const std::vector<int64_t>& shape) {
  return std::vector<uint64_t>(shape.rbegin(), shape.rend());
}

// An FP8 weight [out, in] with its UE8M0 scales, either per 32x32 block ([ceil(out/32), in/32])
// or per row and 32 columns (the Engram table: [out, in/32]): value (r, c) as fp32 (exact).
struct Fp8Weight {
  const TensorView& w;
  const TensorView& s;
  bool per_row() const { return s.dim(0) == w.dim(0); }
  float at(int64_t r, int64_t c) const {
    const int64_t in = w.dim(1), sr = per_row() ? r : r / 32;
    return e4m3_to_f32(w.data[r * in + c]) * ue8m0_to_f32(s.data[sr * s.dim(1) + c / 32]);
  }
  // whether every value is a bf16 value (low 16 bits zero: <= 7 mantissa bits and in range)
  bool bf16_exact() const {
    for (int64_t r = 0; r < w.dim(0); ++r)
      for (int64_t c = 0; c < w.dim(1); ++c)
        if (std::bit_cast<uint32_t>(at(r, c)) & 0xffffu) return false;
    return true;
  }
  void fill(bool bf16, uint8_t* dst) const {
    for (int64_t r = 0, i = 0; r < w.dim(0); ++r)
      for (int64_t c = 0; c < w.dim(1); ++c, ++i) {
        const uint32_t b = std::bit_cast<uint32_t>(at(r, c));
        if (bf16) {
          const uint16_t h = uint16_t(b >> 16);
          std::memcpy(dst + 2 * i, &h, 2);
        } else {
          std::memcpy(dst + 4 * i, &b, 4);
        }
      }
  }
};

// One routed-expert projection of a layer: the release's FP4 rows (pairs per byte, UE8M0 per
// 32) repacked into ggml MXFP4 blocks, expert after expert.
void fill_mxfp4(const Checkpoint& ck, const std::string& prefix, const std::string& proj,
                int experts, uint8_t* dst) {
  for (int e = 0; e < experts; ++e) {
    const std::string base = prefix + std::to_string(e) + "." + proj;
    const TensorView& w = ck.get(base + ".weight");
    const TensorView& s = ck.get(base + ".scale");
    const int64_t out = w.dim(0), in = w.dim(1) * 2, nb = in / 32;
    for (int64_t r = 0; r < out; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* src = w.data + r * (in / 2) + b * 16;  // elements 32b .. 32b+31 in pairs
        uint8_t* blk = dst;
        dst += 17;
        blk[0] = s.data[r * nb + b];
        for (int j = 0; j < 16; ++j) {
          const uint8_t lo = j % 2 ? src[j / 2] >> 4 : src[j / 2] & 15;          // element j
          const uint8_t hi = j % 2 ? src[8 + j / 2] >> 4 : src[8 + j / 2] & 15;  // element j+16
          blk[1 + j] = uint8_t(lo | (hi << 4));
        }
      }
  }
}

}  // namespace

void write_gguf_bf16(const Checkpoint& ck, const GgufTokenizerKeys& tk, const std::string& path) {
  const ModelConfig& cfg = ck.config();
  gguf::Writer w;
  gguf::write_config_keys(cfg, w);
  w.add_string("general.file_type_name", "BF16 (cedar convert: lossless)");
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "deepseek-v3");
  w.add_string_array("tokenizer.ggml.tokens", tk.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", tk.types);
  w.add_string_array("tokenizer.ggml.merges", tk.merges);
  w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(cfg.bos_token_id));
  w.add_u32("tokenizer.ggml.eos_token_id", uint32_t(cfg.eos_token_id));
  w.add_u32("tokenizer.ggml.padding_token_id", uint32_t(cfg.pad_token_id));
  w.add_string("tokenizer.huggingface.json", tk.hf_json);
  if (!cfg.engram_layer_ids.empty()) {
    if (tk.engram_map.size() != size_t(cfg.vocab_size))
      throw std::runtime_error("convert: the Engram token map has " +
                               std::to_string(tk.engram_map.size()) +
                               " entries for a vocabulary of " + std::to_string(cfg.vocab_size));
    w.add_i32_array("deepseek41.engram.token_map", tk.engram_map);
    w.add_u32("deepseek41.engram.pad_id", uint32_t(tk.engram_map[size_t(cfg.engram_pad_token_id)]));
  }

  static const std::regex expert_re(R"((layers\.\d+\.ffn\.experts\.)(\d+)\.(w[123])\.weight)");
  for (const ExpectedTensor& t : expected_tensors(cfg)) {
    int expert = -1;
    const std::string name = gguf::gguf_tensor_name(t.name, &expert);
    if (name.empty() || t.name.ends_with(".scale")) continue;  // sidecars; scales go with weights
    std::smatch m;
    if (std::regex_match(t.name, m, expert_re)) {
      if (m[2].str() != "0") continue;  // the merged tensor is written with expert 0
      const std::string prefix = m[1].str(), proj = m[3].str();
      const TensorView& w0 = ck.get(t.name);
      const int experts = cfg.experts_of(0);
      const uint64_t in = uint64_t(w0.dim(1)) * 2, out = uint64_t(w0.dim(0));
      w.add_tensor(name, gguf::kMXFP4, {in, out, uint64_t(experts)},
                   [&ck, prefix, proj, experts](uint8_t* dst) {
                     fill_mxfp4(ck, prefix, proj, experts, dst);
                   });
      continue;
    }
    const TensorView& v = ck.get(t.name);
    const std::vector<uint64_t> ne = ggml_shape(v.shape);
    switch (v.dtype) {
      case DType::F8_E4M3: {
        const std::string scale = t.name.substr(0, t.name.size() - 7) + ".scale";  // ".weight"
        const Fp8Weight f{v, ck.get(scale)};
        const bool bf16 = f.bf16_exact();
        w.add_tensor(name, bf16 ? gguf::kBF16 : gguf::kF32, ne,
                     [f, bf16](uint8_t* dst) { f.fill(bf16, dst); });
        break;
      }
      case DType::BF16:
      case DType::F32:
        w.add_tensor(name, v.dtype == DType::BF16 ? gguf::kBF16 : gguf::kF32, ne,
                     [&v](uint8_t* dst) { std::memcpy(dst, v.data, v.nbytes); });
        break;
      default:
        throw std::runtime_error("convert: " + t.name + " is " + dtype_name(v.dtype) +
                                 ", which has no lossless GGUF form here");
    }
  }
  w.write(path);
}

}  // namespace cedar
