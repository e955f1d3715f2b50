// libFuzzer: a request body -> the whole render path of /v1/chat/completions (the depth check, the
// JSON parse, the vLLM/OpenAI aliases, the V4.1 request parser and the prompt encoder), and the
// same body read as an Anthropic Messages and as a Responses request first. Any input must end in
// a value or a clean exception, never a crash, a leak or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>

#include "base/json_limits.h"
#include "server/anthropic_api.h"
#include "server/request_aliases.h"
#include "server/responses_request.h"
#include "text/chat_encoder.h"
#include "text/chat_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto body = cedar::parse_untrusted_json(text);
  if (body.is_discarded()) return 0;
  auto render = [](const cedar::text::ojson& chat) {
    (void)cedar::text::parse_chat_request(chat);
    (void)cedar::text::ChatEncoder().render_request(chat);
  };
  try {
    render(cedar::server::apply_chat_aliases(body));
  } catch (const std::exception&) {
  }
  try {
    render(cedar::server::anthropic_to_chat(body));
  } catch (const std::exception&) {
  }
  try {
    render(cedar::server::responses_to_chat(body).chat);
  } catch (const std::exception&) {
  }
  return 0;
}
