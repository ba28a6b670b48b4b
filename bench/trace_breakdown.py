"""Per-op time of a zinc-run --trace: where a training step goes.

Sums the trace's complete events ("ph": "X") by category (the op type) over
the last --steps steps of the trace (a step starts again at the first
instruction's name), and prints each op's share of the compute stream's busy
time, its total milliseconds per step and its count per step.

Run: /usr/bin/python3 bench/trace_breakdown.py TRACE.json [--steps 1] [--json]
"""

import argparse
import collections
import json
import sys


def breakdown(events, steps):
    compute = [e for e in events if e.get("ph") == "X" and e.get("tid", 0) == 0]
    if not compute:
        return None, 0
    compute.sort(key=lambda e: e["ts"])
    first = compute[0]["name"]
    starts = [i for i, e in enumerate(compute) if e["name"] == first]
    steps = min(steps, len(starts))
    window = compute[starts[-steps]:]
    ms, count = collections.Counter(), collections.Counter()
    for e in window:
        ms[e.get("cat", e["name"])] += e["dur"] / 1000.0 / steps
        count[e.get("cat", e["name"])] += 1.0 / steps
    total = sum(ms.values())
    rows = [{"op": op, "ms_per_step": ms[op], "share": ms[op] / total,
             "count_per_step": round(count[op])} for op in sorted(ms, key=ms.get, reverse=True)]
    return rows, total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--steps", type=int, default=1, help="the last N steps of the trace")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with open(args.trace) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    rows, total = breakdown(events, args.steps)
    if rows is None:
        sys.exit("%s: no compute-stream events" % args.trace)
    if args.json:
        print(json.dumps({"compute_ms_per_step": total, "ops": rows}, indent=1))
        return 0
    print("compute stream: %.1f ms per step" % total)
    print("%-34s %8s %7s %6s" % ("op", "ms/step", "share", "count"))
    for r in rows:
        print("%-34s %8.1f %6.1f%% %6d" % (r["op"], r["ms_per_step"], 100 * r["share"],
                                          r["count_per_step"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
