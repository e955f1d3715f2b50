#include "model/gguf_convert.h"

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>

#include "base/json_limits.h"
#include "model/checkpoint.h"
#include "model/gguf.h"
#include "model/gguf_decode.h"
#include "model/gguf_dialect.h"
#include "model/gguf_encode.h"
#include "model/gguf_writer.h"
#include "numerics/bf16.h"
#include "numerics/fp4.h"
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
    // (rows, not data + r * in: a ds4 file's Engram table is two strided views of its rows)
    return e4m3_to_f32(w.row(r)[c]) * ue8m0_to_f32(s.row(per_row() ? r : r / 32)[c / 32]);
  }
  // whether every value is a bf16 value (low 16 bits zero: <= 7 mantissa bits and in range)
  bool bf16_exact() const {
    for (int64_t r = 0; r < w.dim(0); ++r)
      for (int64_t c = 0; c < w.dim(1); ++c)
        if (std::bit_cast<uint32_t>(at(r, c)) & 0xffffu) return false;
    return true;
  }
  // row r's values (in floats)
  void row(int64_t r, float* dst) const {
    for (int64_t c = 0; c < w.dim(1); ++c) dst[c] = at(r, c);
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
    const int64_t out = w.dim(0), nb = w.dim(1) * 2 / 32;
    for (int64_t b = 0; b < out * nb; ++b, dst += 17)  // row-major blocks on both sides
      gguf::mxfp4_block_from_pairs(w.data + b * 16, s.data[b], dst);
  }
}

// The same projection's values (E2M1 code x its UE8M0 scale, exact) encoded row by row as
// `type`, expert after expert.
void fill_encoded_experts(const Checkpoint& ck, const std::string& prefix, const std::string& proj,
                          int experts, uint32_t type, uint8_t* dst) {
  for (int e = 0; e < experts; ++e) {
    const std::string base = prefix + std::to_string(e) + "." + proj;
    const TensorView& w = ck.get(base + ".weight");
    const TensorView& s = ck.get(base + ".scale");
    const int64_t out = w.dim(0), in = w.dim(1) * 2;
    std::vector<float> x(static_cast<size_t>(in));
    const size_t row = size_t(gguf::row_bytes(type, in));
    for (int64_t r = 0; r < out; ++r, dst += row) {
      for (int64_t c = 0; c < in; ++c) {
        const uint8_t byte = w.data[(r * in + c) / 2];
        x[size_t(c)] = e2m1_to_f32(c % 2 ? fp4_hi(byte) : fp4_lo(byte)) *
                       ue8m0_to_f32(s.data[r * (in / 32) + c / 32]);
      }
      gguf::encode_row(type, x.data(), in, dst);
    }
  }
}

// What a tensor is for the type rules of the lossy write types: an FP8-role weight (the Engram
// table included), a routed expert's gate/up or down projection (of layer `layer`), or the head.
enum class Role { kFp8, kGateUp, kDown, kHead };

// The GGUF type of a tensor of row width `in` for a write type; 0 (the id of F32, never a lossy
// choice) when the tensor keeps its lossless form. K-quants and IQ types need rows of whole
// 256-value blocks: narrower or ragged rows take what llama-quantize falls back to (Q4_K and Q5_K
// -> Q5_0, Q6_K -> Q8_0; the 2- and 3-bit types -> Q4_0, where current llama.cpp writes IQ4_NL,
// which cedar does not decode).
uint32_t lossy_type(GgufWriteType type, Role role, int64_t in, int layer = 0) {
  uint32_t t = 0;
  switch (type) {
    case GgufWriteType::kBF16:
      return 0;
    case GgufWriteType::kQ8_0:
      t = role == Role::kFp8 ? gguf::kQ8_0 : role == Role::kHead ? 0 : gguf::kMXFP4;
      break;
    case GgufWriteType::kQ4_K:
      t = role == Role::kHead ? 0 : gguf::kQ4_K;
      break;
    case GgufWriteType::kQ3_K_M:  // the spec's inferred recipe of the published Q3_K_M rung
      t = role == Role::kHead   ? gguf::kQ6_K
          : role != Role::kDown ? gguf::kQ3_K
          : layer < 2           ? gguf::kQ5_K
                                : gguf::kQ4_K;
      break;
    case GgufWriteType::kQ2_K:
      t = role == Role::kHead ? 0 : role == Role::kDown ? gguf::kQ3_K : gguf::kQ2_K;
      break;
    case GgufWriteType::kIQ2_XXS:  // ds4's Q2 recipe
      t = role == Role::kFp8    ? gguf::kQ8_0
          : role == Role::kHead ? 0
          : role == Role::kDown ? gguf::kQ2_K
                                : gguf::kIQ2_XXS;
      break;
    case GgufWriteType::kIQ1_S:  // the IQ1_S-expert files: the rest as ds4's Q2 recipe
      t = role == Role::kFp8    ? gguf::kQ8_0
          : role == Role::kHead ? 0
          : role == Role::kDown ? gguf::kIQ1_M
                                : gguf::kIQ1_S;
      break;
  }
  if (t != 0 && gguf::type_info(t)->block_elems == 256 && in % 256 != 0)
    t = t == gguf::kQ4_K || t == gguf::kQ5_K ? gguf::kQ5_0
        : t == gguf::kQ6_K                   ? gguf::kQ8_0
                                             : gguf::kQ4_0;
  return in % 32 == 0 ? t : 0;
}

}  // namespace

