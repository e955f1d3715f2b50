// The DeepSeek-V4.1 chat template: the release `encoding/encoding.py` rules
// (v41-interface.md §3.3, with the corrections at the end of that page), byte-exact against the
// rendered examples of §3.13.
//
// Tokenizer contract for RenderResult::segments (§2.4): the segments concatenate to `prompt`.
// Added-token strings are recognised only inside template segments; every maximal run of text
// between two recognised added tokens is BPE-encoded as ONE piece even where it spans a
// template/content boundary (e.g. "\n\n" + system text), so that the ids equal those of the
// official whole-string encoding whenever the content holds no added-token string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/chat_request.h"
#include "text/dsml.h"
#include "text/tokenizer.h"

namespace cedar::text {

struct RenderResult {
  std::string prompt;
  std::vector<PromptSegment> segments;
  // One entry per "<｜deepseek_image｜>" placeholder, in prompt order: the image URL / data URI.
  std::vector<std::string> images;
  bool thinking = false;
  // Where generated text starts: inside <think> (reasoning), after </think> (content), or inside
  // a forced "<｜DSML｜ calls>" block. Configure the OutputParser with it.
  GenerationStart start = GenerationStart::kContent;
};

class ChatEncoder {
 public:
  // ref: encoding.py encode_messages (V4.1). `req` comes from parse_chat_request.
  RenderResult render(const ChatRequest& req) const;
  // FIM (§3.11; layout UNCONFIRMED for V4.1): with a suffix
  // BOS <｜fim▁begin｜>prompt<｜fim▁hole｜>suffix<｜fim▁end｜>; without one, BOS + prompt.
  RenderResult render_fim(const FimRequest& req) const;
  // A Chat Completions body (has "messages") or a completions/FIM body (has "prompt" and no
  // "messages"). Throws RequestError.
  RenderResult render_request(const ojson& body) const;
};

// The prompt's token ids under the segment contract above: added tokens recognised in template
// segments only; each run of text between them BPE-encoded as one piece.
std::vector<int32_t> encode_prompt(const Tokenizer& tok,
                                   const std::vector<PromptSegment>& segments);

}  // namespace cedar::text
