// Runs on the watchdog thread only (see remote_unwind.h).
#include "remote_unwind.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "fork_gate.h"

#ifdef LAGGARD_HAVE_LIBUNWIND
#include <libunwind.h>
#endif

namespace laggard::watch {

// ---- the frame-record scan (architecture only, no libunwind) ----

namespace {

// Bytes a ModRM (plus SIB and displacement) take after an 0xFF opcode, or 0 when unknown.
int modrm_length(uint8_t modrm, uint8_t next) {
  int mod = modrm >> 6, rm = modrm & 7;
  int sib = rm == 4 && mod != 3 ? 1 : 0;
  if (mod == 3) return 1;
  if (mod == 0) {
    if (rm == 5) return 1 + 4;                       // disp32(%rip)
    if (sib && (next & 7) == 5) return 1 + 1 + 4;    // SIB without base: disp32
    return 1 + sib;
  }
  return 1 + sib + (mod == 1 ? 1 : 4);
}

}  // namespace

bool follows_call_instruction(const uint8_t* b, int n) {
#if defined(__x86_64__)
  if (n < 8) return false;
  if (b[n - 5] == 0xE8) return true;  // call rel32
  for (int len = 2; len <= 7; ++len) {  // call *r/m64: FF /2
    int at = n - len;
    if (b[at] != 0xFF || ((b[at + 1] >> 3) & 7) != 2) continue;
    if (1 + modrm_length(b[at + 1], at + 2 < n ? b[at + 2] : 0) == len) return true;
  }
  return false;
#elif defined(__aarch64__)
  if (n < 4) return false;
  uint32_t insn = 0;
  std::memcpy(&insn, b + n - 4, 4);
  return (insn & 0xFC000000u) == 0x94000000u      // BL
         || (insn & 0xFFFFFC1Fu) == 0xD63F0000u   // BLR
         || (insn & 0xFEFFF800u) == 0xD63F0800u;  // BLRAA/BLRAB(Z) (pointer authentication)
#else
  (void)b;
  (void)n;
  return false;
#endif
}

uint64_t direct_call_target(const uint8_t* b, uint64_t ret) {
#if defined(__x86_64__)
  if (b[3] != 0xE8) return 0;
  int32_t rel = 0;
  std::memcpy(&rel, b + 4, 4);
  return ret + static_cast<uint64_t>(static_cast<int64_t>(rel));
#else
  (void)b;
  (void)ret;
  return 0;
#endif
}

uint64_t plt_stub_slot(const uint8_t* c, uint64_t stub) {
#if defined(__x86_64__)
  int at = 0;
  if (c[0] == 0xF3 && c[1] == 0x0F && c[2] == 0x1E && c[3] == 0xFA) at = 4;  // endbr64 (.plt.sec with IBT)
  if (c[at] == 0xF2) ++at;                                                  // bnd
  if (c[at] != 0xFF || c[at + 1] != 0x25) return 0;                         // jmp *disp32(%rip)
  int32_t disp = 0;
  std::memcpy(&disp, c + at + 2, 4);
  return stub + static_cast<uint64_t>(at + 6) + static_cast<uint64_t>(static_cast<int64_t>(disp));
#else
  (void)c;
  (void)stub;
  return 0;
#endif
}

// ---- the modules, from /proc/self/maps ----

namespace {

constexpr uint8_t kPeOmit = 0xff, kPeSdata4 = 0x0b, kPeUdata4 = 0x03, kPeUdata8 = 0x04, kPeSdata8 = 0x0c;
constexpr uint8_t kPeDatarelSdata4 = 0x3b;  // the only table encoding libunwind's search accepts

int encoded_size(uint8_t enc) {
  if (enc == kPeOmit) return 0;
  switch (enc & 0x0f) {
    case kPeUdata4:
    case kPeSdata4: return 4;
    case kPeUdata8:
    case kPeSdata8: return 8;
    default: return -1;
  }
}

// The .eh_frame_hdr search table of the ELF image mapped at base (read from memory).
void find_eh_frame_hdr(Module& m) {
  Elf64_Ehdr eh{};
  if (!read_memory(&eh, m.base, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      eh.e_phnum > 256)
    return;
  Elf64_Phdr ph[256];
  if (!read_memory(ph, m.base + eh.e_phoff, eh.e_phnum * sizeof(Elf64_Phdr))) return;
  uint64_t first_vaddr = UINT64_MAX, hdr_vaddr = 0;
  for (int i = 0; i < eh.e_phnum; ++i) {
    if (ph[i].p_type == PT_LOAD) first_vaddr = std::min(first_vaddr, ph[i].p_vaddr & ~uint64_t{0xfff});
    if (ph[i].p_type == PT_GNU_EH_FRAME) hdr_vaddr = ph[i].p_vaddr;
  }
  if (first_vaddr == UINT64_MAX || hdr_vaddr == 0) return;
  uint64_t hdr = m.base - first_vaddr + hdr_vaddr;
  uint8_t head[4];
  if (!read_memory(head, hdr, 4) || head[0] != 1 || head[3] != kPeDatarelSdata4) return;
  int ptr_size = encoded_size(head[1]), count_size = encoded_size(head[2]);
  if (ptr_size < 0 || count_size <= 0) return;
  uint64_t count = 0;
  if (!read_memory(&count, hdr + 4 + ptr_size, static_cast<size_t>(count_size))) return;
  if (count == 0) return;
  m.eh_hdr = hdr;
  m.fde_table = hdr + 4 + ptr_size + count_size;
  m.fde_count = count;
}

}  // namespace

void ModuleMap::read() {
  modules_.clear();
  ranges_.clear();
  std::ifstream in("/proc/self/maps");
  std::map<std::string, int> index;
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long start = 0, end = 0, offset = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset, &path_at) < 4)
      continue;
    if (path_at <= 0 || static_cast<size_t>(path_at) >= line.size()) continue;
    std::string path = line.substr(static_cast<size_t>(path_at));
    bool vdso = path == "[vdso]";
    if (path[0] != '/' && !vdso) continue;
    if (perms[0] != 'r') continue;
    auto [it, added] = index.emplace(path, static_cast<int>(modules_.size()));
    if (added) {
      modules_.push_back(Module{});
      modules_.back().path = path;
      modules_.back().base = start - offset;
    }
    Module& m = modules_[static_cast<size_t>(it->second)];
    if (offset == 0) m.base = start;  // the ELF header's mapping is the load address
    if (perms[2] == 'x') {
      m.text_lo = m.text_lo ? std::min<uint64_t>(m.text_lo, start) : start;
      m.text_hi = std::max<uint64_t>(m.text_hi, end);
    }
    ranges_.push_back(Range{start, end, it->second});
  }
  for (Module& m : modules_)
    if (m.text_hi) find_eh_frame_hdr(m);
  std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
}

