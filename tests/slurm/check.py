#!/usr/bin/env python3
"""What laggard wrote under the test's Slurm cluster, read back (tests/slurm/slurm_test.sh).

  check.py runs OUT                        each run directory in OUT and its number of ranks
  check.py windows RUN_DIR RANKS N         exit 0 when RANKS ranks each wrote >= N windows
  check.py report RUN_DIR RANKS R          laggard report: RANKS ranks, the straggler is rank R alone
  check.py signal RUN_DIR RANKS SIG        every rank's last flush was made on signal SIG

Rank files are read as `laggard cat` prints them ($TEST_LAGGARD: the laggard executable), binary
frames (the default) and JSON segments alike.
"""
import glob
import json
import os
import re
import subprocess
import sys

SEGMENT = re.compile(r"rank(\d+)-(\d+)-seg(\d+)\.(json|lgr)$")


def read_segment(path):
    """The segment as JSON, through `laggard cat` (also of a file being appended to); None if unreadable."""
    r = subprocess.run([os.environ["TEST_LAGGARD"], "cat", path], capture_output=True, text=True)
    try:
        return json.loads(r.stdout) if r.returncode == 0 else None
    except ValueError:
        return None


def last_segments(run_dir):
    """{(rank, pid): the JSON of that process's newest segment}"""
    newest = {}
    for path in glob.glob(os.path.join(run_dir, "rank*")):
        m = SEGMENT.search(os.path.basename(path))
        if not m:
            continue
        key, seg = (int(m.group(1)), int(m.group(2))), int(m.group(3))
        if key not in newest or newest[key][0] < seg:
            newest[key] = (seg, path)
    out = {}
    for key, (_, path) in newest.items():
        seg = read_segment(path)
        if seg is not None:
            out[key] = seg
    return out


def ranks_of(run_dir):
    return sorted({rank for rank, _ in last_segments(run_dir)})


def fail(msg):
    print("check.py: " + msg, file=sys.stderr)
    sys.exit(1)


def runs(out):
    for d in sorted(glob.glob(os.path.join(out, "*"))):
        if os.path.isdir(d):
            print(os.path.basename(d), len(ranks_of(d)))


def windows(run_dir, ranks, n):
    segs = last_segments(run_dir)
    have = {rank for (rank, _), s in segs.items() if s.get("segment", 0) > 0 or len(s.get("windows", [])) >= int(n)}
    sys.exit(0 if len(have) >= int(ranks) else 1)


def report(run_dir, ranks, straggler):
    r = subprocess.run([os.environ["TEST_LAGGARD"], "report", run_dir, "--format", "json"], capture_output=True, text=True)
    if r.returncode != 0:
        fail("laggard report %s: exit %d: %s" % (run_dir, r.returncode, r.stderr))
    rep = json.loads(r.stdout)
    got = sorted(x["rank"] for x in rep["ranks"])
    if got != list(range(int(ranks))):
        fail("%s: ranks %s, expected 0..%d" % (run_dir, got, int(ranks) - 1))
    bad = [p for p in rep.get("problems", []) if p.get("kind") in ("duplicate_rank", "foreign_run", "missing_rank")]
    if bad:
        fail("%s: problems %s" % (run_dir, bad))
    named = sorted({s["rank"] for s in rep["stragglers"]})
    if named != [int(straggler)]:
        fail("%s: stragglers %s, expected rank %s alone: %s" % (run_dir, named, straggler, rep["stragglers"]))
    print("%s: %s ranks, straggler rank %s (%s)" % (os.path.basename(run_dir), ranks, straggler,
                                                    ", ".join(sorted({s["section"] for s in rep["stragglers"]}))))


def signal(run_dir, ranks, sig):
    segs = last_segments(run_dir)
    got = {rank: s.get("signal") for (rank, _), s in segs.items()}
    if len(got) != int(ranks) or any(v != int(sig) for v in got.values()):
        fail("%s: signal of each rank's last flush %s, expected %s for %s ranks" % (run_dir, got, sig, ranks))
    print("%s: the last window of all %s ranks was written on signal %s" % (os.path.basename(run_dir), ranks, sig))


if __name__ == "__main__":
    commands = {"runs": runs, "windows": windows, "report": report, "signal": signal}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        fail(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
