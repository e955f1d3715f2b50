#include "runtime/model_tokenizer.h"

#include <stdexcept>

#include "text/engram_token_map.h"

namespace cedar::runtime {

text::Tokenizer load_tokenizer(const Checkpoint& ck, const std::string& override_path) {
  const bool own = override_path.empty();
  const std::string origin =
      own ? (ck.format() == Checkpoint::Format::kGguf ? ck.path() + " (tokenizer.huggingface.json)"
                                                      : ck.path() + "/tokenizer.json")
          : override_path;
  text::Tokenizer tok = own ? text::Tokenizer::from_json_text(ck.tokenizer_json(), origin)
                            : text::Tokenizer::load(override_path);
  if (tok.vocab_size() > ck.config().vocab_size)
    throw std::runtime_error(origin + ": tokenizer has " + std::to_string(tok.vocab_size()) +
                             " ids but the model's vocab_size is " +
                             std::to_string(ck.config().vocab_size));
  return tok;
}

std::vector<int32_t> engram_token_map(const Checkpoint& ck, const text::Tokenizer& tok) {
  if (ck.config().engram_layer_ids.empty()) return {};
  std::vector<int32_t> map = text::build_engram_token_map(tok).map;
  const std::vector<int32_t>& stored = ck.engram_token_map();
  if (!stored.empty() && stored != map) {
    size_t at = 0;
    while (at < stored.size() && at < map.size() && stored[at] == map[at]) ++at;
    throw std::runtime_error(ck.path() +
                             ": deepseek41.engram.token_map differs from the map of the "
                             "file's tokenizer (first at token " +
                             std::to_string(at) + ")");
  }
  return map;
}

}  // namespace cedar::runtime
