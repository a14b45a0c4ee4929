// `laggard watch --serve`'s /metrics under slow and idle clients (issue 24, item 6): a client that
// trickles its request or never sends one costs the server a buffer, never a thread, and each
// connection is closed at its deadline however it trickles.
#include <gtest/gtest.h>
#include <sys/select.h>

#include <string>
#include <vector>

#include "http_client.h"
#include "metrics_server.h"
#include "render_prometheus.h"

namespace laggard {
namespace metrics_server_test {

using testing::connect_loopback;
using testing::port_of;

std::string scrape(int port) { return testing::http_exchange(port, "GET /metrics HTTP/1.1\r\n\r\n"); }

TEST(MetricsServerUnderLoad, TricklingAndIdleClientsDoNotStopScrapes) {
  cli::MetricsServer server(cli::parse_endpoint("127.0.0.1:0"), report::kPrometheusContentType);
  server.publish("laggard_ranks 4\n");
  int port = port_of(server);
  // Four clients that have sent one byte of their request and will send the next in 4 s (the
  // old server's four workers each waited up to 5 s per byte), and 300 that say nothing: more
  // than the server keeps open.
  std::vector<int> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(connect_loopback(port));
    ASSERT_GE(slow.back(), 0);
    send(slow.back(), "G", 1, MSG_NOSIGNAL);
  }
  for (int i = 0; i < 300; ++i) slow.push_back(connect_loopback(port));
  for (int i = 0; i < 5; ++i) {
    std::string r = scrape(port);
    EXPECT_EQ(r.rfind("HTTP/1.1 200 OK", 0), 0u) << r;
    EXPECT_NE(r.find("laggard_ranks 4\n"), std::string::npos);
  }
  for (int fd : slow)
    if (fd >= 0) close(fd);
}

TEST(MetricsServerUnderLoad, AConnectionIsClosedAtItsDeadlineHoweverItTrickles) {
  cli::MetricsServer server(cli::parse_endpoint("127.0.0.1:0"), report::kPrometheusContentType, 300);
  int port = port_of(server);
  int fd = connect_loopback(port);
  ASSERT_GE(fd, 0);
  // One byte every 50 ms never completes a request before the 300 ms deadline; the old server
  // restarted its timeout at every byte and held the connection as long as the client liked.
  const std::string req = "GET /metrics HTTP/1.1\r\nX-Padding: " + std::string(200, 'a') + "\r\n\r\n";
  bool closed = false;
  for (size_t i = 0; i < req.size() && !closed; ++i) {
    if (send(fd, &req[i], 1, MSG_NOSIGNAL) != 1) closed = true;
    timeval wait{0, 50'000};
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    if (select(fd + 1, &r, nullptr, nullptr, &wait) > 0) {  // the server closed it: EOF, no answer
      char c;
      closed = recv(fd, &c, 1, 0) <= 0;
    }
  }
  EXPECT_TRUE(closed) << "the request trickled to its end without being cut off";
  close(fd);
}

}  // namespace metrics_server_test
}  // namespace laggard
