// A loopback HTTP client for the /metrics server's tests: plain sockets, one request, the whole
// reply; a receive timeout so a broken server fails a test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

#include "metrics_server.h"

namespace laggard::testing {

// A connected socket to 127.0.0.1:port, or -1.
inline int connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  timeval limit{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  return fd;
}

// Everything the server sends until it closes (or 30 s of silence).
inline std::string read_all(int fd) {
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  return reply;
}

// One HTTP exchange: sends request as is, returns everything the server sent.
inline std::string http_exchange(int port, const std::string& request) {
  int fd = connect_loopback(port);
  if (fd < 0) return "connect failed";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string reply = read_all(fd);
  close(fd);
  return reply;
}

inline int port_of(const cli::MetricsServer& s) { return std::stoi(s.url().substr(s.url().rfind(':') + 1)); }

}  // namespace laggard::testing
