#include "server/http_request.h"

#include <poll.h>

#include <algorithm>
#include <cctype>

namespace cedar::server {

namespace {

const std::string kEmpty;

// RFC 9110 §5.6.2 token characters.
bool is_tchar(unsigned char c) {
  return std::isalnum(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(c); });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether the comma-separated header value holds `token` (case-insensitive).
bool has_token(std::string_view value, std::string_view token) {
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    if (lower(trim(value.substr(start, comma - start))) == token) return true;
    start = comma + 1;
  }
  return false;
}

// The line ending at data[nl] ('\n'), without a trailing '\r'.
std::string_view line_before(std::string_view data, size_t begin, size_t nl) {
  std::string_view line = data.substr(begin, nl - begin);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// The end (one past) of the head's empty line, searching from `from`, or npos.
size_t find_head_end(std::string_view data, size_t from) {
  for (size_t nl = data.find('\n', from); nl != std::string_view::npos;
       nl = data.find('\n', nl + 1)) {
    if (nl + 1 < data.size() && data[nl + 1] == '\n') return nl + 2;
    if (nl + 2 < data.size() && data[nl + 1] == '\r' && data[nl + 2] == '\n') return nl + 3;
  }
  return std::string_view::npos;
}

constexpr size_t kMaxTarget = 8192;
constexpr size_t kMaxChunkLine = 1024;

}  // namespace

const std::string& HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return v;
  return kEmpty;
}

bool HttpRequest::has_header(std::string_view lower_name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return h.first == lower_name; });
}

bool HttpRequest::keep_alive() const {
  const std::string& c = header("connection");
  if (has_token(c, "close")) return false;
  return version_minor >= 1 || has_token(c, "keep-alive");
}

bool HttpRequest::client_gone() const {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

void RequestParser::reset() {
  req_ = HttpRequest{};
  state_ = State::kHead;
  remaining_ = 0;
  trailer_bytes_ = 0;
  expect_continue_ = false;
  started_ = false;
  error_status_ = 0;
  error_.clear();
}

size_t RequestParser::fail(int status, std::string why) {
  state_ = State::kError;
  error_status_ = status;
  error_ = std::move(why);
  return 0;
}

size_t RequestParser::feed(std::string_view data) {
  size_t used = 0;
  while (state_ != State::kDone && state_ != State::kError) {
    const std::string_view rest = data.substr(used);
    size_t n = 0;
    switch (state_) {
      case State::kHead:
        n = parse_head(rest);
        break;
      case State::kBody:
      case State::kChunkData: {
        n = size_t(std::min<uint64_t>(remaining_, rest.size()));
        req_.body.append(rest.data(), n);
        remaining_ -= n;
        if (remaining_ == 0) state_ = state_ == State::kBody ? State::kDone : State::kChunkDataEnd;
        break;
      }
      case State::kChunkDataEnd:
        if (rest.empty() || (rest[0] == '\r' && rest.size() < 2)) return used;
        if (rest[0] == '\n')
          n = 1;
        else if (rest[0] == '\r' && rest[1] == '\n')
          n = 2;
        else
          return used + fail(400, "malformed chunked body: a chunk does not end with CRLF");
        state_ = State::kChunkSize;
        break;
      case State::kChunkSize:
        n = parse_chunk_line(rest);
        break;
      case State::kTrailers:
        n = parse_trailers(rest);
        break;
      case State::kDone:
      case State::kError:
        break;
    }
    used += n;
    if (n == 0 && state_ != State::kDone) break;  // needs more bytes (or failed)
  }
  return used;
}

size_t RequestParser::parse_head(std::string_view data) {
  // RFC 9112 §2.2: empty lines before a request line are ignored (some clients send a CRLF after
  // a body); they do not start a request.
  size_t pos = 0;
  while (pos < data.size() && (data[pos] == '\r' || data[pos] == '\n')) ++pos;
  if (pos < data.size()) started_ = true;
  const size_t end = find_head_end(data, pos);
  if (end == std::string_view::npos) {
    if (data.size() - pos > limits_.max_head_bytes)
      return fail(431, "the request head is larger than " + std::to_string(limits_.max_head_bytes) +
                           " bytes");
    return pos;
  }
  if (end - pos > limits_.max_head_bytes)
    return fail(431, "the request head is larger than " + std::to_string(limits_.max_head_bytes) +
                         " bytes");
  size_t begin = pos;
  bool first = true;
  for (size_t nl = data.find('\n', begin); nl < end; nl = data.find('\n', begin)) {
    const std::string_view line = line_before(data, begin, nl);
    begin = nl + 1;
    if (line.empty()) break;  // the head's end
    if (first ? !parse_request_line(line) : !parse_header_line(line)) return 0;
    first = false;
  }
  if (!frame_body()) return 0;
  return end;
}

bool RequestParser::parse_request_line(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "malformed request line"), false;
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method) || method.size() > 32) return fail(400, "malformed request method"), false;
  if (target.empty() || target.size() > kMaxTarget)
    return fail(target.empty() ? 400 : 414, "the request target is empty or too long"), false;
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return fail(400, "control characters in the request target"), false;
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      !std::isdigit(static_cast<unsigned char>(version[5])) ||
      !std::isdigit(static_cast<unsigned char>(version[7])))
    return fail(400, "malformed HTTP version"), false;
  if (version[5] != '1') return fail(505, "only HTTP/1.0 and HTTP/1.1 are served"), false;
  req_.version_minor = version[7] - '0';
  req_.method = std::string(method);
  // absolute form (RFC 9112 §3.2.2): keep the path
  if (target[0] != '/') {
    const size_t scheme = target.find("://");
    if (target == "*" && method == "OPTIONS") {
      req_.path = "*";
      return true;
    }
    if (scheme == std::string_view::npos) return fail(400, "malformed request target"), false;
    const size_t slash = target.find('/', scheme + 3);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  const size_t q = target.find('?');
  req_.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) req_.query = std::string(target.substr(q + 1));
  return true;
}

