// cedar convert --from DIR --to FILE.gguf [--type bf16]: a release-layout model directory written
// as a dialect-A GGUF (model/gguf_convert.h; ../shared/spec/v41-gguf.md §3), with the tokenizer
// keys from DIR/tokenizer.json and the Engram token map cedar builds from it. `bf16` is lossless.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "app/commands.h"
#include "app/read_file.h"
#include "base/args.h"
#include "base/json_limits.h"
#include "model/checkpoint.h"
#include "model/gguf_convert.h"
#include "text/engram_token_map.h"
#include "text/tokenizer.h"

namespace cedar::app {

namespace {

// tokens (id -> string), token types and merges from a tokenizer.json
GgufTokenizerKeys tokenizer_keys(const std::string& path, int64_t vocab) {
  GgufTokenizerKeys k;
  k.hf_json = read_file(path, "tokenizer");
  std::string error;
  const nlohmann::ordered_json j = parse_untrusted_json(k.hf_json, &error);
  if (!error.empty()) throw std::runtime_error(path + ": " + error);
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
      throw std::runtime_error(path + ": token id " + std::to_string(i) + " has no string");
  return k;
}

}  // namespace

int cmd_convert(int argc, char** argv) {
  Args args("convert",
            {{"from", "f", true, "model directory in the release layout"},
             {"to", "o", true, "GGUF file to write"},
             {"type", "", true, "storage of the weights: bf16 (lossless; the default)"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  const std::string from = args.require("from"), to = args.require("to");
  const std::string type = args.get("type", "bf16");
  if (type != "bf16")
    throw std::runtime_error("--type " + type + ": only bf16 (lossless) is written so far");
  const auto ck = Checkpoint::open(from);
  const std::string tok_path = from + "/tokenizer.json";
  GgufTokenizerKeys keys = tokenizer_keys(tok_path, ck->config().vocab_size);
  if (!ck->config().engram_layer_ids.empty())
    keys.engram_map =
        text::build_engram_token_map(text::Tokenizer::from_json_text(keys.hf_json, tok_path)).map;
  write_gguf_bf16(*ck, keys, to);
  std::printf("wrote %s (dialect A, %s) from %s\n", to.c_str(), type.c_str(), from.c_str());
  return 0;
}

}  // namespace cedar::app
