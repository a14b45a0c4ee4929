// Unwinds a copied stack (stack_copy.h) on the watchdog's own thread, never in a signal handler.
//
// libunwind's remote API does the DWARF work (the same CFI interpreter as its local unwinder);
// laggard answers its questions through accessors, as perf does for PERF_SAMPLE_STACK_USER
// samples (linux tools/perf/util/unwind-libunwind-local.c): registers from the snapshot, stack
// memory from the copied bytes, code and .eh_frame of the loaded modules read with
// process_vm_readv (a module unloaded meanwhile gives an error, not a fault), and the unwind
// tables found from /proc/self/maps and each module's program headers -- never dl_iterate_phdr,
// so the loader lock is never taken, by the handler or here.
//
// A thread read in place while blocked in a system call gives only its SP and PC
// (/proc/self/task/TID/syscall). When a frame's CFA needs a register that is not known (a
// frame-pointer function needs %rbp), the unwinder looks for that frame's record on the stack
// (saved frame pointer, then a return address that follows a call instruction) and goes on
// from there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stack_copy.h"

namespace laggard::watch {

struct Module {
  std::string path;                  // the file ("/usr/lib/.../libc.so.6"), or "[vdso]"
  uint64_t base = 0;                 // where its first mapping starts
  uint64_t text_lo = 0, text_hi = 0; // its executable mappings
  uint64_t eh_hdr = 0;               // .eh_frame_hdr in memory (0: none usable)
  uint64_t fde_table = 0, fde_count = 0;
};

// This process's file-backed mappings, from /proc/self/maps.
class ModuleMap {
 public:
  void read();
  const Module* module_of(uint64_t pc) const;          // whose executable range holds pc
  bool mapped_from_file(uint64_t addr, size_t len) const;  // inside one file-backed mapping
  const std::vector<Module>& modules() const { return modules_; }

 private:
  struct Range {
    uint64_t start, end;
    int module;
  };
  std::vector<Module> modules_;
  std::vector<Range> ranges_;  // sorted by start
};

class RemoteUnwinder {
 public:
  RemoteUnwinder();
  ~RemoteUnwinder();
  RemoteUnwinder(const RemoteUnwinder&) = delete;
  RemoteUnwinder& operator=(const RemoteUnwinder&) = delete;

  // dlopens libunwind's generic (remote) library, libunwind-<arch>.so.8, from the directory of
  // `library` (the LAGGARD_HANG_UNWINDER file) or the default search path. "" or why not.
  std::string load(const std::string& library);
  bool loaded() const;

  // Once per report, before unwind(): the modules as mapped now.
  void refresh();
  const ModuleMap& modules() const { return map_; }

  // The return addresses of s, innermost first (the pc for frame 0); at most max.
  int unwind(const StackSnapshot& s, uint64_t* pcs, int max);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  ModuleMap map_;
};

// The start of the frame record that the frame-pointer walk of an x86-64 or aarch64 stack would
// use, searching up from sp in s: a saved frame pointer (0 or higher up the stack) followed by
// a return address right after a call instruction. is_code(addr) says whether a pc may lie at
// addr; read(addr, buf, n) reads code bytes; caller_match(ret, before) whether the call before ret
// (before: the 8 code bytes ending there) went to the function the unwind is stuck in
// (call_went_to). 0 when none is found within 16 KiB.
//
// A frame holds stale records of calls it made earlier (its locals are not cleared), below its
// own: the first record up from sp was often one of those (a hang report named a destructor
// laggard's NVTX push had called instead of the stuck rank's wait_for_peers(), 1 run in 4 of
// Hang.StuckRankFunctionAndSectionAreNamed under ASan). So the first record whose call provably
// went to the stuck function wins; else the first that cannot be checked (an indirect call);
// else the first at all, as before (a tail call leaves a record of a call to another function).
struct FrameRecord {
  uint64_t at = 0, saved_fp = 0, return_address = 0;
};
enum class CallerMatch : uint8_t { verified, unknown, contradicted };
template <typename IsCode, typename ReadCode, typename Match>
FrameRecord find_frame_record(const StackSnapshot& s, uint64_t sp, IsCode is_code, ReadCode read_code,
                              Match caller_match);

bool follows_call_instruction(const uint8_t* before, int n);  // n bytes ending at a return address
// Where a direct call (x86-64 call rel32) ending at ret goes: 0 when the 8 bytes before ret do not
// end in one.
uint64_t direct_call_target(const uint8_t* before, uint64_t ret);
// The GOT slot a PLT stub at stub jumps through (jmp *slot(%rip), with or without endbr64 and a
// bnd prefix): 0 when the 16 bytes at stub are not such a stub.
uint64_t plt_stub_slot(const uint8_t* code, uint64_t stub);

// Whether the call ending at ret (before: the 8 code bytes ending there) went to callee: directly,
// or through a PLT stub whose GOT slot holds it (the slot is in the caller's file-backed mapping,
// bound by then unless lazily). read(addr, buf, n) reads code bytes.
template <typename ReadCode>
CallerMatch call_went_to(const uint8_t* before, uint64_t ret, uint64_t callee, ReadCode read_code) {
  if (!callee) return CallerMatch::unknown;
  const uint64_t target = direct_call_target(before, ret);
  if (!target) return CallerMatch::unknown;  // an indirect call
  if (target == callee) return CallerMatch::verified;
  uint8_t stub[16], slot_bytes[8];
  uint64_t slot = 0, bound = 0;
  if (!read_code(target, stub, sizeof stub) || !(slot = plt_stub_slot(stub, target))) return CallerMatch::contradicted;
  if (!read_code(slot, slot_bytes, sizeof slot_bytes)) return CallerMatch::unknown;
  __builtin_memcpy(&bound, slot_bytes, sizeof bound);
  return bound == callee ? CallerMatch::verified : CallerMatch::unknown;  // lazy, IFUNC or an alias
}

template <typename IsCode, typename ReadCode, typename Match>
FrameRecord find_frame_record(const StackSnapshot& s, uint64_t sp, IsCode is_code, ReadCode read_code,
                              Match caller_match) {
  constexpr uint64_t kScan = 16 * 1024;
  if (!s.holds(sp, 16)) return {};  // sp comes from an unwind: any value
  const uint64_t lo = s.stack_start;
  FrameRecord unchecked, other;
  for (uint64_t at = (sp + 7) & ~uint64_t{7}; at - sp < kScan && s.holds(at, 16); at += 8) {
    uint64_t saved = 0, ret = 0;
    __builtin_memcpy(&saved, s.stack + (at - lo), 8);
    __builtin_memcpy(&ret, s.stack + (at + 8 - lo), 8);
    if (saved != 0 && (saved <= at || saved - at > (uint64_t{1} << 24) || (saved & 7))) continue;
    if (ret < 8 || !is_code(ret)) continue;
    uint8_t before[8];
    if (!read_code(ret - 8, before, 8) || !follows_call_instruction(before, 8)) continue;
    const FrameRecord r{at, saved, ret};
    switch (caller_match(ret, before)) {
      case CallerMatch::verified: return r;
      case CallerMatch::unknown: if (!unchecked.at) unchecked = r; break;
      case CallerMatch::contradicted: if (!other.at) other = r; break;
    }
  }
  return unchecked.at ? unchecked : other;
}

}  // namespace laggard::watch
