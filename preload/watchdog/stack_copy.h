// A thread's registers and the top of its stack, copied as raw bytes: what the hang watchdog
// takes from a thread, to unwind later on its own thread (remote_unwind.h). Taking it needs no
// unwinder, no loader and no lock: in the signal handler it is a copy of the interrupted
// context plus one process_vm_readv(2) of the stack (a fault ends the copy, never the process).
#pragma once

#include <cstddef>
#include <cstdint>

namespace laggard::watch {

// Registers in libunwind's numbering for this architecture (x86-64: UNW_X86_64_RAX..RIP, which
// is DWARF's; aarch64: X0..X30, SP, PC).
#if defined(__x86_64__)
constexpr int kRegCount = 17;
constexpr int kRegSp = 7, kRegPc = 16, kRegFp = 6;  // rsp, rip, rbp
#elif defined(__aarch64__)
constexpr int kRegCount = 33;
constexpr int kRegSp = 31, kRegPc = 32, kRegFp = 29;  // sp, pc, x29
#else
constexpr int kRegCount = 0;
constexpr int kRegSp = -1, kRegPc = -1, kRegFp = -1;
#endif

// How much of a stack is copied: the innermost 256 KiB (deeper frames than that are cut off).
constexpr size_t kStackCopyBytes = 256 * 1024;
// Bytes below the stack pointer a leaf function may still use (the x86-64 red zone).
constexpr uint64_t kBelowSp = 128;

struct StackSnapshot {
  uint64_t regs[kRegCount > 0 ? kRegCount : 1] = {};
  uint64_t known = 0;          // bit i: regs[i] holds the thread's value
  uint64_t stack_start = 0;    // address of stack[0]
  size_t stack_len = 0;        // bytes copied
  uint8_t* stack = nullptr;    // kStackCopyBytes of storage owned by the caller

  bool has(int reg) const { return reg >= 0 && reg < kRegCount && (known >> reg & 1); }
  // Whether [addr, addr + n) lies in the copy (no overflow for any addr).
  bool holds(uint64_t addr, size_t n) const {
    return addr >= stack_start && addr - stack_start <= stack_len && stack_len - (addr - stack_start) >= n;
  }
  uint64_t sp() const { return has(kRegSp) ? regs[kRegSp] : 0; }
  uint64_t pc() const { return has(kRegPc) ? regs[kRegPc] : 0; }
  void set(int reg, uint64_t value) {
    if (reg < 0 || reg >= kRegCount) return;
    regs[reg] = value;
    known |= uint64_t{1} << reg;
  }
};

// Async-signal-safe. The interrupted thread's registers from the handler's ucontext_t.
void copy_registers(StackSnapshot& s, const void* ucontext);

// Async-signal-safe. Copies [sp - kBelowSp, sp + kStackCopyBytes - kBelowSp) into s.stack,
// page by page, stopping at the first page that cannot be read (the stack's end). Returns the
// bytes copied (also in s.stack_len).
size_t copy_stack(StackSnapshot& s, uint64_t sp);

// Async-signal-safe. Copies len bytes at addr of this process into dst; false when any byte is
// not mapped readable (nothing faults).
bool read_memory(void* dst, uint64_t addr, size_t len);

// Once, before the handler is installed: checks that process_vm_readv works on this process,
// and where a seccomp profile refuses it, opens /proc/self/mem instead (placed with move_high).
// False when neither works (then only the registers are copied: one frame per thread).
bool prepare_memory_reads(int (*move_high)(int));

}  // namespace laggard::watch
