#!/usr/bin/env python3
"""Select suites/ecm_confident_quick.epd and suites/ecm_hard_quick.epd.

Rule: build minnow with its default knobs (make, no DEFINES), Hash 16; for
each ECM position in file order: `ucinewgame`, `position fen ...`,
`go depth 7`. Solved = bestmove is one of the EPD `bm` moves and none of its
`am` moves. confident = the first 90 solved, hard = the first 90 unsolved
(original EPD lines, in file order).

  pip install chess
  python3 engines/minnow/tools/select_quick_suites.py
"""
import argparse, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SUITES = os.path.normpath(os.path.join(ROOT, "..", "..", "suites"))
sys.path.insert(0, HERE)
import minnow_suite  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=7)
    ap.add_argument("--count", type=int, default=90)
    ap.add_argument("--hash", type=int, default=16)
    ap.add_argument("--engine", help="use this binary instead of building the default one")
    a = ap.parse_args()
    ecm = os.path.join(SUITES, "ecm.epd")
    with tempfile.TemporaryDirectory() as tmp:
        exe = a.engine
        if not exe:
            exe = os.path.join(tmp, "minnow")
            subprocess.run(["make", "-s", "-C", ROOT, f"OUT={exe}"], check=True)
        eng = minnow_suite.Engine(exe, a.hash)
        solved, unsolved = [], []
        for n, line in enumerate(open(ecm), 1):
            rec = minnow_suite.parse_epd(line)
            if not rec:
                continue
            best = eng.search(rec["fen"], f"go depth {a.depth}")[-1].split()[1]
            ok = (not rec["bm"] or best in rec["bm"]) and best not in rec["am"]
            (solved if ok else unsolved).append(rec["line"])
            if len(solved) >= a.count and len(unsolved) >= a.count:
                break
        eng.close()
    if len(solved) < a.count or len(unsolved) < a.count:
        sys.exit(f"not enough positions: {len(solved)} solved, {len(unsolved)} unsolved")
    for name, lines in (("ecm_confident_quick.epd", solved), ("ecm_hard_quick.epd", unsolved)):
        with open(os.path.join(SUITES, name), "w") as f:
            f.write("\n".join(lines[:a.count]) + "\n")
    print(f"scanned {n} ECM records: {len(solved)} solved, {len(unsolved)} unsolved; "
          f"wrote the first {a.count} of each", file=sys.stderr)


if __name__ == "__main__":
    main()
