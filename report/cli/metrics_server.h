// The tiny HTTP/1.1 server behind `laggard watch --serve HOST:PORT`: GET (or HEAD) /metrics answers
// the newest published text, any other path 404, any other method 405. It runs in the CLI process
// (never inside the job), on its own threads: one accepts, a few answer, so concurrent scrapes do
// not wait for each other. Every request is bounded (8 KiB of head, 5 s to send it) and every
// answer closes the connection, so a slow or hostile client holds one worker for 5 s at most.
//
// Hand-written on POSIX sockets rather than Debian's cpp-httplib: Debian builds that as a shared
// library (libcpp-httplib.so.0.11, pulling libssl and libbrotli) that the GPU machines the CLI is
// copied to lack -- the reason the CLI already uses fmt header-only -- and all it needs is one path.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
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
  static constexpr int kWorkers = 4;

  // Binds and listens; throws std::runtime_error with a message for the user.
  MetricsServer(const Endpoint& where, std::string content_type);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void publish(std::string body);      // what the next scrapes get
  std::string url() const;             // http://HOST:PORT/metrics, with the port actually bound

 private:
  void accept_loop();
  void worker_loop();
  void answer(int fd);

  std::string content_type_;
  std::string host_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};             // a byte here ends accept_loop
  std::atomic<bool> stopping_{false};
  std::mutex body_mutex_;
  std::shared_ptr<const std::string> body_;
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<int> queue_;              // accepted connections waiting for a worker
  std::vector<int> answering_;         // connections a worker holds (shut down on stop: no 5 s wait)
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

}  // namespace laggard::cli
