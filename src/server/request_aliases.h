// What other OpenAI-compatible servers accept for the same request, rewritten to the spelling the
// V4.1 request parser knows, and a once-per-process warning for the fields cedar ignores, so that
// a client written for vLLM or the OpenAI API works unchanged and a silently ignored setting is
// at least visible in the server log.
#pragma once

#include <functional>
#include <string>

#include "text/dsml.h"

namespace cedar::server {

using text::ojson;

// A Chat Completions body with these aliases rewritten (the body is otherwise unchanged; values
// are validated later by the parser):
//  * role "developer" (OpenAI's newer name for system) -> "system";
//  * an assistant message's "reasoning" (vLLM >= 0.10) -> "reasoning_content";
//  * chat_template_kwargs (vLLM): {"thinking": bool} or {"enable_thinking": bool} -> thinking
//    {"type": "enabled" | "disabled"}, {"reasoning_effort": X} -> reasoning_effort, unless the
//    body sets those itself.
ojson apply_chat_aliases(const ojson& body);

// Calls warn once per process and field name for every top-level field of a Chat Completions body
// that cedar does not use (logit_bias, prediction, audio, ...) and every chat_template_kwargs key
// it does not map. Fields that only identify or label the request (user, metadata, store, ...)
// are ignored without a warning.
void warn_ignored_fields(const ojson& body, const std::function<void(const std::string&)>& warn);

}  // namespace cedar::server
