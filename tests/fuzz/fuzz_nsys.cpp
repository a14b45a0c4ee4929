// libFuzzer target: the Nsight Systems SQLite importer (report/import/import_nsys.*). Mutating
// an SQLite file byte by byte tests SQLite, not the importer, so the input is an SQL script
// that builds the export: CREATE TABLE and INSERT statements for the tables nsys writes
// (CUPTI_ACTIVITY_KIND_KERNEL / MEMCPY / MEMSET / RUNTIME, NVTX_EVENTS, StringIds,
// TARGET_INFO_GPU, PROCESSES, TARGET_INFO_SESSION_START_TIME), with any columns, types and
// values. The script runs into a fresh database file (statements after the first error are
// skipped; no ATTACH, no PRAGMA, bounded work), which is then imported; an import that succeeds
// is written as a rank file and reported (fuzz_import.h). Expected outcomes: a
// std::runtime_error naming what is wrong, or a report; anything else is a bug. Seeds:
// corpus/nsys, scripts modelled on the schema of real exports (../shared/traces/nsys, not
// copied).
#include <sqlite3.h>

#include <string>

#include "fuzz_import.h"
#include "import_nsys.h"

namespace {

// The script may build tables and fill them, nothing else: no other database, no settings.
int only_tables_and_rows(void*, int action, const char*, const char*, const char*, const char*) {
  switch (action) {
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
    case SQLITE_PRAGMA:
      return SQLITE_DENY;
    default:
      return SQLITE_OK;
  }
}

// Stops a statement that runs too long (a recursive CTE making millions of rows).
int too_long(void* steps) { return ++*static_cast<int*>(steps) > 2000; }

bool build_export(const std::string& path, const std::string& script) {
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return false;
  }
  sqlite3_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF", nullptr, nullptr, nullptr);
  sqlite3_set_authorizer(db, only_tables_and_rows, nullptr);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1 << 16);
  int steps = 0;
  sqlite3_progress_handler(db, 1000, too_long, &steps);
  sqlite3_exec(db, script.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = (laggard::fuzz::scratch_dir() / "report-rank2.sqlite").string();
  if (!build_export(path, std::string(reinterpret_cast<const char*>(data), size))) return 0;
  laggard::report::ImportedRank r;
  try {
    r = laggard::report::import_nsys(path);
  } catch (const std::runtime_error&) {
    return 0;
  }
  laggard::fuzz::report_imported(r);
  return 0;
}
