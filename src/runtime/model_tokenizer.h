// The tokenizer and Engram token map of a checkpoint, whatever its source: a directory's
// tokenizer.json or a GGUF file's tokenizer keys (model/checkpoint.h), or an explicit file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "text/tokenizer.h"

namespace cedar::runtime {

// `override_path` (a tokenizer.json) when not empty, else the checkpoint's own; refused when it
// has more ids than the config's vocabulary.
text::Tokenizer load_tokenizer(const Checkpoint& ck, const std::string& override_path = {});

// The token -> Engram id map of the checkpoint's Engram layers (empty without them), derived from
// the tokenizer (v41-extras §1.3). A GGUF file that stores its own map must store this one: a map
// that differs would hash other n-grams than the file's author trained with, so it is refused.
std::vector<int32_t> engram_token_map(const Checkpoint& ck, const text::Tokenizer& tok);

}  // namespace cedar::runtime
