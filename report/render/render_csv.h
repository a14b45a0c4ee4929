// `laggard report --format csv -o DIR`: the report's tables as CSV files, one per table, for
// people who continue in pandas or a spreadsheet (issue 15). Every row, never cut to --top.
// RFC 4180 text (comma separated, CRLF-free: rows end with "\n", which pandas and Python's csv
// module read; fields with a comma, quote or line break are quoted, quotes doubled), a header
// row, numbers unquoted with empty cells for "no value" (NaN in pandas).
//
// Names come from trace files and are untrusted: a text cell that starts with = + - @ tab, CR
// or NUL gets a leading single quote, as OWASP recommends against formula injection (OWASP
// "CSV Injection" page; ASVS 5.0 requirement 1.2.10), so a section named "=HYPERLINK(...)"
// stays text in Excel, LibreOffice and Google Sheets.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analyses.h"
#include "model.h"
#include "scores.h"

namespace laggard::report {

struct CsvTable {
  std::string name;                 // file name without ".csv"
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // cells already written with csv_text / csv_number
  std::string str() const;          // the whole file
};

// A text cell from untrusted input: formula-injection guard, then RFC 4180 quoting.
std::string csv_text(std::string_view s);
// A number cell; NaN and infinities give an empty cell.
std::string csv_number(double x);

// Every table of the report, in the order the text report shows them, after a `run` table of
// key/value rows saying what they cover (cut: describe_cut's text, "" when none).
std::vector<CsvTable> render_csv(const RunModel& model, const ScoreReport& scores, const Analyses& analyses,
                                 const std::string& cut = "");

// Writes DIR/<name>.csv for each table (creating DIR); returns "" or what went wrong.
std::string write_csv_tables(const std::vector<CsvTable>& tables, const std::string& dir);

}  // namespace laggard::report
