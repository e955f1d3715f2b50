// libFuzzer: bytes from a client -> the HTTP/1.1 request parser, fed whole and in pieces (as a
// socket delivers them), with pipelined requests parsed one after another. The first byte picks
// the split. Every piece size must give the same requests, bodies and errors, the body limit
// must hold, and the parser must never claim bytes it was not given.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_request.h"

namespace {

struct Parsed {
  std::vector<std::string> items;  // method path body, or an error status
  bool operator==(const Parsed& o) const { return items == o.items; }
};

Parsed parse_all(std::string_view text, size_t step) {
  using namespace cedar::server;
  HttpLimits lim;
  lim.max_body_bytes = 4096;
  lim.max_head_bytes = 2048;
  lim.max_headers = 16;
  RequestParser p(lim);
  Parsed out;
  std::string buf;
  size_t off = 0;
  for (size_t i = 0; i < text.size() && !p.failed(); i += step) {
    buf.append(text.substr(i, step));
    for (;;) {
      const size_t n = p.feed(std::string_view(buf).substr(off));
      if (n > buf.size() - off) std::abort();  // consumed bytes it was not given
      off += n;
      if (p.request().body.size() > lim.max_body_bytes) std::abort();
      if (p.failed()) {
        out.items.push_back("error " + std::to_string(p.error_status()));
        break;
      }
      if (!p.done()) break;
      out.items.push_back(p.request().method + " " + p.request().path + " " + p.request().body);
      p.reset();
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Parsed whole = parse_all(text, text.size() + 1);
  const Parsed pieces = parse_all(text, 1 + data[0] % 17);
  if (!(whole == pieces)) std::abort();  // the split changed what was parsed
  return 0;
}
