#include "metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace laggard::cli {
namespace {

// Connections the kernel completes before the server thread accepts them: a burst beyond this
// has its SYNs dropped and retried a second later, so it is well above kMaxConnections.
constexpr int kListenBacklog = 1024;

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

std::string response(int status, const char* reason, const std::string& content_type, const std::string& body,
                     bool head) {
  std::string r = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                              status, reason, content_type, body.size());
  if (!head) r += body;
  return r;
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

MetricsServer::MetricsServer(const Endpoint& where, std::string content_type, int64_t request_deadline_ms)
    : content_type_(std::move(content_type)),
      deadline_ms_(request_deadline_ms),
      host_(where.host),
      body_(std::make_shared<const std::string>()) {
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
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, kListenBacklog) == 0) {
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
  int flags = ::fcntl(listen_fd_, F_GETFL);
  ::fcntl(listen_fd_, F_SETFL, flags | O_NONBLOCK);
  server_ = std::thread([this] { serve(); });
}

MetricsServer::~MetricsServer() {
  stopping_ = true;
  char byte = 0;
  (void)!::write(wake_[1], &byte, 1);
  server_.join();  // closes every open connection on its way out: no client delays the exit
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

// ---- one thread, every connection non-blocking, each with its own deadline ----

namespace {

int64_t now_ms() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000 + t.tv_nsec / 1'000'000;
}

}  // namespace

struct MetricsServer::Connection {
  int fd = -1;
  int64_t deadline_ms = 0;  // accept + kRequestDeadlineMs: the whole exchange, however it trickles
  std::string in;           // request head so far
  std::string out;          // response, once the head is complete
  size_t sent = 0;
  bool answering() const { return !out.empty(); }
};

void MetricsServer::accept_new(std::vector<Connection>& conns) {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left (or an error: the next poll tries again)
    if (conns.size() >= kMaxConnections) {
      // Full: the connection that has waited longest goes, so idle clients can never fill the
      // server and turn scrapes away.
      auto oldest = std::min_element(conns.begin(), conns.end(),
                                     [](const Connection& a, const Connection& b) { return a.deadline_ms < b.deadline_ms; });
      ::close(oldest->fd);
      conns.erase(oldest);
    }
    Connection c;
    c.fd = fd;
    c.deadline_ms = now_ms() + deadline_ms_;
    conns.push_back(std::move(c));
  }
}

// Reads what the client sent; true when the connection is done with (closed early, or answered
// now with an error).
bool MetricsServer::read_request(Connection& c) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    if (n == 0) return true;  // closed before a whole request
    c.in.append(buf, static_cast<size_t>(n));
    bool complete = c.in.find("\r\n\r\n") != std::string::npos || c.in.find("\n\n") != std::string::npos;
    if (complete || c.in.size() >= kMaxRequestBytes) {
      c.out = answer(c.in, !complete);
      return false;
    }
  }
}

// Sends what the kernel takes now; true when all is sent (or the client went away).
bool MetricsServer::write_response(Connection& c) {
  while (c.sent < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    c.sent += static_cast<size_t>(n);
  }
  return true;
}

void MetricsServer::serve() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  while (!stopping_) {
    fds.assign({{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}});
    int64_t now = now_ms(), next_deadline = now + deadline_ms_;
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.answering() ? POLLOUT : POLLIN), 0});
      next_deadline = std::min(next_deadline, c.deadline_ms);
    }
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, next_deadline - now) + 1));
    if (rc < 0 && errno != EINTR) break;
    if (rc < 0) continue;
    if (fds[1].revents) break;
    now = now_ms();
    std::vector<Connection> kept;
    kept.reserve(conns.size());
    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      short ev = fds[i + 2].revents;
      bool done = false;
      if (ev & (POLLERR | POLLNVAL)) done = true;
      else if (!c.answering() && (ev & (POLLIN | POLLHUP))) done = read_request(c);
      if (!done && c.answering() && (ev & POLLOUT || c.sent == 0)) done = write_response(c);
      if (!done && now >= c.deadline_ms) done = true;  // too slow, whichever way: closed unanswered
      if (done) ::close(c.fd);
      else kept.push_back(std::move(c));
    }
    conns.swap(kept);
    if (fds[0].revents & POLLIN) accept_new(conns);
  }
  for (const Connection& c : conns) ::close(c.fd);
}

std::string MetricsServer::answer(const std::string& head, bool too_long) {
  const std::string text = "text/plain; charset=utf-8";
  if (too_long) return response(431, "Request Header Fields Too Large", text, "request too large\n", false);
  // Request line: METHOD SP TARGET SP VERSION (RFC 9112 section 3).
  std::string line = head.substr(0, head.find_first_of("\r\n"));
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1 || line.compare(sp2 + 1, 5, "HTTP/") != 0)
    return response(400, "Bad Request", text, "bad request\n", false);
  std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string path = target.substr(0, target.find('?'));
  bool head_only = method == "HEAD";
  if (path != "/metrics") return response(404, "Not Found", text, "not found: try /metrics\n", head_only);
  if (method != "GET" && !head_only) return response(405, "Method Not Allowed", text, "only GET and HEAD\n", false);
  std::shared_ptr<const std::string> body;
  {
    std::lock_guard lock(body_mutex_);
    body = body_;
  }
  return response(200, "OK", content_type_, *body, head_only);
}

}  // namespace laggard::cli
