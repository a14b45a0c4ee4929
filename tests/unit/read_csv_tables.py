#!/usr/bin/env python3
"""Reads every CSV table `laggard report --format csv -o DIR` wrote, as a user would: with
pandas (Debian's python3-pandas) when it is installed, else with Python's csv module. Checks
that each file has its header and rectangular rows, and that the hostile names of the test run
(render_outputs_test.cpp) come back as text, guarded against formula injection. Exit 1 on failure."""
import csv
import glob
import os
import sys


def read_with_pandas(path):
    import pandas as pd
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    return list(frame.columns), frame.to_dict("records")


def read_with_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    for row in body:
        if len(row) != len(header):
            raise ValueError(f"{path}: a row of {len(row)} cells under a header of {len(header)}")
    return header, [dict(zip(header, row)) for row in body]


def main(directory):
    try:
        import pandas  # noqa: F401
        reader, how = read_with_pandas, "pandas " + pandas.__version__
    except ImportError:
        reader, how = read_with_csv, "python csv module (python3-pandas not installed)"
    tables = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.csv"))):
        tables[os.path.basename(path)[:-4]] = reader(path)
    print(f"read {len(tables)} tables with {how}")
    header, rows = tables["rank_sections"]
    assert header[:3] == ["rank", "host", "section"], header
    hosts = {r["host"] for r in rows}
    assert hosts == {"'=cmd|' /C calc'!A0"}, hosts
    sections = {r["section"] for r in rows}
    assert 'back,"ward"\nx' in sections, sections
    if how.startswith("pandas"):  # with pandas' own type inference, numbers come back as numbers
        import pandas as pd
        frame = pd.read_csv(os.path.join(directory, "rank_sections.csv"))
        assert str(frame["rank"].dtype) == "int64", frame.dtypes
        assert str(frame["relative_score"].dtype) == "float64", frame.dtypes
    header, rows = tables["stragglers"]
    assert any(r["rank"] == "2" for r in rows), rows
    for name, (header, rows) in tables.items():
        assert header, name
        print(f"  {name}: {len(rows)} rows, {len(header)} columns")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
