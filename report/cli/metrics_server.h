// The tiny HTTP/1.1 server behind `laggard watch --serve HOST:PORT`: GET (or HEAD) /metrics answers
// the newest published text, any other path 404, any other method 405. It runs in the CLI process
// (never inside the job), on one thread of its own that polls every connection without blocking
// on any: a client that trickles its request or reads the answer slowly costs a buffer, never a
// thread, so it cannot delay anyone else's scrape. Every exchange is bounded as a whole (8 KiB of
// head; kRequestDeadlineMs from accept to the last byte of the answer, then it is closed) and at
// most kMaxConnections are open: past that the one waiting longest is closed (issue 24: four
// trickling or 200 idle connections made every scrape fail).
//
// Hand-written on POSIX sockets rather than Debian's cpp-httplib: Debian builds that as a shared
// library (libcpp-httplib.so.0.11, pulling libssl and libbrotli) that the GPU machines the CLI is
// copied to lack -- the reason the CLI already uses fmt header-only -- and all it needs is one path.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace laggard::cli {

struct Endpoint {
  std::string host = "127.0.0.1";
  std::string port;
};

// "HOST:PORT", "[v6]:PORT", ":PORT" or "PORT" (host 127.0.0.1). Throws std::invalid_argument.
Endpoint parse_endpoint(const std::string& text);

class MetricsServer {
 public:
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr int64_t kRequestDeadlineMs = 5000;
  static constexpr size_t kMaxConnections = 256;

  // Binds and listens; throws std::runtime_error with a message for the user.
  // request_deadline_ms: how long one connection may take in all (tests shorten it).
  MetricsServer(const Endpoint& where, std::string content_type, int64_t request_deadline_ms = kRequestDeadlineMs);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void publish(std::string body);      // what the next scrapes get
  std::string url() const;             // http://HOST:PORT/metrics, with the port actually bound

 private:
  struct Connection;
  void serve();
  void accept_new(std::vector<Connection>& conns);
  bool read_request(Connection& c);
  bool write_response(Connection& c);
  std::string answer(const std::string& head, bool too_long);

  std::string content_type_;
  int64_t deadline_ms_;
  std::string host_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};             // a byte here ends serve()
  std::atomic<bool> stopping_{false};
  std::mutex body_mutex_;
  std::shared_ptr<const std::string> body_;
  std::thread server_;
};

}  // namespace laggard::cli
