// Batch mode of `cedar tokenize` and `cedar render` (`--jsonl`): one JSON value per input line,
// one output line per input line, in order, so tools (the trainer's data preparation) pay the
// tokenizer's load once for thousands of documents instead of once per process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/json_limits.h"

namespace cedar::app {

// Calls fn on every non-empty line of `path` parsed as untrusted JSON and writes what it returns
// plus '\n' to stdout. A line that is not JSON, or that fn rejects by throwing, stops the run
// with an error naming the line number.
void for_each_jsonl(const std::string& path,
                    const std::function<std::string(const nlohmann::ordered_json&)>& fn);

// "[1,2,3]": token ids as one compact JSON array.
std::string ids_json(const std::vector<int32_t>& ids);

}  // namespace cedar::app
