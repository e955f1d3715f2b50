#include "model/gguf_tokenizer.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace cedar::gguf {

namespace {

// The DeepSeek-V3 pre-tokenizer as the release's tokenizer.json writes it (digits in runs of up to
// three, CJK runs, then the word/punctuation/space pattern), ByteLevel without its own regex.
nlohmann::json deepseek3_pre_tokenizer() {
  auto split = [](const char* re) {
    return nlohmann::json{{"type", "Split"},
                          {"pattern", {{"Regex", re}}},
                          {"behavior", "Isolated"},
                          {"invert", false}};
  };
  return {{"type", "Sequence"},
          {"pretokenizers",
           {split("\\p{N}{1,3}"),
            split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
            split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
                  "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", true},
             {"use_regex", false}}}}};
}

}  // namespace

std::string tokenizer_json_from_keys(const Header& h, const std::string& label) {
  const std::string_view model = get_string(h, "tokenizer.ggml.model", label);
  if (model != "gpt2")
    throw std::runtime_error(label + ": tokenizer.ggml.model is '" + std::string(model) +
                             "'; cedar reads byte-level BPE ('gpt2') tokenizers");
  const std::string_view pre = get_string(h, "tokenizer.ggml.pre", label);
  if (pre != "joyai-llm" && pre != "deepseek-v3")
    throw std::runtime_error(label + ": tokenizer.ggml.pre is '" + std::string(pre) +
                             "'; DeepSeek-V4.1 files use 'joyai-llm' (or 'deepseek-v3')");
  const auto& tokens = get_string_array(h, "tokenizer.ggml.tokens", label);
  const std::vector<int64_t> types = get_int_array(h, "tokenizer.ggml.token_type", label);
  const auto& merges = get_string_array(h, "tokenizer.ggml.merges", label);
  if (types.size() != tokens.size())
    throw std::runtime_error(label + ": tokenizer.ggml.token_type has " +
                             std::to_string(types.size()) + " entries for " +
                             std::to_string(tokens.size()) + " tokens");

  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string tok(tokens[id]);
    if (types[id] == 3 || types[id] == 4) {
      added.push_back({{"id", id},
                       {"content", tok},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", types[id] == 3}});
    } else if (types[id] == 1 || types[id] == 6) {
      if (vocab.contains(tok))
        throw std::runtime_error(label + ": tokenizer.ggml.tokens holds '" + tok + "' twice");
      vocab[tok] = id;
    } else {
      throw std::runtime_error(label + ": tokenizer.ggml.token_type of token " +
                               std::to_string(id) + " is " + std::to_string(types[id]) +
                               " (cedar reads 1 normal, 3 control, 4 user defined, 6 byte)");
    }
  }
  nlohmann::json merge_list = nlohmann::json::array();
  for (std::string_view m : merges) merge_list.push_back(std::string(m));
  const nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", std::move(added)},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}}},
      {"pre_tokenizer", deepseek3_pre_tokenizer()},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", std::move(vocab)},
        {"merges", std::move(merge_list)}}}};
  return j.dump();
}

}  // namespace cedar::gguf
