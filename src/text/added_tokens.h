// Added tokens (tokenizer.json "added_tokens"): control strings such as <｜User｜> that map to one
// id each. When recognition is on, the text is cut at their occurrences before pre-tokenization,
// leftmost-longest like the Hugging Face AddedVocabulary: first the non-normalized tokens are
// found in the raw text, then the normalized ones in the remaining gaps (the normalizer of the
// DeepSeek tokenizer is the identity, so this only fixes the priority between the two groups).
// ref: tokenizers tokenizer/added_vocabulary.rs AddedVocabulary::extract_and_normalize
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cedar::text {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
};

// A segment of text after cutting out added tokens: either an added-token id or plain text.
struct Segment {
  int32_t id;             // >= 0: an added token; -1: plain text in `text`
  std::string_view text;  // view into the input (the token's span for added tokens)
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  // Splits `text` into plain segments and added-token segments, in order.
  void segment(std::string_view text, std::vector<Segment>* out) const;

 private:
  // A byte trie over one group of token strings.
  struct Trie {
    struct Node {
      int32_t id = -1;
      std::vector<std::pair<unsigned char, int32_t>> next;  // few children per node
    };
    std::vector<Node> nodes{Node{}};
    bool first_byte[256] = {};
    void insert(std::string_view s, int32_t id);
    // Longest token starting at text[pos]: returns its length (0 if none) and sets *id.
    std::size_t longest_at(std::string_view text, std::size_t pos, int32_t* id) const;
    bool empty() const { return nodes.size() == 1; }
  };
  static void split_with(const Trie& trie, std::string_view text, std::vector<Segment>* out);

  Trie raw_;         // normalized == false
  Trie normalized_;  // normalized == true
};

}  // namespace cedar::text
