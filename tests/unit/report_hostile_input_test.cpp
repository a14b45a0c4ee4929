// The report side given hostile input (issue 24, items 7 and 8 and the smaller ones): names that
// made std::regex recurse until the stack overflowed, an Nsight Systems "export" whose tables are
// endless views, CSV cells that start formulas in ';' locales, and a hang report naming a FIFO.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <string>

#include "hta_compat.h"
#include "import_nsys.h"
#include "import_rank.h"
#include "render_csv.h"
#include "stacks.h"
#include "temp_dir.h"

namespace laggard::report {
namespace report_hostile_input_test {

const std::string kDigits(40000, '7');

TEST(PlainCodeNotRegex, ProfilerStepNumbers) {
  EXPECT_EQ(profiler_step_number("ProfilerStep#12"), 12);
  EXPECT_EQ(profiler_step_number("ProfilerStep # 7 (fwd)"), 7);
  EXPECT_EQ(profiler_step_number("ProfilerStep#3abc"), 3);
  EXPECT_EQ(profiler_step_number("xProfilerStep#3"), -1);
  EXPECT_EQ(profiler_step_number("ProfilerStep#"), -1);
  EXPECT_EQ(profiler_step_number("ProfilerStep#-3"), -1);
  EXPECT_EQ(profiler_step_number("ProfilerStep#" + kDigits), -1);  // was: rc 139, stack overflow
}

TEST(PlainCodeNotRegex, RankFromFileNames) {
  EXPECT_EQ(rank_from_file_name("/x/trace_rank-12.sqlite"), 12);
  EXPECT_EQ(rank_from_file_name("RANK3.sqlite"), 3);
  EXPECT_EQ(rank_from_file_name("ranked_rank.7.sqlite"), 7);
  EXPECT_EQ(rank_from_file_name("rank_x.sqlite"), -1);
  EXPECT_EQ(rank_from_file_name("rank-" + kDigits), -1);
}

TEST(PlainCodeNotRegex, HtaKernelTypesAsHtasPatterns) {
  EXPECT_EQ(hta_kernel_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            "COMMUNICATION");
  EXPECT_EQ(hta_kernel_type("void at::native::ncclKernel_x()"), "COMMUNICATION");
  EXPECT_EQ(hta_kernel_type("Memcpy HtoD (Pageable -> Device)"), "MEMORY");
  EXPECT_EQ(hta_kernel_type("hipMemset"), "COMMUNICATION");  // ^hip is tested first, as in HTA
  EXPECT_EQ(hta_kernel_type("cudaStreamSynchronize"), "OTHER");
  EXPECT_EQ(hta_kernel_type("cudaLaunchKernel"), "OTHER");
  EXPECT_EQ(hta_kernel_type("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>(Params)"), "COMPUTATION");
  EXPECT_EQ(hta_kernel_type("x\nMemcpy"), "COMPUTATION");  // re.match's '.' stops at a newline
  // Long CUTLASS/Thrust names exist; ~28,000 characters overflowed std::regex's stack.
  EXPECT_EQ(hta_kernel_type("void cutlass::Kernel<" + std::string(60000, 'T') + ">"), "COMPUTATION");
  EXPECT_EQ(hta_kernel_type(std::string(60000, 'a') + "Memcpy"), "OTHER");
}

void make_db(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);
}

TEST(ImportNsysHostile, ARuntimeNameWithAHugeVersionSuffixImports) {
  laggard::testing::TempDir tmp;
  std::string file = (tmp.path / "rank0.sqlite").string();
  std::string sql = "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
                    "INSERT INTO StringIds VALUES (1, 'k'), (2, 'cudaLaunchKernel_v" + kDigits + "');"
                    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId, shortName);"
                    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 200, 1, 1);"
                    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId);"
                    "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (90, 95, 1, 1, 2);";
  make_db(file, sql.c_str());
  ImportedRank r = import_nsys(file);  // was: rc 139 in std::regex_replace
  ASSERT_EQ(r.gpu.size(), 1u);
  EXPECT_EQ(r.gpu[0].api_end_ns - r.gpu[0].api_start_ns, 5);
}

// A 4 KB file whose NVTX_EVENTS is an endless recursive view grew past 1 GB in 40 s.
TEST(ImportNsysHostile, AViewUnderATableNameIsRefusedNotRun) {
  laggard::testing::TempDir tmp;
  std::string file = (tmp.path / "rank0.sqlite").string();
  make_db(file,
          "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId, shortName);"
          "CREATE VIEW NVTX_EVENTS AS WITH RECURSIVE n(start, end, text, globalTid, eventType) AS "
          "(SELECT 0, 1, 'x', 1, 59 UNION ALL SELECT start + 1, end + 1, text || text, globalTid, eventType FROM n) "
          "SELECT * FROM n;");
  auto t0 = std::chrono::steady_clock::now();
  try {
    import_nsys(file);
    ADD_FAILURE() << "imported a view";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'NVTX_EVENTS' is a view"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(CsvCells, SemicolonsAreQuotedSoNoCellStartsAFormula) {
  EXPECT_EQ(csv_text("step;=HYPERLINK(1)"), "\"step;=HYPERLINK(1)\"");
  EXPECT_EQ(csv_text(";@SUM(1)"), "\";@SUM(1)\"");
  EXPECT_EQ(csv_text("=1+1"), "'=1+1");
  EXPECT_EQ(csv_text("plain"), "plain");
}

// `laggard stacks` runs addr2line on the modules a hang report names: a name that is a FIFO by
// the time the report is read blocked open() (and addr2line) for good.
TEST(StacksHostile, AModuleThatIsAFifoIsSkippedNotOpened) {
  laggard::testing::TempDir tmp;
  std::string fifo = (tmp.path / "libtrap.so").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  HangSet set;
  RankHang r;
  r.rank = 0;
  HangThread t;
  t.main = true;
  t.status = "captured";
  HangFrame f;
  f.pc = 0x1234;
  f.module = fifo;
  t.frames.push_back(f);
  r.threads.push_back(t);
  set.ranks.push_back(r);
  symbolize_hangs(set);  // returns (the test would hang here before)
  EXPECT_EQ(set.ranks[0].threads[0].frames[0].line, 0);
}

}  // namespace report_hostile_input_test
}  // namespace laggard::report