const Module* ModuleMap::module_of(uint64_t pc) const {
  for (const Module& m : modules_)
    if (pc >= m.text_lo && pc < m.text_hi) return &m;
  return nullptr;
}

bool ModuleMap::mapped_from_file(uint64_t addr, size_t len) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), addr, [](uint64_t a, const Range& r) { return a < r.start; });
  if (it == ranges_.begin()) return false;
  --it;
  return addr >= it->start && addr < it->end && len <= it->end - addr;
}

// ---- libunwind's remote API ----

#ifdef LAGGARD_HAVE_LIBUNWIND

#if defined(__x86_64__)
#define LAGGARD_UNW_ARCH "x86_64"
#elif defined(__aarch64__)
#define LAGGARD_UNW_ARCH "aarch64"
#else
#define LAGGARD_UNW_ARCH "unknown"
#endif

struct RemoteUnwinder::Impl {
  // libunwind-<arch>.so.8's entry points (the "_U<arch>_" names behind its unw_* macros).
  unw_addr_space_t (*create_addr_space)(unw_accessors_t*, int) = nullptr;
  int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t) = nullptr;
  int (*init_remote)(unw_cursor_t*, unw_addr_space_t, void*) = nullptr;
  int (*step)(unw_cursor_t*) = nullptr;
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*) = nullptr;
  int (*search_table)(unw_addr_space_t, unw_word_t, unw_dyn_info_t*, unw_proc_info_t*, int, void*) = nullptr;
  void (*destroy_addr_space)(unw_addr_space_t) = nullptr;
  unw_addr_space_t as = nullptr;
  ~Impl() {
    if (as && destroy_addr_space) destroy_addr_space(as);
  }
  // Accessors as libunwind copies them: room for fields a newer libunwind may add at the end.
  void* accessors[32] = {};

  // Pages of code and unwind tables read this report (they do not change while it is built).
  struct Page {
    uint64_t number = ~uint64_t{0};
    uint8_t bytes[4096];
  };
  Page cache[16];
  const ModuleMap* map = nullptr;

  bool read_code(uint64_t addr, void* out, size_t len) {
    uint8_t* to = static_cast<uint8_t*>(out);
    while (len > 0) {
      uint64_t number = addr >> 12, off = addr & 0xfff;
      size_t chunk = std::min<size_t>(len, 4096 - off);
      Page& p = cache[number & 15];
      if (p.number != number) {
        if (!map || !map->mapped_from_file(number << 12, 4096) || !read_memory(p.bytes, number << 12, 4096)) {
          p.number = ~uint64_t{0};
          return false;
        }
        p.number = number;
      }
      std::memcpy(to, p.bytes + off, chunk);
      to += chunk;
      addr += chunk;
      len -= chunk;
    }
    return true;
  }
};

