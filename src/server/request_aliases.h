// What other OpenAI-compatible servers accept for the same request, rewritten to the spelling the
// V4.1 request parser knows, so that a client written for vLLM or the OpenAI API works unchanged
// (the fields cedar ignores are warned about by server/field_warnings.h).
#pragma once

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

}  // namespace cedar::server
