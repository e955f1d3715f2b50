// The pre-tokenizer of the DeepSeek tokenizer.json: a Sequence of regex Splits (behaviour
// "Isolated": every match and every gap between matches becomes its own piece) followed by
// ByteLevel (use_regex=false: it only re-spells bytes, which the BPE model does for us).
// Patterns are Oniguruma patterns (Hugging Face `tokenizers` compiles them with onig); we run them
// with PCRE2 after translating the one construct whose meaning differs: `\s`/`\S`, which in
// Oniguruma is the Unicode White_Space property (PCRE2's set lacks U+0085). Lookahead, leftmost-
// first alternation and \p{..} classes have the same meaning in both engines.
// ref: tokenizers pre_tokenizers/split.rs, pre_tokenizers/sequence.rs
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cedar::text {

// Rewrites an Oniguruma pattern for PCRE2 (see above). Throws std::runtime_error on constructs
// whose meaning would differ between the engines (\w \d \h \b, nested classes, \S in a class).
std::string onig_to_pcre2(std::string_view pattern);

class RegexSplit;  // one compiled Split step

class PreTokenizer {
 public:
  // Builds from the tokenizer.json "pre_tokenizer" node. Throws std::runtime_error naming the
  // offending step for anything but Split(Regex, Isolated, invert=false) steps and a final
  // ByteLevel(add_prefix_space=false, use_regex=false).
  static PreTokenizer from_json(const nlohmann::json& node);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the pieces of `text` (views into it, in order, covering it exactly) to *pieces.
  // `text` must be well-formed UTF-8 (the caller validates once).
  void split(std::string_view text, std::vector<std::string_view>* pieces) const;

  std::size_t num_steps() const { return steps_.size(); }

 private:
  PreTokenizer() = default;
  std::vector<std::unique_ptr<RegexSplit>> steps_;
};

}  // namespace cedar::text
