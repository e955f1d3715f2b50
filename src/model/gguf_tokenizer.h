// The tokenizer of a GGUF file that carries only llama.cpp's tokenizer keys (spec v41-gguf.md
// §3.2: tokenizer.ggml.model "gpt2", .pre "joyai-llm" or "deepseek-v3", .tokens, .token_type,
// .merges), rebuilt as the Hugging Face tokenizer.json text that text::Tokenizer reads: the
// byte-level BPE vocabulary and merges, token types 3 (control) and 4 (user defined) as added
// tokens (special / not special), and the DeepSeek-V3 pre-tokenizer that llama.cpp maps both
// pre-tokenizer names to (the release tokenizer.json's three Split regexes + ByteLevel).
#pragma once

#include <string>

#include "model/gguf.h"

namespace cedar::gguf {

// Throws naming `label` and the key for a missing or unsupported key, or arrays that disagree.
std::string tokenizer_json_from_keys(const Header& h, const std::string& label);

}  // namespace cedar::gguf