namespace {

// What one unwind reads: the snapshot (its registers may be replaced by a frame record's).
struct Frame0 {
  RemoteUnwinder::Impl* impl;
  const StackSnapshot* snap;
  uint64_t regs[kRegCount > 0 ? kRegCount : 1];
  uint64_t known;
};

int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info, void* arg) {
  auto* f = static_cast<Frame0*>(arg);
  const Module* m = f->impl->map ? f->impl->map->module_of(ip) : nullptr;
  if (!m || !m->eh_hdr) return -UNW_ENOINFO;
  unw_dyn_info_t di;
  std::memset(&di, 0, sizeof di);
  di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
  di.start_ip = m->text_lo;
  di.end_ip = m->text_hi;
  di.u.rti.name_ptr = 0;
  di.u.rti.segbase = m->eh_hdr;
  di.u.rti.table_data = m->fde_table;
  di.u.rti.table_len = m->fde_count * 8 / sizeof(unw_word_t);  // entries of two int32s
  return f->impl->search_table(as, ip, &di, pi, need_unwind_info, arg);
}

// libunwind frees table-format unwind info itself (dwarf/Gparser.c, put_unwind_info): nothing
// here was allocated for it (as perf's accessor).
void put_unwind_info(unw_addr_space_t, unw_proc_info_t*, void*) {}

int get_dyn_info_list_addr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

int access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  auto* f = static_cast<Frame0*>(arg);
  const StackSnapshot& s = *f->snap;
  // Addresses come from the thread's registers and stack: any value, up to 2^64 - 1.
  if (s.holds(addr, sizeof *val)) {
    std::memcpy(val, s.stack + (addr - s.stack_start), sizeof *val);
    return 0;
  }
  // Only file-backed memory is read live: stack and heap may have changed since the copy.
  return f->impl->read_code(addr, val, sizeof *val) ? 0 : -UNW_EINVAL;
}

int access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
  auto* f = static_cast<Frame0*>(arg);
  if (write || reg < 0 || reg >= kRegCount || !(f->known >> reg & 1)) return -UNW_EBADREG;
  *val = f->regs[reg];
  return 0;
}

int access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) { return -UNW_EBADREG; }
int resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }
int get_proc_name(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

template <typename F>
bool bind(void* lib, const char* name, F** out) {
  *out = reinterpret_cast<F*>(dlsym(lib, name));
  return *out != nullptr;
}

}  // namespace

RemoteUnwinder::RemoteUnwinder() = default;
RemoteUnwinder::~RemoteUnwinder() = default;  // Impl destroys the address space

bool RemoteUnwinder::loaded() const { return impl_ && impl_->as; }

