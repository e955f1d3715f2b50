// The deepseek41 GGUF layouts (../shared/spec/v41-gguf.md §2-§6): which dialect a file is, the
// hyper-parameters of a dialect-A file as a ModelConfig, the keys cedar writes for a config, and
// the dialect-A name of every release tensor.
//
// cedar reads and writes dialect A (the llama.cpp converter's layout, which ik_llama.cpp reads too)
// with its later candidate-mask keys, spelled as mxxm-t spells them (`attention.candidate_*`: the
// strings of smalinin's files are not known, spec §9.1). The other dialects are detected and
// refused by name until their key maps exist.
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

// The dialect-A keys and tensors of a file as a validated ModelConfig (layer roles from tensor
// presence, spec §3.3.3, checked against the candidate keys). Throws naming `label` and the key
// or tensor for anything missing, ill-typed or inconsistent, and for every dialect cedar does not
// read (with the reason).
ModelConfig config_from_gguf(const Header& h, const std::string& label);

// The keys cedar writes for `cfg` (dialect A + candidate keys): general.*, the backbone's and the
// nine Engram keys. The tokenizer keys are written by the converter.
void write_config_keys(const ModelConfig& cfg, Writer& w);

// The dialect-A tensor of a release tensor name ("layers.3.attn.wq_a.weight" ->
// "blk.3.attn_q_a.weight"); block-scale tensors (".scale") and routed experts map to their merged
// tensor ("layers.3.ffn.experts.5.w1.weight" -> "blk.3.ffn_gate_exps.weight", expert 5). Empty for
// tensors outside the text model (DSpark stages mtp.*, the vision tower). `expert` gets the expert
// index (-1 otherwise).
std::string gguf_tensor_name(const std::string& release, int* expert = nullptr);

}  // namespace cedar::gguf
