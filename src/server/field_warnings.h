// Request fields cedar cannot honour are named in the server log, once per process and field, so
// that a client written for another server works unchanged and a setting that had no effect is
// at least visible. Fields that only label a request (user, metadata, store, ...) are accepted
// silently. The number of distinct unknown names warned about is bounded, so that a request
// with thousands of invented keys cannot flood the log.
#pragma once

#include <functional>
#include <string>

#include "text/dsml.h"

namespace cedar::server {

using text::ojson;

// Writes one warning line to the server log.
using Warn = std::function<void(const std::string&)>;

// The three generation APIs whose bodies carry their own field names.
enum class RequestApi { kChat, kResponses, kAnthropic };

// Calls warn(message + " (warned once)") the first time `key` is seen in this process.
void warn_once(const Warn& warn, const std::string& key, const std::string& message);

// Warns once per field about every top-level field of a `api` body that cedar neither reads nor
// treats as a label, and (Chat Completions) every chat_template_kwargs key it does not map.
void warn_ignored_fields(const ojson& body, RequestApi api, const Warn& warn);

}  // namespace cedar::server