std::string RemoteUnwinder::load(const std::string& library) {
  const std::string file = "libunwind-" LAGGARD_UNW_ARCH ".so.8";
  size_t slash = library.rfind('/');
  std::string path = slash == std::string::npos ? file : library.substr(0, slash + 1) + file;
  void* lib = load_library(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return path + " not found (install libunwind8)";
  auto impl = std::make_unique<Impl>();
  const std::string u = "_U" LAGGARD_UNW_ARCH "_";
  if (!bind(lib, (u + "create_addr_space").c_str(), &impl->create_addr_space) ||
      !bind(lib, (u + "set_caching_policy").c_str(), &impl->set_caching_policy) ||
      !bind(lib, (u + "init_remote").c_str(), &impl->init_remote) || !bind(lib, (u + "step").c_str(), &impl->step) ||
      !bind(lib, (u + "get_reg").c_str(), &impl->get_reg) ||
      !bind(lib, (u + "destroy_addr_space").c_str(), &impl->destroy_addr_space) ||
      !bind(lib, (u + "dwarf_search_unwind_table").c_str(), &impl->search_table))
    return path + " lacks libunwind's remote API (need libunwind >= 1.3)";
  unw_accessors_t acc{};
  acc.find_proc_info = find_proc_info;
  acc.put_unwind_info = put_unwind_info;
  acc.get_dyn_info_list_addr = get_dyn_info_list_addr;
  acc.access_mem = access_mem;
  acc.access_reg = access_reg;
  acc.access_fpreg = access_fpreg;
  acc.resume = resume;
  acc.get_proc_name = get_proc_name;
  static_assert(sizeof acc <= sizeof impl->accessors);
  std::memcpy(impl->accessors, &acc, sizeof acc);
  impl->as = impl->create_addr_space(reinterpret_cast<unw_accessors_t*>(impl->accessors), 0);
  if (!impl->as) return path + ": unw_create_addr_space failed";
  impl->set_caching_policy(impl->as, UNW_CACHE_NONE);  // modules come and go between reports
  impl_ = std::move(impl);
  return "";
}

void RemoteUnwinder::refresh() {
  map_.read();
  if (!impl_) return;
  impl_->map = &map_;
  for (auto& p : impl_->cache) p.number = ~uint64_t{0};
}

namespace {
// The start of the function holding pc, from its module's unwind table (0: not found).
uint64_t function_start(Frame0& f, uint64_t pc) {
  unw_proc_info_t pi;
  std::memset(&pi, 0, sizeof pi);
  return find_proc_info(f.impl->as, pc, &pi, 0, &f) == 0 ? pi.start_ip : 0;
}
}  // namespace

int RemoteUnwinder::unwind(const StackSnapshot& s, uint64_t* pcs, int max) {
  if (!loaded() || max <= 0 || !s.has(kRegPc) || !s.has(kRegSp)) return 0;
  Impl& u = *impl_;
  Frame0 f{&u, &s, {}, s.known};
  std::memcpy(f.regs, s.regs, sizeof f.regs);
  int n = 0;
  uint64_t first_pc = 0;  // after a frame record: the return address the cursor starts just before
  for (int restart = 0; restart < 8 && n < max; ++restart) {
    unw_cursor_t c;
    if (u.init_remote(&c, u.as, &f) != 0) break;
    int rc = 0;
    do {
      unw_word_t ip = 0;
      if (u.get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0) return n;
      pcs[n++] = first_pc ? first_pc : ip;
      first_pc = 0;
      rc = n < max ? u.step(&c) : 0;
    } while (rc > 0 && n < max);
    if (rc == 0 || n >= max) break;
    // DWARF needs a register the snapshot lacks (a frame-pointer frame without %rbp): go on
    // from this frame's record on the stack.
    unw_word_t sp = 0;
    if (u.get_reg(&c, UNW_REG_SP, &sp) != 0) break;
    const uint64_t stuck_in = function_start(f, n == 1 ? pcs[0] : pcs[n - 1] - 1);
    auto read = [&](uint64_t at, uint8_t* buf, size_t len) { return u.read_code(at, buf, len); };
    FrameRecord r = find_frame_record(
        s, sp, [&](uint64_t pc) { return map_.module_of(pc) != nullptr; }, read,
        [&](uint64_t ret, const uint8_t* before) { return call_went_to(before, ret, stuck_in, read); });
    if (!r.at) break;
    f.known = 0;
    f.regs[kRegFp] = r.saved_fp;
    f.regs[kRegSp] = r.at + 16;
    f.regs[kRegPc] = r.return_address - 1;  // inside the call, so the caller's own unwind row is used
    f.known = uint64_t{1} << kRegFp | uint64_t{1} << kRegSp | uint64_t{1} << kRegPc;
    first_pc = r.return_address;
  }
  return n;
}

#else  // no libunwind headers at build time

struct RemoteUnwinder::Impl {};
RemoteUnwinder::RemoteUnwinder() = default;
RemoteUnwinder::~RemoteUnwinder() = default;
bool RemoteUnwinder::loaded() const { return false; }
std::string RemoteUnwinder::load(const std::string&) { return "laggard was built without libunwind headers"; }
void RemoteUnwinder::refresh() { map_.read(); }
int RemoteUnwinder::unwind(const StackSnapshot&, uint64_t*, int) { return 0; }

#endif

}  // namespace laggard::watch
