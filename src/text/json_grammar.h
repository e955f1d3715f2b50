// Constrained JSON output (response_format json_object / json_schema, strict tool parameters):
// a JSON Schema compiled to a graph of SchemaNodes (text/json_schema.h: what is supported and
// what is refused) and a byte-level matcher that accepts exactly the texts that are JSON values
// of the schema, or prefixes of one (text/json_matcher.h). runtime/token_constraint.* turns the
// matcher into a mask over the vocabulary, one decoding step at a time.
#pragma once

#include "text/json_matcher.h"
#include "text/json_schema.h"
