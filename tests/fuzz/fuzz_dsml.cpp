// libFuzzer: generated text -> the output parser (reasoning, content, DSML tool calls with typed
// arguments), fed whole and in pieces, in every start mode. The first byte picks the mode and
// the split; the rest is the text. Streaming must give the same message as parsing at once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "text/output_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cedar::text;
  if (size == 0) return 0;
  ParserOptions o;
  o.start = GenerationStart(data[0] % 3);
  o.parse_tool_calls = (data[0] & 4) == 0;
  o.tools = ojson::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":
    "object","properties":{"n":{"type":"integer"},"s":{"type":"string"},"o":{"type":"object"}}}}}])");
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const ParsedMessage whole = OutputParser::parse(text, o);
  OutputParser p(o);
  std::vector<ParseEvent> ev;
  const size_t step = 1 + (data[0] >> 3);
  for (size_t i = 0; i < text.size(); i += step) p.feed(text.substr(i, step), &ev);
  p.finish(&ev);
  if (p.message().content != whole.content ||
      p.message().reasoning_content != whole.reasoning_content ||
      p.message().tool_calls.size() != whole.tool_calls.size())
    std::abort();  // streaming and one-shot parsing disagree
  return 0;
}
