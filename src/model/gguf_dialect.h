// The deepseek41 GGUF layouts (../shared/spec/v41-gguf.md §2-§6): which dialect a file is, the
// hyper-parameters of a dialect-A file as a ModelConfig, the keys cedar writes for a config, and
// the dialect-A name of every release tensor.
//
// cedar reads and writes dialect A (the llama.cpp converter's layout, which ik_llama.cpp reads too)
// with its later candidate-mask keys, spelled as mxxm-t spells them (`attention.candidate_*`: the
// strings of smalinin's files are not known, spec §9.1), and dialect B (ds4's files, §4:
// gguf_dialect_ds4.cpp). The other dialects are detected and refused by name until their key maps
// exist.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "model/gguf.h"

namespace cedar::gguf {

class Writer;

enum class Dialect {
  kA,                // llama.cpp converter / ik_llama.cpp, all nine Engram keys
  kAIncomplete,      // dialect A from before 2026-09-11: Engram constants missing
  kB,                // ds4
  kC,                // tarruda
  kD,                // mxxm-t
  kMislabelledV4_1,  // a V4.1 file labelled deepseek4 (converted before 2026-09-10)
  kV4,               // DeepSeek-V4, not V4.1
  kUnknown,
};
struct DialectInfo {
  Dialect dialect = Dialect::kUnknown;
  std::string name;    // e.g. "A (llama.cpp converter)"
  std::string detail;  // what decided it / what is missing
};
// spec §6 in order.
DialectInfo detect_dialect(const Header& h);

// The keys and tensors of a dialect-A or dialect-B file as a validated ModelConfig. Throws naming
// `label` and the key or tensor for anything missing, ill-typed or inconsistent, and for every
// dialect cedar does not read (with the reason).
//  * A: from the keys, layer roles from tensor presence (spec §3.3.3) checked against the
//    candidate keys, the Engram constants checked against cedar's derivation;
//  * B: from `deepseek41.config` (the whole HF config.json, authoritative), every scalar key the
//    file has checked against it, the Engram keys (encoding, rows, primes, multipliers, token
//    map, pad id) against cedar's derivation.
ModelConfig config_from_gguf(const Header& h, const std::string& label);
ModelConfig config_from_ds4(const Header& h, const std::string& label);  // B only

// ds4's Engram row encoding, the only one cedar reads: a row's E4M3 codes, then one UE8M0 scale
// per 32 columns (264 bytes at the release's head_dim 256).
inline constexpr const char* kDs4EngramEncoding = "e4m3_e8m0_32_row264";

// The keys cedar writes for `cfg` (dialect A + candidate keys): general.*, the backbone's and the
// nine Engram keys. The tokenizer keys are written by the converter.
void write_config_keys(const ModelConfig& cfg, Writer& w);
// The keys ds4 writes (dialect B), with the Engram token map (empty without Engram) and its pad
// id, in ds4's order and types; the tokenizer keys are the converter's.
void write_ds4_keys(const ModelConfig& cfg, const std::vector<int32_t>& engram_map, Writer& w);

// A config's Engram constants as the GGUF dialects store them, flattened layer by layer: the
// bucket primes [layer][order][head], their offsets (running sums within a layer), the hash
// multipliers [layer][lookback] and each table's rows -- cedar's own derivation (EngramLayout),
// which a file's keys are checked against (spec §8.4).
struct EngramKeys {
  std::vector<uint64_t> primes, offsets, multipliers, rows;
};
EngramKeys engram_keys(const ModelConfig& cfg);

// The dialect-A tensor of a release tensor name ("layers.3.attn.wq_a.weight" ->
// "blk.3.attn_q_a.weight"); block-scale tensors (".scale") and routed experts map to their merged
// tensor ("layers.3.ffn.experts.5.w1.weight" -> "blk.3.ffn_gate_exps.weight", expert 5). Empty for
// tensors outside the text model (DSpark stages mtp.*, the vision tower). `expert` gets the expert
// index (-1 otherwise). Dialect B names the Engram projections differently (spec §4.2).
std::string gguf_tensor_name(const std::string& release, int* expert = nullptr,
                             Dialect dialect = Dialect::kA);

}  // namespace cedar::gguf
