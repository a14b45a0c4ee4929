#include "import_nsys.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <strings.h>

#include <charconv>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "reader_values.h"

namespace laggard::report {
namespace {

// What one export may cost SQLite (issue 24: a 4 KB file whose NVTX_EVENTS was an endless
// recursive view grew past 1 GB in 40 s). An export is data, not a program: only its tables are
// read (never a view or a virtual table), its schema is not trusted to run functions, and a
// statement past these limits stops with an error that says so.
constexpr int64_t kMaxSqliteHeap = int64_t{1} << 30;
constexpr int kMaxValueBytes = 64 << 20;

// Called by SQLite every 10,000 virtual-machine steps: stops a statement over the heap limit.
int over_budget(void*) { return sqlite3_memory_used() > kMaxSqliteHeap ? 1 : 0; }

// RAII over a read-only connection.
class Db {
 public:
  explicit Db(const std::string& path) {
    if (!std::filesystem::is_regular_file(path)) throw std::runtime_error("cannot open file");
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw std::runtime_error("not an SQLite database (" + why + ")");
    }
    sqlite3_hard_heap_limit64(kMaxSqliteHeap);
    sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
    sqlite3_limit(db_, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_limit(db_, SQLITE_LIMIT_TRIGGER_DEPTH, 1);
    sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_progress_handler(db_, 10000, over_budget, nullptr);
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

class Stmt {
 public:
  Stmt(const Db& db, const std::string& sql) {
    if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
      std::string why = sqlite3_errmsg(db.get());
      if (why.find("not a database") != std::string::npos) throw std::runtime_error("not an SQLite database (" + why + ")");
      throw std::runtime_error("SQLite error: " + why);
    }
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if (rc == SQLITE_INTERRUPT || rc == SQLITE_NOMEM)
      throw std::runtime_error(fmt::format("SQLite stopped: reading this file needed more than {} MiB of memory",
                                           kMaxSqliteHeap >> 20));
    if (rc == SQLITE_TOOBIG)
      throw std::runtime_error(fmt::format("SQLite stopped: a value in this file is larger than {} MiB",
                                           kMaxValueBytes >> 20));
    throw std::runtime_error(std::string("SQLite error: ") + sqlite3_errstr(rc));
  }
  bool null(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  int64_t i64(int i, int64_t fallback = 0) const { return null(i) ? fallback : sqlite3_column_int64(stmt_, i); }
  std::string text(int i) const {
    const unsigned char* t = sqlite3_column_text(stmt_, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// The file's plain tables. A view or virtual table under a name laggard reads is refused: an
// export has none, and a view can compute without end.
std::set<std::string> tables_of(const Db& db, const std::vector<std::string>& wanted) {
  std::set<std::string> out;
  Stmt s(db, "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view')");
  while (s.step()) {
    std::string type = s.text(0), name = s.text(1), sql = s.text(2);
    bool is_virtual = sql.compare(0, 14, "CREATE VIRTUAL") == 0;
    if (type == "table" && !is_virtual) {
      out.insert(name);
    } else if (std::find(wanted.begin(), wanted.end(), name) != wanted.end()) {
      throw std::runtime_error(fmt::format("'{}' is a {} in this file, not a table: an Nsight Systems export has "
                                           "plain tables only, and laggard does not run views (one may never end)",
                                           name, is_virtual ? "virtual table" : "view"));
    }
  }
  return out;
}

std::set<std::string> columns_of(const Db& db, const std::string& table) {
  std::set<std::string> out;
  Stmt s(db, "SELECT name FROM pragma_table_info('" + table + "')");
  while (s.step()) out.insert(s.text(0));
  return out;
}

// "SELECT a, b, NULL, ... FROM t": columns a version of nsys lacks read as NULL.
std::string select(const Db& db, const std::string& table, const std::vector<std::string>& wanted,
                   const std::string& tail = "") {
  std::set<std::string> have = columns_of(db, table);
  std::string sql = "SELECT ";
  for (size_t i = 0; i < wanted.size(); ++i) sql += (i ? ", " : "") + (have.count(wanted[i]) ? wanted[i] : "NULL");
  return sql + " FROM " + table + " " + tail;
}

// nsys serialises ids: PID = (globalTid >> 24) & 0xFFFFFF, TID = globalTid & 0xFFFFFF.
uint32_t tid_of(int64_t global_tid) { return uint32_t(global_tid & 0xFFFFFF); }
long pid_of(int64_t global_pid) { return long((global_pid >> 24) & 0xFFFFFF); }

class Strings {
 public:
  Strings(const Db& db, bool present) {
    if (!present) return;
    Stmt s(db, "SELECT id, value FROM StringIds");
    while (s.step()) by_id_[s.i64(0)] = s.text(1);
  }
  std::string at(int64_t id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? "" : it->second;
  }

 private:
  std::unordered_map<int64_t, std::string> by_id_;
};

// nsys names runtime calls with their ABI version: "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"
// (the suffix _v\d+$, in plain code: std::regex overflowed the stack on 40,000 digits).
std::string api_name(const std::string& name) {
  size_t v = name.rfind("_v");
  if (v == std::string::npos || v + 2 == name.size()) return name;
  for (size_t i = v + 2; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return name;
  return name.substr(0, v);
}

// A row's start and end (ns since the session start), when they are times: within
// ±kMaxTimeNs, the end not before the start and not more than kMaxDurNs after it. Beyond these
// bounds adding the session start overflows (seen reviewing the importer for fuzz_nsys).
bool sane_times(int64_t start, int64_t end) {
  return start >= -values::kMaxTimeNs && start <= values::kMaxTimeNs && end >= start && end - start <= values::kMaxDurNs;
}

const char* kMemcpyNames[] = {"[memcpy]", "[memcpy HtoD]", "[memcpy DtoH]", "[memcpy HtoA]", "[memcpy AtoH]",
                              "[memcpy AtoA]", "[memcpy AtoD]", "[memcpy DtoA]", "[memcpy DtoD]",
                              "[memcpy HtoH]", "[memcpy PtoP]"};

struct Reader {
  const Db& db;
  const std::set<std::string>& tables;
  const Strings& strings;
  ImportedRank& out;
  int64_t epoch = 0;  // session start (epoch ns): nsys times are ns since it
  std::unordered_map<int64_t, std::vector<size_t>> by_correlation;
  uint64_t bad_times = 0;  // rows left out: their times are not times (sane_times)

  void add(GpuActivity a, int64_t correlation, int64_t global_pid) {
    if (!sane_times(a.start_ns, a.end_ns)) {
      ++bad_times;
      return;
    }
    a.start_ns += epoch;
    a.end_ns += epoch;
    a.correlation = uint32_t(correlation);
    if (!out.pid && global_pid) out.pid = pid_of(global_pid);
    by_correlation[correlation].push_back(out.gpu.size());
    out.gpu.push_back(a);
  }

  void kernels() {
    if (!tables.count("CUPTI_ACTIVITY_KIND_KERNEL")) return;
    Stmt s(db, select(db, "CUPTI_ACTIVITY_KIND_KERNEL",
                      {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "mangledName",
                       "demangledName", "shortName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                       "graphNodeId"}));
    while (s.step()) {
      GpuActivity a;
      a.kind = GpuKind::kernel;
      std::string name;
      for (int col : {6, 7, 8})  // mangled, as laggard's capture records it; the report demangles
        if (name.empty() && !s.null(col)) name = strings.at(s.i64(col));
      if (name.empty()) name = "(unnamed kernel)";
      a.name = out.strings.intern(name);
      a.start_ns = s.i64(0);
      a.end_ns = s.i64(1);
      a.device = int32_t(s.i64(2, -1));
      a.stream = uint32_t(s.i64(3));
      for (int d = 0; d < 3; ++d) {
        a.grid[d] = uint32_t(s.i64(9 + d));
        a.block[d] = uint32_t(s.i64(12 + d));
      }
      a.graph = !s.null(15) && s.i64(15) != 0;
      a.nccl = name.find("ncclDev") != std::string::npos || name.find("ncclKernel") != std::string::npos;
      add(a, s.i64(4), s.i64(5));
    }
  }

  void memory(const std::string& table, GpuKind kind) {
    if (!tables.count(table)) return;
    Stmt s(db, select(db, table, {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes",
                                  kind == GpuKind::memcpy ? "copyKind" : "NULL"}));
    while (s.step()) {
      GpuActivity a;
      a.kind = kind;
      int64_t copy = s.i64(7);
      a.copy_kind = uint8_t(copy >= 0 && copy <= 10 ? copy : 0);
      a.name = out.strings.intern(kind == GpuKind::memset ? "[memset]" : kMemcpyNames[a.copy_kind]);
      a.start_ns = s.i64(0);
      a.end_ns = s.i64(1);
      a.device = int32_t(s.i64(2, -1));
      a.stream = uint32_t(s.i64(3));
      a.bytes = uint64_t(s.i64(6));
      add(a, s.i64(4), s.i64(5));
    }
  }

  void launches() {
    if (!tables.count("CUPTI_ACTIVITY_KIND_RUNTIME")) return;
    Stmt s(db, select(db, "CUPTI_ACTIVITY_KIND_RUNTIME", {"start", "end", "globalTid", "correlationId", "nameId"}));
    while (s.step()) {
      auto it = by_correlation.find(s.i64(3));
      if (it == by_correlation.end()) continue;
      if (!sane_times(s.i64(0), s.i64(1))) {
        ++bad_times;
        continue;
      }
      uint32_t name = s.null(4) ? StringTable::kNone : out.strings.intern(api_name(strings.at(s.i64(4))));
      for (size_t i : it->second) {
        out.gpu[i].api_name = name;
        GpuActivity& a = out.gpu[i];
        a.api_start_ns = s.i64(0) + epoch;
        a.api_end_ns = s.i64(1) + epoch;
        a.api_tid = tid_of(s.i64(2));
      }
    }
  }

  void nvtx_ranges() {
    if (!tables.count("NVTX_EVENTS")) return;
    // Push/pop (59) and start/end (60) ranges; marks and registrations have no end.
    Stmt s(db, select(db, "NVTX_EVENTS", {"start", "end", "text", "textId", "globalTid", "eventType"},
                      "WHERE end IS NOT NULL"));
    while (s.step()) {
      int64_t type = s.i64(5, 59);
      if (type != 59 && type != 60) continue;
      std::string name = s.null(2) ? strings.at(s.i64(3)) : s.text(2);
      if (name.empty()) continue;
      if (!sane_times(s.i64(0), s.i64(1))) {
        ++bad_times;
        continue;
      }
      out.ranges.push_back({out.strings.intern(name), s.i64(0) + epoch, s.i64(1) + epoch, tid_of(s.i64(4))});
    }
  }
};

}  // namespace

// The first "rank" (any case), an optional '-', '_' or '.', then digits: rank[-_.]?(\d+).
int rank_from_file_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  auto digit = [&](size_t i) { return i < name.size() && name[i] >= '0' && name[i] <= '9'; };
  for (size_t at = 0; at + 4 <= name.size(); ++at) {
    if (strncasecmp(name.c_str() + at, "rank", 4) != 0) continue;
    size_t i = at + 4;
    if (!digit(i) && i < name.size() && (name[i] == '-' || name[i] == '_' || name[i] == '.') && digit(i + 1)) ++i;
    if (!digit(i)) continue;
    int rank = -1;
    auto [end, ec] = std::from_chars(name.data() + i, name.data() + name.size(), rank);
    return ec == std::errc() ? rank : -1;
  }
  return -1;
}

void take_rank_from_option_or_name(ImportedRank& r, int option, const std::string& file) {
  r.rank = option;
  r.rank_source = "--rank";
  if (r.rank < 0) {
    r.rank = rank_from_file_name(file);
    r.rank_source = "file name";
  }
}

ImportedRank import_nsys(const std::string& file, const NsysOptions& options) {
  Db db(file);
  std::set<std::string> tables =
      tables_of(db, {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                     "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds", "TARGET_INFO_SESSION_START_TIME",
                     "TARGET_INFO_GPU", "PROCESSES"});
  bool cuda = false;
  for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                        "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"})
    cuda |= tables.count(t) > 0;
  if (!cuda)
    throw std::runtime_error(
        "not an Nsight Systems export: no CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS table (export with "
        "`nsys export --type sqlite` and trace CUDA or NVTX)");

  ImportedRank r;
  r.source = file;
  r.format = "nsys";
  take_rank_from_option_or_name(r, options.rank, file);
  if (r.rank < 0)
    throw std::runtime_error("no rank in the file name (e.g. report-rank3.sqlite); pass --rank N");

  Strings strings(db, tables.count("StringIds") > 0);
  Reader rd{db, tables, strings, r};
  if (tables.count("TARGET_INFO_SESSION_START_TIME")) {
    Stmt s(db, select(db, "TARGET_INFO_SESSION_START_TIME", {"utcEpochNs"}));
    if (s.step()) rd.epoch = s.i64(0);
    if (rd.epoch < 0 || rd.epoch > values::kMaxTimeNs) {
      r.notes.push_back(fmt::format("session start {} ns is not a time: left out", rd.epoch));
      rd.epoch = 0;
    }
  }
  if (!rd.epoch) r.notes.push_back("no session start time: times are ns since the capture started, not epoch");
  rd.kernels();
  rd.memory("CUPTI_ACTIVITY_KIND_MEMCPY", GpuKind::memcpy);
  rd.memory("CUPTI_ACTIVITY_KIND_MEMSET", GpuKind::memset);
  rd.launches();
  rd.nvtx_ranges();
  for (const GpuActivity& a : r.gpu) r.unmatched_correlation += a.api_end_ns == 0;
  if (rd.bad_times)
    r.notes.push_back(fmt::format("{} rows left out: times beyond ±{} ns, or an end before the start or more than "
                                  "{} ns after it", rd.bad_times, values::kMaxTimeNs, values::kMaxDurNs));
  if (tables.count("TARGET_INFO_GPU")) {
    Stmt s(db, select(db, "TARGET_INFO_GPU", {"name"}));
    std::set<std::string> gpus;
    while (s.step()) gpus.insert(s.text(0));
    for (const auto& g : gpus) r.notes.push_back("GPU: " + g);
  }
  if (r.pid && tables.count("PROCESSES")) {
    Stmt s(db, "SELECT name FROM PROCESSES WHERE pid = " + std::to_string(r.pid) + " LIMIT 1");
    if (s.step()) r.notes.push_back("process: " + s.text(0));
  }
  attribute_sections(r);
  return r;
}

}  // namespace laggard::report
