// The server's informational routes, in llama-server's shapes where it has one, so that the
// scripts and front ends written for it work: GET /props (the model, the context, the slots and
// the default sampling), POST /tokenize and /detokenize, GET /version and GET /slots.
#pragma once

#include "server/api_common.h"

namespace cedar::server {

ojson props_body(const ApiContext& ctx);
// {"content": TEXT, "add_special": bool (BOS first), "parse_special": bool (special-token text
// becomes its id), "with_pieces": bool} -> {"tokens": [ids]} or [{"id", "piece"}]. 400s name the
// field.
ojson tokenize_body(const runtime::Engine& engine, const ojson& body);
// {"tokens": [ids]} -> {"content": TEXT} (lossy UTF-8); an id outside the vocabulary is a 400.
ojson detokenize_body(const runtime::Engine& engine, const ojson& body);
ojson version_body(const ApiContext& ctx);
ojson slots_body(const ApiContext& ctx);

}  // namespace cedar::server
