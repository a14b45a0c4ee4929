#include "metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace laggard::cli {
namespace {

constexpr size_t kMaxQueued = 64;  // accepted connections beyond this are closed unanswered
constexpr int kIoTimeoutS = 5;

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

void send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away or timed out: nothing to do
    sent += static_cast<size_t>(n);
  }
}

std::string response(int status, const char* reason, const std::string& content_type, const std::string& body,
                     bool head) {
  std::string r = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                              status, reason, content_type, body.size());
  if (!head) r += body;
  return r;
}

// Reads the request head (up to the blank line). Empty: too long, timed out or closed early.
std::string read_head(int fd, bool* too_long) {
  std::string head;
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    if (head.size() >= MetricsServer::kMaxRequestBytes) {
      *too_long = true;
      return {};
    }
    ssize_t n = ::recv(fd, buf, std::min(sizeof buf, MetricsServer::kMaxRequestBytes - head.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    head.append(buf, static_cast<size_t>(n));
  }
  return head;
}

}  // namespace

Endpoint parse_endpoint(const std::string& text) {
  Endpoint e;
  std::string port = text;
  if (!text.empty() && text.front() == '[') {  // [IPv6]:PORT
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw std::invalid_argument("'" + text + "' is not [ADDRESS]:PORT");
    e.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (size_t colon = text.rfind(':'); colon != std::string::npos) {
    if (text.find(':') != colon) throw std::invalid_argument("'" + text + "': write an IPv6 address as [ADDRESS]:PORT");
    if (colon > 0) e.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (!all_digits(port) || port.size() > 5 || std::stoi(port) > 65535)
    throw std::invalid_argument("'" + text + "' has no valid port (HOST:PORT, port 0-65535)");
  e.port = port;
  return e;
}

MetricsServer::MetricsServer(const Endpoint& where, std::string content_type)
    : content_type_(std::move(content_type)), host_(where.host), body_(std::make_shared<const std::string>()) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(where.host.c_str(), where.port.c_str(), &hints, &found); rc != 0)
    throw std::runtime_error(fmt::format("cannot resolve '{}': {}", where.host, gai_strerror(rc)));
  std::string last_error = "no address";
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      listen_fd_ = fd;
    } else {
      last_error = std::strerror(errno);
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0)
    throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", where.host, where.port, last_error));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  for (int i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { worker_loop(); });
  acceptor_ = std::thread([this] { accept_loop(); });
}

MetricsServer::~MetricsServer() {
  stopping_ = true;
  char byte = 0;
  (void)!::write(wake_[1], &byte, 1);
  acceptor_.join();
  {
    std::lock_guard lock(queue_mutex_);
    for (int fd : answering_) ::shutdown(fd, SHUT_RDWR);  // a silent client must not delay the exit
  }
  queue_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  for (int fd : queue_) ::close(fd);
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void MetricsServer::publish(std::string body) {
  auto next = std::make_shared<const std::string>(std::move(body));
  std::lock_guard lock(body_mutex_);
  body_ = std::move(next);
}

std::string MetricsServer::url() const {
  std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return fmt::format("http://{}:{}/metrics", host, port_);
}

void MetricsServer::accept_loop() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
  while (!stopping_) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    timeval tv{kIoTimeoutS, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::unique_lock lock(queue_mutex_);
    if (queue_.size() >= kMaxQueued) {
      lock.unlock();
      ::close(fd);
      continue;
    }
    queue_.push_back(fd);
    lock.unlock();
    queue_cv_.notify_one();
  }
}

void MetricsServer::worker_loop() {
  for (;;) {
    int fd;
    {
      std::unique_lock lock(queue_mutex_);
      queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      fd = queue_.front();
      queue_.pop_front();
      answering_.push_back(fd);
    }
    answer(fd);
    {
      std::lock_guard lock(queue_mutex_);
      answering_.erase(std::find(answering_.begin(), answering_.end(), fd));
    }
    ::close(fd);
  }
}

void MetricsServer::answer(int fd) {
  bool too_long = false;
  std::string head = read_head(fd, &too_long);
  const std::string text = "text/plain; charset=utf-8";
  if (too_long) return send_all(fd, response(431, "Request Header Fields Too Large", text, "request too large\n", false));
  if (head.empty()) return;
  // Request line: METHOD SP TARGET SP VERSION (RFC 9112 section 3).
  std::string line = head.substr(0, head.find_first_of("\r\n"));
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1 || line.compare(sp2 + 1, 5, "HTTP/") != 0)
    return send_all(fd, response(400, "Bad Request", text, "bad request\n", false));
  std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string path = target.substr(0, target.find('?'));
  bool head_only = method == "HEAD";
  if (path != "/metrics") return send_all(fd, response(404, "Not Found", text, "not found: try /metrics\n", head_only));
  if (method != "GET" && !head_only)
    return send_all(fd, response(405, "Method Not Allowed", text, "only GET and HEAD\n", false));
  std::shared_ptr<const std::string> body;
  {
    std::lock_guard lock(body_mutex_);
    body = body_;
  }
  send_all(fd, response(200, "OK", content_type_, *body, head_only));
}

}  // namespace laggard::cli
