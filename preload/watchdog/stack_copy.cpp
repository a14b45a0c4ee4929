// Signal context: everything here runs inside the stack-capture signal handler on an application
// thread interrupted at any instruction. Only memcpy-like work and raw system calls.
#include "stack_copy.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace laggard::watch {
namespace {

constexpr uint64_t kPage = 4096;
constexpr int kIovBatch = 16;  // iovecs per system call: 512 bytes of the handler's stack

// /proc/self/mem, opened by prepare_memory_reads() only where process_vm_readv is refused (a
// seccomp profile that allows neither it nor ptrace): pread stops with EIO at an unmapped page.
std::atomic<int> g_mem_fd{-1};

size_t mem_fd_read(int fd, void* dst, uint64_t addr, size_t len) {
  size_t done = 0;
  while (done < len) {
    uint64_t at = addr + done;
    size_t chunk = static_cast<size_t>(kPage - (at % kPage));
    if (chunk > len - done) chunk = len - done;
    ssize_t got = ::pread(fd, static_cast<uint8_t*>(dst) + done, chunk, static_cast<off_t>(at));
    if (got <= 0) break;
    done += static_cast<size_t>(got);
    if (static_cast<size_t>(got) < chunk) break;
  }
  return done;
}

// process_vm_readv on this process: the kernel copies and stops at the first unreadable byte,
// where a plain load would fault. One iovec per page, so a partial transfer ends on a page
// boundary (transfers are partial only at iovec granularity). Returns the bytes copied.
size_t vm_read(void* dst, uint64_t addr, size_t len) {
  if (int fd = g_mem_fd.load(std::memory_order_acquire); fd >= 0) return mem_fd_read(fd, dst, addr, len);
  size_t done = 0;
  while (done < len) {
    iovec local[kIovBatch];
    iovec remote[kIovBatch];
    int n = 0;
    size_t batch = 0;
    uint64_t at = addr + done;
    while (done + batch < len && n < kIovBatch) {
      size_t chunk = static_cast<size_t>(kPage - (at % kPage));
      if (chunk > len - done - batch) chunk = len - done - batch;
      local[n] = {static_cast<uint8_t*>(dst) + done + batch, chunk};
      remote[n] = {reinterpret_cast<void*>(at), chunk};
      ++n;
      at += chunk;
      batch += chunk;
    }
    ssize_t got = ::syscall(SYS_process_vm_readv, ::getpid(), local, n, remote, n, 0);
    if (got <= 0) break;
    done += static_cast<size_t>(got);
    if (static_cast<size_t>(got) < batch) break;  // the next page is not mapped
  }
  return done;
}

}  // namespace

bool prepare_memory_reads(int (*move_high)(int)) {
  uint64_t probe = 0x5eed, copy = 0;
  if (vm_read(&copy, reinterpret_cast<uint64_t>(&probe), sizeof probe) == sizeof probe && copy == probe) return true;
  int fd = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  g_mem_fd.store(move_high ? move_high(fd) : fd, std::memory_order_release);
  copy = 0;
  return vm_read(&copy, reinterpret_cast<uint64_t>(&probe), sizeof probe) == sizeof probe && copy == probe;
}

bool read_memory(void* dst, uint64_t addr, size_t len) {
  if (len == 0) return true;
  int saved = errno;
  size_t got = vm_read(dst, addr, len);
  errno = saved;
  return got == len;
}

size_t copy_stack(StackSnapshot& s, uint64_t sp) {
  s.stack_len = 0;
  s.stack_start = 0;
  if (!s.stack || sp < kBelowSp) return 0;
  uint64_t start = sp - kBelowSp;
  int saved = errno;
  size_t got = vm_read(s.stack, start, kStackCopyBytes);
  errno = saved;
  if (got == 0) return 0;
  s.stack_start = start;
  s.stack_len = got;
  return s.stack_len;
}

void copy_registers(StackSnapshot& s, const void* ucontext) {
  s.known = 0;
  if (!ucontext) return;
  const auto* uc = static_cast<const ucontext_t*>(ucontext);
#if defined(__x86_64__)
  const greg_t* g = uc->uc_mcontext.gregs;
  // libunwind/DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip
  const int from[kRegCount] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
                               REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  for (int i = 0; i < kRegCount; ++i) s.set(i, static_cast<uint64_t>(g[from[i]]));
#elif defined(__aarch64__)
  for (int i = 0; i < 31; ++i) s.set(i, uc->uc_mcontext.regs[i]);
  s.set(kRegSp, uc->uc_mcontext.sp);
  s.set(kRegPc, uc->uc_mcontext.pc);
#else
  (void)uc;
#endif
}

}  // namespace laggard::watch
