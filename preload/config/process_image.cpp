#include "process_image.h"

#include <fcntl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace laggard {
namespace {

uint32_t fallback_random() {
  timespec a{}, b{};
  clock_gettime(CLOCK_MONOTONIC, &a);
  clock_gettime(CLOCK_REALTIME, &b);
  uint64_t x = static_cast<uint64_t>(a.tv_nsec) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(b.tv_nsec) ^
               static_cast<uint64_t>(::getpid()) << 32 ^ reinterpret_cast<uintptr_t>(&a);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Field 22 of /proc/self/stat; the command name (field 2) may hold spaces and parentheses, so
// counting starts after its last ')'.
uint64_t started_ticks() {
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  int field = 2;
  for (++p; *p && field < 21; ++p)
    if (*p == ' ') ++field;
  unsigned long long ticks = 0;
  return std::sscanf(p, " %*s %llu", &ticks) == 1 ? ticks : 0;
}

}  // namespace

ProcessImage this_process_image(const Env& env) {
  if (const char* forced = env("LAGGARD_TEST_IMAGE_ID");
      forced && std::strlen(forced) == 8 && std::strspn(forced, "0123456789abcdef") == 8)
    return ProcessImage{forced, started_ticks()};
  uint32_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) r = fallback_random();
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", r);
  return ProcessImage{hex, started_ticks()};
}

std::string rank_file_stem(int rank, long pid, const std::string& image) {
  char stem[96];
  if (image.empty()) std::snprintf(stem, sizeof stem, "rank%05d-%ld", rank, pid);
  else std::snprintf(stem, sizeof stem, "rank%05d-%ld-%.16s", rank, pid, image.c_str());
  return stem;
}

}  // namespace laggard
