// libFuzzer: an arbitrary schema compiled for constrained decoding, then arbitrary bytes fed to
// its matcher. Input: schema text, a NUL byte, the bytes to feed (no NUL: the whole input is
// both). A refusal (RequestError) is fine; a crash, a hang or unbounded memory is not. Every
// accepted byte must keep the state consistent: the step-by-step matcher (feed) and a copy fed
// the same bytes all at once agree, and key() of equal states is equal.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "text/chat_request.h"
#include "text/json_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cedar::text;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view schema_text = in.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? in : in.substr(nul + 1);
  const ojson schema = ojson::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  JsonSchema s;
  try {
    s = (size & 1) ? JsonSchema::compile(schema, "s") : JsonSchema::compile_value(schema, "s");
  } catch (const RequestError&) {
    return 0;
  }
  JsonMatcher m(s.root());
  std::string accepted;
  for (const char c : text) {
    JsonMatcher probe = m;  // step() on a copy must agree with feed()
    const bool stepped = probe.step(uint8_t(c));
    const bool fed = m.feed(uint8_t(c));
    if (stepped != fed) std::abort();
    if (!fed) continue;
    if (probe.key() != m.key()) std::abort();
    accepted += c;
    (void)m.can_end();
  }
  JsonMatcher whole(s.root());  // the accepted bytes at once reach the same state
  if (!whole.feed(accepted) || whole.key() != m.key()) std::abort();
  return 0;
}