bool RequestParser::parse_header_line(std::string_view line) {
  if (line[0] == ' ' || line[0] == '\t')
    return fail(400, "obsolete header line folding is not accepted"), false;
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
    return fail(400, "malformed header line"), false;
  const std::string_view value = trim(line.substr(colon + 1));
  for (char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
      return fail(400, "control characters in a header value"), false;
  if (req_.headers.size() >= limits_.max_headers)
    return fail(431, "more than " + std::to_string(limits_.max_headers) + " headers"), false;
  req_.headers.emplace_back(lower(line.substr(0, colon)), std::string(value));
  return true;
}

bool RequestParser::frame_body() {
  bool chunked = false, has_length = false;
  uint64_t length = 0;
  for (const auto& [name, value] : req_.headers) {
    if (name == "transfer-encoding") {
      if (chunked || lower(value) != "chunked")
        return fail(501, "Transfer-Encoding '" + value + "' is not supported (only chunked)"),
               false;
      chunked = true;
    } else if (name == "content-length") {
      if (value.empty() || value.size() > 19 ||
          value.find_first_not_of("0123456789") != std::string::npos)
        return fail(400, "invalid Content-Length '" + value + "'"), false;
      const uint64_t n = std::stoull(value);
      if (has_length && n != length) return fail(400, "conflicting Content-Length headers"), false;
      has_length = true;
      length = n;
    }
  }
  if (chunked && has_length)
    return fail(400, "both Content-Length and Transfer-Encoding: chunked"), false;
  if (has_length && length > limits_.max_body_bytes)
    return fail(413, "Request body too large: the limit is " +
                         std::to_string(limits_.max_body_bytes) + " bytes"),
           false;
  if (req_.has_header("expect")) {
    if (lower(req_.header("expect")) != "100-continue")
      return fail(417, "unsupported Expect '" + req_.header("expect") + "'"), false;
    expect_continue_ = chunked || length > 0;
  }
  if (chunked) {
    state_ = State::kChunkSize;
  } else if (length > 0) {
    req_.body.reserve(size_t(length));
    remaining_ = length;
    state_ = State::kBody;
  } else {
    state_ = State::kDone;
  }
  return true;
}

size_t RequestParser::parse_chunk_line(std::string_view data) {
  const size_t nl = data.find('\n');
  if (nl == std::string_view::npos) {
    if (data.size() > kMaxChunkLine)
      return fail(400, "malformed chunked body: chunk line too long");
    return 0;
  }
  std::string_view line = line_before(data, 0, nl);
  line = line.substr(0, line.find(';'));  // chunk extensions are ignored
  if (line.empty() || line.size() > 15 ||
      line.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos)
    return fail(400,
                "malformed chunked body: bad chunk size '" + std::string(line.substr(0, 32)) + "'");
  const uint64_t size = std::stoull(std::string(line), nullptr, 16);
  if (size > limits_.max_body_bytes - req_.body.size())
    return fail(413, "Request body too large: the limit is " +
                         std::to_string(limits_.max_body_bytes) + " bytes");
  remaining_ = size;
  state_ = size == 0 ? State::kTrailers : State::kChunkData;
  return nl + 1;
}

size_t RequestParser::parse_trailers(std::string_view data) {
  size_t used = 0;
  for (size_t nl = data.find('\n'); nl != std::string_view::npos; nl = data.find('\n', used)) {
    const bool empty = line_before(data, used, nl).empty();
    trailer_bytes_ += nl + 1 - used;
    used = nl + 1;
    if (trailer_bytes_ > limits_.max_head_bytes)
      return fail(431, "the chunked body's trailers are too large");
    if (empty) {
      state_ = State::kDone;
      return used;
    }
  }
  if (trailer_bytes_ + data.size() - used > limits_.max_head_bytes)
    return fail(431, "the chunked body's trailers are too large");
  return used;
}

}  // namespace cedar::server
