// The browser and network boundary of `cedar serve`. A server without a key on a loopback port is
// still reachable from every web page its user opens: a page can POST to it with the content
// types a <form> or a no-cors fetch may send without a CORS preflight (text/plain, form data),
// and a page on a name the attacker re-points at 127.0.0.1 (DNS rebinding) is, to the browser,
// same-origin with the server and may read its answers. So every request passes three checks
// before it reaches a route:
//   Host    the name the client addressed must be a loopback name, an IP literal (which cannot
//           be re-pointed), the name the server was bound to, or one given with --allowed-hosts;
//   Origin  a request a browser marks with an Origin must come from the server's own origin or
//           one given with --cors;
//   type    a POST body that declares a content type must declare JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/http_request.h"

namespace cedar::server {

struct OriginPolicy {
  // --allowed-hosts: extra host names (lower case, no port); "*" lets any Host through.
  std::vector<std::string> allowed_hosts;
  // --cors: the origins browsers may call from, comma-separated ("*": any).
  std::string cors;
  // The address or name the server was bound to (allowed as a Host as well).
  std::string bound_host;
};

struct Refusal {
  int status = 0;
  std::string why;
};

// --allowed-hosts "a,b:8080,*": the names, lower-cased, ports dropped. Throws on an empty name.
std::vector<std::string> parse_allowed_hosts(const std::string& list);

// Whether `origin` (an Origin header) is one of the --cors origins.
bool cors_allows(const std::string& cors, const std::string& origin);

// The first of the checks above that `req` fails, or nothing.
std::optional<Refusal> check_boundary(const HttpRequest& req, const OriginPolicy& policy);

}  // namespace cedar::server
