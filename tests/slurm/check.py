#!/usr/bin/env python3
"""What laggard wrote under the test's Slurm cluster, read back (tests/slurm/slurm_test.sh).

  check.py runs OUT                        each run directory in OUT and its number of ranks
  check.py windows RUN_DIR RANKS N         exit 0 when RANKS ranks each wrote >= N windows
  check.py report RUN_DIR RANKS R          laggard report: RANKS ranks, rank R the one straggler (backward)
  check.py last-window RUN_DIR RANKS SIG T every rank's last window was kept: written on signal SIG,
                                           or its data reach past T (epoch ns, when SIG was sent)

Rank files are read as `laggard cat` prints them ($TEST_LAGGARD: the laggard executable), binary
frames (the default) and JSON segments alike.
"""
import glob
import json
import os
import re
import subprocess
import sys

# rank00003-<pid>-<image>-seg0000.lgr (docs/schema.md; files from before issue 24 have no image)
SEGMENT = re.compile(r"rank(\d+)-(\d+)-(?:([0-9a-f]{8})-)?seg(\d+)\.(json|lgr)$")


def read_segment(path):
    """The segment as JSON, through `laggard cat` (also of a file being appended to); None if unreadable."""
    r = subprocess.run([os.environ["TEST_LAGGARD"], "cat", path], capture_output=True, text=True)
    try:
        return json.loads(r.stdout) if r.returncode == 0 else None
    except ValueError:
        return None


def last_segments(run_dir):
    """{(rank, pid, image): the JSON of that process image's newest segment}"""
    newest = {}
    for path in glob.glob(os.path.join(run_dir, "rank*")):
        m = SEGMENT.search(os.path.basename(path))
        if not m:
            continue
        key, seg = (int(m.group(1)), int(m.group(2)), m.group(3) or ""), int(m.group(4))
        if key not in newest or newest[key][0] < seg:
            newest[key] = (seg, path)
    out = {}
    for key, (_, path) in newest.items():
        seg = read_segment(path)
        if seg is not None:
            out[key] = seg
    return out


def ranks_of(run_dir):
    return sorted({key[0] for key in last_segments(run_dir)})


def fail(msg):
    print("check.py: " + msg, file=sys.stderr)
    sys.exit(1)


def runs(out):
    for d in sorted(glob.glob(os.path.join(out, "*"))):
        if os.path.isdir(d):
            print(os.path.basename(d), len(ranks_of(d)))


def windows(run_dir, ranks, n):
    segs = last_segments(run_dir)
    have = {rank for (rank, _, _), s in segs.items() if s.get("segment", 0) > 0 or len(s.get("windows", [])) >= int(n)}
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
    # The slowdown is rank 2's alone, so the relative score (against the other ranks) names rank 2
    # and no other; a rank's individual score (against its own other windows) may also dip for a
    # window when this loaded machine stalls one process, and is not checked.
    relative = [s for s in rep["stragglers"] if s["metric"] == "relative" and s["scope"] == "section"]
    named = sorted({s["rank"] for s in relative})
    if named != [int(straggler)] or not any(s["section"] == "backward" for s in relative):
        fail("%s: relative stragglers %s, expected rank %s alone, in backward: %s" %
             (run_dir, named, straggler, rep["stragglers"]))
    print("%s: %s ranks, straggler rank %s (%s)" % (os.path.basename(run_dir), ranks, straggler,
                                                    ", ".join(sorted({s["section"] for s in relative}))))


def last_window(run_dir, ranks, sig, sent_ns):
    """Every rank kept its last window: its last flush was made on signal SIG, or its data reach past
    SENT_NS, when the signal was sent. The second covers a periodic flush that comes after the
    signal's, before the process has died of it (its header then says signal null: seen here in 3
    ranks of 4, 3 ms after the SIGTERM flush), or between the signal being sent and reaching the
    rank. A rank killed without a flush (srun's SIGKILL) ends at its last periodic flush, before."""
    segs = last_segments(run_dir)
    late = {rank: (s.get("signal"), s.get("data_end_ns", 0) - int(sent_ns)) for (rank, _, _), s in segs.items()
            if s.get("signal") != int(sig)}
    if len(segs) != int(ranks) or any(behind < 0 for _, behind in late.values()):
        fail("%s: %d of %s ranks; ranks whose last flush was not on signal %s (signal, ns past the signal): %s" %
             (run_dir, len(segs), ranks, sig, late))
    print("%s: all %s ranks kept their last window (%d written on signal %s, %s by a flush after it was sent)" %
          (os.path.basename(run_dir), ranks, int(ranks) - len(late), sig, len(late) or "none"))


if __name__ == "__main__":
    commands = {"runs": runs, "windows": windows, "report": report, "last-window": last_window}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        fail(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
