// The incremental HTTP/1.1 request parser: framing, limits, and byte-at-a-time arrival.
#include "server/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace cedar::server {
namespace {

HttpLimits limits(size_t body = 1024) {
  HttpLimits l;
  l.max_body_bytes = body;
  l.max_head_bytes = 512;
  l.max_headers = 8;
  return l;
}

// Feeds `text` in pieces of `step` bytes, as a connection would see it arrive.
size_t feed_in_steps(RequestParser& p, const std::string& text, size_t step) {
  std::string buf;
  size_t off = 0, total = 0;
  for (size_t i = 0; i < text.size() && !p.done() && !p.failed(); i += step) {
    buf.append(text, i, step);
    const size_t n = p.feed(std::string_view(buf).substr(off));
    off += n;
    total += n;
  }
  return total;
}

TEST(HttpRequestParser, ParsesAContentLengthRequestWhateverTheChunking) {
  const std::string req =
      "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Content-Length: 7\r\nX-Api-Key:  k  \r\n\r\n{\"a\":1}";
  for (size_t step : {size_t(1), size_t(3), req.size()}) {
    RequestParser p(limits());
    EXPECT_EQ(feed_in_steps(p, req, step), req.size());
    ASSERT_TRUE(p.done()) << step;
    const HttpRequest& r = p.request();
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.path, "/v1/chat/completions");
    EXPECT_EQ(r.query, "x=1");
    EXPECT_EQ(r.header("content-type"), "application/json");
    EXPECT_EQ(r.header("x-api-key"), "k");
    EXPECT_EQ(r.body, "{\"a\":1}");
    EXPECT_TRUE(r.keep_alive());
  }
}

TEST(HttpRequestParser, DechunksAndLeavesAPipelinedRequest) {
  const std::string one =
      "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n"
      "A\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n";
  const std::string two = "GET /health HTTP/1.1\r\n\r\n";
  RequestParser p(limits());
  const std::string both = one + two;
  const size_t used = p.feed(both);
  ASSERT_TRUE(p.done()) << p.error_message();
  EXPECT_EQ(used, one.size());
  EXPECT_EQ(p.request().body, "abc0123456789");
  p.reset();
  EXPECT_EQ(p.feed(std::string_view(both).substr(used)), two.size());
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.request().path, "/health");
  EXPECT_TRUE(p.request().body.empty());
}

TEST(HttpRequestParser, ChunkedByteByByte) {
  const std::string req =
      "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
  RequestParser p(limits());
  EXPECT_EQ(feed_in_steps(p, req, 1), req.size());
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.request().body, "hello");
}

int status_of(const std::string& text, size_t body_limit = 1024) {
  RequestParser p(limits(body_limit));
  p.feed(text);
  return p.failed() ? p.error_status() : (p.done() ? 200 : 0);
}

TEST(HttpRequestParser, RefusesBadFramingWithTheRightStatus) {
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\n\r\n"), 200);
  EXPECT_EQ(status_of("GET /\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET  / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / FTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 2000\r\n\r\n"), 413);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n"),
            413);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nExpect: something\r\nContent-Length: 1\r\n\r\nx"), 417);
  EXPECT_EQ(status_of("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n"), 431);
  RequestParser roomy{HttpLimits{}};  // a 64 KiB head: the target's own limit applies
  roomy.feed("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(roomy.error_status(), 414);
}

TEST(HttpRequestParser, ChunksCountAgainstTheBodyLimit) {
  std::string req = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i) req += "100\r\n" + std::string(256, 'x') + "\r\n";  // 1280 bytes
  RequestParser p(limits(1024));
  p.feed(req);
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 413);
  EXPECT_LE(p.request().body.size(), 1024u);
}

TEST(HttpRequestParser, HeadLimitsHoldBeforeTheHeadIsComplete) {
  RequestParser p(limits());
  p.feed("GET / HTTP/1.1\r\nX: " + std::string(600, 'a'));  // no end of head yet
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(status_of(many + "\r\n"), 431);
}

TEST(HttpRequestParser, IdleBytesAndExpectations) {
  RequestParser p(limits());
  EXPECT_EQ(p.feed("\r\n"), 2u);  // an empty line between requests does not start one
  EXPECT_FALSE(p.started());
  const std::string head = "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
  EXPECT_EQ(p.feed(head), head.size());
  EXPECT_TRUE(p.started());
  EXPECT_TRUE(p.head_done());
  EXPECT_TRUE(p.expects_continue());
  EXPECT_FALSE(p.done());
  EXPECT_EQ(p.feed("abc"), 3u);
  EXPECT_TRUE(p.done());
}

TEST(HttpRequestParser, ConnectionPersistence) {
  auto keep = [](const std::string& text) {
    RequestParser p(limits());
    p.feed(text);
    EXPECT_TRUE(p.done());
    return p.request().keep_alive();
  };
  EXPECT_TRUE(keep("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"));
  EXPECT_FALSE(keep("GET / HTTP/1.0\r\n\r\n"));
  EXPECT_TRUE(keep("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
}

TEST(HttpRequestParser, AbsoluteFormTargetKeepsThePath) {
  RequestParser p(limits());
  p.feed("GET http://localhost:8080/v1/models?a HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.request().path, "/v1/models");
  EXPECT_EQ(p.request().query, "a");
}

}  // namespace
}  // namespace cedar::server