// tokens (id -> string), token types and merges from a tokenizer.json
GgufTokenizerKeys tokenizer_keys(const std::string& json_text, int64_t vocab,
                                 const std::string& label) {
  GgufTokenizerKeys k;
  k.hf_json = json_text;
  // the vocabulary is one object of ~129,000 keys: a std::map-backed json (an ordered_json would
  // insert them in quadratic time), after the depth check
  if (json_nesting_depth(k.hf_json) > kMaxJsonDepth)
    throw std::runtime_error(label + ": tokenizer.json: nested deeper than " +
                             std::to_string(kMaxJsonDepth) + " levels");
  const nlohmann::json j = nlohmann::json::parse(k.hf_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw std::runtime_error(label + ": tokenizer.json: invalid JSON");
  k.tokens.assign(size_t(vocab), "");
  k.types.assign(size_t(vocab), 1);
  for (const auto& [tok, id] : j.at("model").at("vocab").items()) {
    const int64_t i = id.get<int64_t>();
    if (i >= 0 && i < vocab) k.tokens[size_t(i)] = tok;
  }
  for (const auto& a : j.at("added_tokens")) {
    const int64_t i = a.at("id").get<int64_t>();
    if (i < 0 || i >= vocab) continue;
    k.tokens[size_t(i)] = a.at("content").get<std::string>();
    k.types[size_t(i)] = a.value("special", false) ? 3 : 4;  // control / user defined
  }
  for (const auto& m : j.at("model").at("merges"))
    k.merges.push_back(m.is_string()
                           ? m.get<std::string>()
                           : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  for (size_t i = 0; i < k.tokens.size(); ++i)
    if (k.tokens[i].empty())
      throw std::runtime_error(label + ": tokenizer.json: token id " + std::to_string(i) +
                               " has no string");
  return k;
}

GgufWriteType parse_gguf_write_type(const std::string& name) {
  if (name == "bf16") return GgufWriteType::kBF16;
  if (name == "q8_0") return GgufWriteType::kQ8_0;
  if (name == "q4_k") return GgufWriteType::kQ4_K;
  if (name == "q3_k_m") return GgufWriteType::kQ3_K_M;
  if (name == "q2_k") return GgufWriteType::kQ2_K;
  if (name == "iq2_xxs") return GgufWriteType::kIQ2_XXS;
  if (name == "iq1_s") return GgufWriteType::kIQ1_S;
  throw std::runtime_error("--type " + name +
                           ": bf16 (lossless), q8_0, q4_k, q3_k_m, q2_k, iq2_xxs or iq1_s");
}

const char* gguf_write_type_description(GgufWriteType type) {
  switch (type) {
    case GgufWriteType::kBF16:
      return "BF16 (cedar convert: lossless)";
    case GgufWriteType::kQ8_0:
      return "Q8_0 (cedar convert: FP8 weights and the Engram table as Q8_0, experts MXFP4)";
    case GgufWriteType::kQ4_K:
      return "Q4_K (cedar convert: FP8 weights, the Engram table and the experts as Q4_K; rows "
             "not of whole 256-value blocks as Q5_0)";
    case GgufWriteType::kQ3_K_M:
      return "Q3_K_M (cedar convert: FP8 weights, the Engram table and the experts' gate/up as "
             "Q3_K, their down as Q5_K in layers 0-1 and Q4_K after, the head as Q6_K; rows not "
             "of whole 256-value blocks as Q4_0 / Q5_0 / Q8_0)";
    case GgufWriteType::kQ2_K:
      return "Q2_K (cedar convert: FP8 weights, the Engram table and the experts' gate/up as "
             "Q2_K, their down as Q3_K; rows not of whole 256-value blocks as Q4_0)";
    case GgufWriteType::kIQ2_XXS:
      return "IQ2_XXS (cedar convert, ds4's Q2 recipe: the experts' gate/up as IQ2_XXS, their "
             "down as Q2_K, FP8 weights and the Engram table as Q8_0; rows not of whole "
             "256-value blocks as Q4_0)";
    case GgufWriteType::kIQ1_S:
      return "IQ1_S (cedar convert: the experts' gate/up as IQ1_S, their down as IQ1_M, FP8 "
             "weights and the Engram table as Q8_0; rows not of whole 256-value blocks as Q4_0)";
  }
  return "";
}

namespace {

// The tokenizer keys every dialect writes (llama.cpp's), then the dialect's own.
void write_tokenizer_keys(const ModelConfig& cfg, const GgufTokenizerKeys& tk, gguf::Dialect d,
                          gguf::Writer& w) {
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "joyai-llm");  // what published V4.1 files carry
  w.add_string_array("tokenizer.ggml.tokens", tk.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", tk.types);
  w.add_string_array("tokenizer.ggml.merges", tk.merges);
  w.add_u32("tokenizer.ggml.bos_token_id", uint32_t(cfg.bos_token_id));
  w.add_u32("tokenizer.ggml.eos_token_id", uint32_t(cfg.eos_token_id));
  if (d == gguf::Dialect::kB) {  // ds4's, without a padding id or the whole tokenizer.json
    w.add_bool("tokenizer.ggml.add_bos_token", true);
    w.add_bool("tokenizer.ggml.add_eos_token", false);
    return;
  }
  w.add_u32("tokenizer.ggml.padding_token_id", uint32_t(cfg.pad_token_id));
  if (!tk.hf_json.empty()) w.add_string("tokenizer.huggingface.json", tk.hf_json);
}

// The keys of the dialect in its order: the config, the tokenizer's, the Engram token map.
void write_model_keys(const ModelConfig& cfg, const GgufTokenizerKeys& tk,
                      const GgufWriteOptions& opt, gguf::Writer& w) {
  if (!cfg.engram_layer_ids.empty() && tk.engram_map.size() != size_t(cfg.vocab_size))
    throw std::runtime_error("convert: the Engram token map has " +
                             std::to_string(tk.engram_map.size()) +
                             " entries for a vocabulary of " + std::to_string(cfg.vocab_size));
  if (opt.dialect == gguf::Dialect::kB) {
    gguf::write_ds4_keys(cfg, tk.engram_map, w);
    w.add_string("deepseek41.quantization", gguf_write_type_description(opt.type));
    w.add_string("deepseek41.calibration", "none (cedar convert)");
    write_tokenizer_keys(cfg, tk, opt.dialect, w);
    return;
  }
  gguf::write_config_keys(cfg, w);
  w.add_string("general.file_type_name", gguf_write_type_description(opt.type));
  write_tokenizer_keys(cfg, tk, opt.dialect, w);
  if (!cfg.engram_layer_ids.empty()) {  // after the tokenizer: the map is built from it
    w.add_i32_array("deepseek41.engram.token_map", tk.engram_map);
    w.add_u32("deepseek41.engram.pad_id", uint32_t(tk.engram_map[size_t(cfg.engram_pad_token_id)]));
  }
}

// ds4's native Engram rows of a release table: each row's E4M3 codes, then its UE8M0 scales
// (the source bytes, spec §4.3).
void fill_engram_rows(const TensorView& codes, const TensorView& scales, uint8_t* dst) {
  const int64_t cols = codes.dim(1), nb = scales.dim(1);
  for (int64_t r = 0; r < codes.dim(0); ++r, dst += cols + nb) {
    std::memcpy(dst, codes.row(r), size_t(cols));
    std::memcpy(dst + cols, scales.row(r), size_t(nb));
  }
}

// A 2-D BF16 or F32 tensor's rows encoded as `type`.
void encode_rows(const TensorView& v, uint32_t type, uint8_t* dst) {
  const int64_t in = v.dim(1);
  const size_t row = size_t(gguf::row_bytes(type, in));
  std::vector<float> x(static_cast<size_t>(in));
  for (int64_t r = 0; r < v.dim(0); ++r) {
    const uint8_t* p = v.row(r);
    for (int64_t c = 0; c < in; ++c)
      if (v.dtype == DType::BF16)
        x[size_t(c)] = bf16_to_f32(uint16_t(p[2 * c] | p[2 * c + 1] << 8));
      else
        std::memcpy(&x[size_t(c)], p + 4 * c, 4);
    gguf::encode_row(type, x.data(), in, dst + size_t(r) * row);
  }
}

}  // namespace

std::vector<std::string> write_gguf(const Checkpoint& ck, const GgufTokenizerKeys& tk,
                                    const std::string& path, const GgufWriteOptions& opt) {
  const ModelConfig& cfg = ck.config();
  const bool ds4 = opt.dialect == gguf::Dialect::kB;
  if (!ds4 && opt.dialect != gguf::Dialect::kA)
    throw std::invalid_argument("convert: cedar writes dialects A and B");
  gguf::Writer w(ds4 ? 16384 : 32);  // ds4 aligns every tensor to 16 KiB
  write_model_keys(cfg, tk, opt, w);
  std::vector<std::string> engram_tables;  // ds4 writes them last

  static const std::regex expert_re(R"((layers\.(\d+)\.ffn\.experts\.)(\d+)\.(w[123])\.weight)");
  for (const ExpectedTensor& t : expected_tensors(cfg)) {
    int expert = -1;
    const std::string name = gguf::gguf_tensor_name(t.name, &expert, opt.dialect);
    if (name.empty() || t.name.ends_with(".scale")) continue;  // sidecars; scales go with weights
    if (ds4 && t.name.ends_with(".engram.embed.weight")) {
      engram_tables.push_back(t.name);
      continue;
    }
    std::smatch m;
    if (std::regex_match(t.name, m, expert_re)) {
      if (m[3].str() != "0") continue;  // the merged tensor is written with expert 0
      const std::string prefix = m[1].str(), proj = m[4].str();
      const TensorView& w0 = ck.get(t.name);
      const int experts = cfg.experts_of(0);
      const uint64_t in = uint64_t(w0.dim(1)) * 2, out = uint64_t(w0.dim(0));
      uint32_t type = lossy_type(opt.type, proj == "w2" ? Role::kDown : Role::kGateUp, int64_t(in),
                                 std::stoi(m[2].str()));
      if (type == 0) type = gguf::kMXFP4;  // the release's own codes (a row is whole 32-blocks)
      w.add_tensor(name, type, {in, out, uint64_t(experts)},
                   [&ck, prefix, proj, experts, type](uint8_t* dst) {
                     if (type == gguf::kMXFP4) return fill_mxfp4(ck, prefix, proj, experts, dst);
                     fill_encoded_experts(ck, prefix, proj, experts, type, dst);
                   });
      continue;
    }
    const TensorView& v = ck.get(t.name);
    const std::vector<uint64_t> ne = ggml_shape(v.shape);
    switch (v.dtype) {
      case DType::F8_E4M3: {
        const std::string scale = t.name.substr(0, t.name.size() - 7) + ".scale";  // ".weight"
        const Fp8Weight f{v, ck.get(scale)};
        // the staging file's rule: FP8 sources become Q8_0 (and K-quants in the lower rungs)
        const uint32_t type = lossy_type(opt.type, Role::kFp8, v.dim(1));
        if (type != 0) {
          w.add_tensor(name, type, ne, [f, type](uint8_t* dst) {
            const int64_t in = f.w.dim(1);
            const size_t row = size_t(gguf::row_bytes(type, in));
            std::vector<float> x(static_cast<size_t>(in));
            for (int64_t r = 0; r < f.w.dim(0); ++r) {
              f.row(r, x.data());
              gguf::encode_row(type, x.data(), in, dst + size_t(r) * row);
            }
          });
          break;
        }
        const bool bf16 = f.bf16_exact();
        w.add_tensor(name, bf16 ? gguf::kBF16 : gguf::kF32, ne,
                     [f, bf16](uint8_t* dst) { f.fill(bf16, dst); });
        break;
      }
      case DType::BF16:
      case DType::F32: {
        const uint32_t type =
            t.name == "head.weight" ? lossy_type(opt.type, Role::kHead, v.dim(1)) : 0;
        if (type != 0) {
          w.add_tensor(name, type, ne, [&v, type](uint8_t* dst) { encode_rows(v, type, dst); });
          break;
        }
        w.add_tensor(name, v.dtype == DType::BF16 ? gguf::kBF16 : gguf::kF32, ne,
                     [&v](uint8_t* dst) { std::memcpy(dst, v.data, v.nbytes); });
        break;
      }
      default:
        throw std::runtime_error("convert: " + t.name + " is " + dtype_name(v.dtype) +
                                 ", which has no lossless GGUF form here");
    }
  }
  for (const std::string& t : engram_tables) {
    const TensorView& codes = ck.get(t);
    const TensorView& scales = ck.get(t.substr(0, t.size() - 7) + ".scale");
    const uint64_t row = uint64_t(codes.dim(1) + scales.dim(1));
    w.add_tensor(gguf::gguf_tensor_name(t, nullptr, opt.dialect), gguf::kI8,
                 {row, uint64_t(codes.dim(0))},
                 [&codes, &scales](uint8_t* dst) { fill_engram_rows(codes, scales, dst); });
  }
  w.on_progress(opt.progress);
  if (opt.split_max_tensors == 0) {
    w.write(path);
    return {path};
  }
  return w.write_split(path, opt.split_max_tensors);
}

}  // namespace cedar
