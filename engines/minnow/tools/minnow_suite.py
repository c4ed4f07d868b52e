#!/usr/bin/env python3
"""Run a minnow binary over an EPD suite (ucinewgame before every position)
and report per-position results and totals.

  python3 engines/minnow/tools/minnow_suite.py --engine engines/minnow/minnow \
      --epd suites/ecm.epd --depth 7 [--hash 16] [--limit N] [--jsonl out.jsonl]

"Solved" = the engine's bestmove is one of the EPD `bm` moves and none of its
`am` moves (SAN converted with python-chess: `pip install chess`).
Also sums `info string nullstats` lines (MINNOW_NULL_STATS builds).
"""
import argparse, json, subprocess, sys, time

try:
    import chess
except ImportError:
    sys.exit("python-chess is required: pip install chess")


def parse_epd(line):
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    board, ops = chess.Board.from_epd(line)
    def moves(key):
        v = ops.get(key)
        if v is None:
            return set()
        if not isinstance(v, list):
            v = [v]
        return {m.uci() for m in v}
    return {"line": line, "fen": board.fen(), "id": ops.get("id", ""),
            "bm": moves("bm"), "am": moves("am")}


class Engine:
    def __init__(self, path, hash_mb):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)
        self.send("uci"); self.wait("uciok")
        self.send(f"setoption name Hash value {hash_mb}")
        self.send("isready"); self.wait("readyok")

    def send(self, s):
        self.p.stdin.write(s + "\n"); self.p.stdin.flush()

    def wait(self, prefix):
        lines = []
        while True:
            l = self.p.stdout.readline()
            if not l:
                raise RuntimeError("engine died")
            l = l.strip(); lines.append(l)
            if l.startswith(prefix):
                return lines

    def search(self, fen, go):
        self.send("ucinewgame")
        self.send(f"position fen {fen}")
        self.send(go)
        return self.wait("bestmove")

    def close(self):
        self.send("quit"); self.p.wait(timeout=10)


def kv(line):
    return {k: int(v) for k, v in (t.split("=") for t in line.split()[3:] if "=" in t)}


def run(engine_path, epd, go, hash_mb=16, limit=None, progress=False, start=0):
    recs = [r for r in (parse_epd(l) for l in open(epd)) if r][start:]
    if limit:
        recs = recs[:limit]
    eng = Engine(engine_path, hash_mb)
    results, nullstats = [], {}
    t0 = time.time()
    for i, r in enumerate(recs):
        ts = time.time()
        lines = eng.search(r["fen"], go)
        best = lines[-1].split()[1]
        counters = {}
        for l in lines:
            if l.startswith("info string counters"):
                counters = kv(l)
            elif l.startswith("info string nullstats"):
                d = {k: int(v) for k, v in (t.split("=") for t in l.split()[3:])}
                key = (d["d"], d["g"])
                acc = nullstats.setdefault(key, [0, 0, 0])
                acc[0] += d["tries"]; acc[1] += d["fh"]; acc[2] += d.get("probe_nodes", 0)
        solved = best in r["bm"] if r["bm"] else True
        solved = solved and best not in r["am"]
        res = {"id": r["id"], "line": r["line"], "bestmove": best, "solved": solved,
               "nodes": counters.get("nodes", 0), "counters": counters, "secs": time.time() - ts}
        results.append(res)
        if progress:
            print(f"{i+1:4d} {r['id']:<16} {best:<6} {'ok ' if solved else '-- '} nodes={res['nodes']}",
                  file=sys.stderr)
    eng.close()
    return results, nullstats, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--epd", required=True)
    ap.add_argument("--depth", type=int)
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--hash", type=int, default=16)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--start", type=int, default=0, help="skip this many records first")
    ap.add_argument("--jsonl")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    go = f"go depth {a.depth}" if a.depth else f"go nodes {a.nodes}"
    results, nullstats, secs = run(a.engine, a.epd, go, a.hash, a.limit, a.v, a.start)
    if a.jsonl:
        with open(a.jsonl, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    tot = sum(r["nodes"] for r in results)
    sol = sum(r["solved"] for r in results)
    print(f"positions={len(results)} solved={sol} nodes={tot} secs={secs:.1f} "
          f"null_tried={sum(r['counters'].get('null_tried',0) for r in results)} "
          f"null_skipped={sum(r['counters'].get('null_skipped',0) for r in results)}")


if __name__ == "__main__":
    main()
