#include "server/origin_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace cedar::server {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// "Name:8080" -> "name", "[::1]:80" -> "::1", "name." -> "name".
std::string host_name(const std::string& authority) {
  std::string h = lower(trim(authority));
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    return close == std::string::npos ? h : h.substr(1, close - 1);
  }
  if (const size_t colon = h.rfind(':'); colon != std::string::npos) h.resize(colon);
  while (!h.empty() && h.back() == '.') h.pop_back();
  return h;
}

// host:port with the default ports (80, 443) left out, lower case: the part of an origin that
// the Host header carries.
std::string authority_key(std::string a) {
  a = lower(trim(a));
  for (const char* port : {":80", ":443"})
    if (a.size() > 4 && a.ends_with(port)) a.resize(a.size() - std::string_view(port).size());
  return a;
}

bool is_ip_literal(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// Names that resolve to this machine only (RFC 6761 keeps *.localhost on loopback in browsers).
bool is_loopback_name(const std::string& name) {
  return name == "localhost" || name.ends_with(".localhost");
}

bool host_allowed(const std::string& name, const OriginPolicy& p) {
  if (is_ip_literal(name) || is_loopback_name(name)) return true;
  if (!p.bound_host.empty() && name == host_name(p.bound_host)) return true;
  return std::any_of(p.allowed_hosts.begin(), p.allowed_hosts.end(),
                     [&](const std::string& h) { return h == "*" || h == name; });
}

// The media type of a Content-Type value: "application/json; charset=utf-8" -> "application/json".
std::string media_type(const std::string& content_type) {
  return lower(trim(content_type.substr(0, content_type.find(';'))));
}

bool is_json_type(const std::string& type) {
  return type == "application/json" || type.ends_with("+json");
}

}  // namespace

std::vector<std::string> parse_allowed_hosts(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = trim(list.substr(start, comma - start));
    const std::string name = item == "*" ? item : host_name(item);
    if (name.empty())
      throw std::runtime_error("--allowed-hosts: empty host name in '" + list +
                               "' (a comma-separated list of names, or *)");
    out.push_back(name);
    start = comma + 1;
  }
  return out;
}

bool cors_allows(const std::string& cors, const std::string& origin) {
  auto canonical = [](std::string o) {
    o = lower(trim(o));
    while (!o.empty() && o.back() == '/') o.pop_back();
    return o;
  };
  const std::string want = canonical(origin);
  size_t start = 0;
  while (start < cors.size()) {
    const size_t comma = std::min(cors.find(',', start), cors.size());
    const std::string item = canonical(cors.substr(start, comma - start));
    if (item == "*" || item == want) return true;
    start = comma + 1;
  }
  return false;
}

std::optional<Refusal> check_boundary(const HttpRequest& req, const OriginPolicy& policy) {
  // HTTP/1.0 clients may leave Host out; browsers always send it.
  if (req.has_header("host")) {
    const std::string name = host_name(req.header("host"));
    if (!host_allowed(name, policy))
      return Refusal{403, "Host '" + name +
                              "' is not allowed: this server answers to loopback names, IP "
                              "addresses and the names given with --allowed-hosts (start "
                              "cedar serve with --allowed-hosts " +
                              name + " to serve it)"};
  }
  // Browsers send Origin on every cross-origin request and on same-origin POSTs; other clients
  // do not send it at all.
  if (const std::string& origin = req.header("origin"); !origin.empty()) {
    const size_t scheme = origin.find("://");
    const bool same_origin =
        scheme != std::string::npos && req.has_header("host") &&
        authority_key(origin.substr(scheme + 3)) == authority_key(req.header("host"));
    if (!same_origin && !cors_allows(policy.cors, origin))
      return Refusal{403, "cross-origin request from " + origin +
                              " refused: start cedar serve with --cors " + origin +
                              " to let pages from that origin call it"};
  }
  // A body without a declared type is taken as JSON (scripts often leave it out); the types a
  // browser may send cross-origin without a preflight are not.
  if (req.method == "POST" && req.has_header("content-type")) {
    const std::string type = media_type(req.header("content-type"));
    if (!is_json_type(type))
      return Refusal{415, "Content-Type '" + type +
                              "' is not accepted: the API takes JSON bodies; send the header "
                              "Content-Type: application/json (curl: -H 'Content-Type: "
                              "application/json')"};
  }
  return std::nullopt;
}

}  // namespace cedar::server
