// A release-layout checkpoint written as a dialect-A GGUF (`cedar convert`): every text-model
// tensor under its dialect-A name (model/gguf_dialect), the config as dialect-A keys, and the
// tokenizer keys the caller supplies. `bf16` stores everything losslessly:
//  * FP8 weights (E4M3 + 32x32 UE8M0 scales) and the Engram table (E4M3 rows + per-32 UE8M0) as
//    BF16 of their dequantised values -- exact, an E4M3 value times a power of two has at most 4
//    significant bits (F32 for a tensor whose scales push a value below bf16's range);
//  * the routed FP4 experts as one merged MXFP4 tensor per layer and projection [in, out,
//    experts]: ggml's block is the UE8M0 scale byte then element j in the low nibble and j + 16
//    in the high nibble of byte j, the same codes and values as the release's pairs;
//  * BF16 and F32 tensors as they are.
// `q8_0` writes what the llama.cpp converter's staging file holds: FP8 weights and the Engram table
// as Q8_0 (lossy: int8 per 32 inputs with an fp16 scale), the rest as above. `q4_k` and `q2_k`
// write K-quant rungs (lossy, cedar's quantizers: gguf_encode.h): FP8 weights, the Engram table
// and the routed experts as Q4_K, or as Q2_K with the experts' down projections as Q3_K (the
// published Q2_K rung's expert and Engram types); rows that are not whole 256-value blocks as
// llama-quantize falls back (Q5_0, Q4_0). BF16/F32 tensors stay as stored in every type.
// The DSpark stages and the vision tower are not part of a text GGUF (they are sidecars) and are
// left out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/gguf_dialect.h"

namespace cedar {

class Checkpoint;

struct GgufTokenizerKeys {
  std::vector<std::string> tokens;  // id -> token string (the vocabulary's ByteLevel spelling)
  std::vector<int32_t> types;       // 1 normal, 3 control (added special tokens), 4 user defined
  std::vector<std::string> merges;  // "a b", rank order
  std::string hf_json;  // tokenizer.huggingface.json: the whole tokenizer.json ("": none)
  std::vector<int32_t> engram_map;  // token id -> compressed id (empty: the model has no Engram)
};

// The keys of a tokenizer.json text for a vocabulary of `vocab` ids (every id must have a string).
// Throws naming `label`.
GgufTokenizerKeys tokenizer_keys(const std::string& json_text, int64_t vocab,
                                 const std::string& label);

// kBF16: lossless (FP8 weights and the Engram table as the BF16 of their exact values);
// kQ8_0: as the llama.cpp converter's staging file (those tensors as Q8_0, lossy); kQ4_K, kQ2_K:
// the K-quant rungs above
// kIQ2_XXS: ds4's Q2 recipe (the experts' gate/up IQ2_XXS, down Q2_K, the FP8 roles Q8_0)
enum class GgufWriteType { kBF16, kQ8_0, kQ4_K, kQ3_K_M, kQ2_K, kIQ2_XXS, kIQ1_S };
// "bf16" / "q8_0" / "q4_k" / "q3_k_m" / "q2_k" / "iq2_xxs" / "iq1_s"; throws naming the value
// otherwise
GgufWriteType parse_gguf_write_type(const std::string& name);
// general.file_type_name of a file written with the type
const char* gguf_write_type_description(GgufWriteType type);

struct GgufWriteOptions {
  GgufWriteType type = GgufWriteType::kBF16;
  // kA: the llama.cpp converter's layout; kB: ds4's (its keys with the whole config as JSON, its
  // Engram projection names, the Engram tables as native rows of their source bytes at the end,
  // 16 KiB alignment, llama.cpp's tokenizer keys only)
  gguf::Dialect dialect = gguf::Dialect::kA;
  size_t split_max_tensors = 0;  // > 0: shards of at most that many tensors (Writer::write_split)
  // after each tensor: data bytes written, of the total (the re-encoding is most of the time)
  std::function<void(uint64_t done, uint64_t total)> progress;
};
// Writes `ck` to `path` (via path.tmp) in opt.dialect: the config and tokenizer keys, the text
// model's tensors (routed experts merged as MXFP4, BF16/F32 tensors as stored). Throws naming the
// tensor for anything it cannot store. Returns the paths written.
std::vector<std::string> write_gguf(const Checkpoint& ck, const GgufTokenizerKeys& tk,
                                    const std::string& path, const GgufWriteOptions& opt = {});

}  // namespace cedar
