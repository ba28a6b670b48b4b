"""Checks a JSON document against the Chrome trace event format (the JSON
object form that Perfetto and chrome://tracing load), as zinc writes it:
zinc-dump --format=trace (predicted) and zinc-run --trace (measured).

check_trace(doc) returns a list of problems, empty when the trace is valid:
  - the document is an object with a "traceEvents" array; displayTimeUnit,
    when present, is "ms" or "ns";
  - every event has a known phase "ph", integer pid and tid, and a string
    name; timed events have a finite, non-negative numeric "ts";
  - complete events ("X") have a non-negative "dur", and those of one
    thread nest (a trace viewer draws a thread's events as a stack: two
    that overlap without one containing the other are drawn wrongly);
  - metadata events ("M") are process_name, thread_name (args.name a
    string) or *_sort_index (args.sort_index an integer);
  - flow events ("s", "t", "f") have an id; an id starts and finishes at
    most once, every id that finishes also starts, no later than it
    finishes; "bp", when present, is "e".
"""

import math

PHASES = set("BEXiIbneMsStTfPOCDRNapcr(),=") | {"M"}
TIMED = set("BEXiIbnsStfPOCpR")
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index",
            "process_labels"}


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_trace(doc):
    problems = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not an object with a traceEvents array"]
    if "displayTimeUnit" in doc and doc["displayTimeUnit"] not in ("ms", "ns"):
        problems.append("displayTimeUnit %r is not ms or ns" % doc["displayTimeUnit"])
    by_thread = {}
    flow_start, flow_finish = {}, {}
    for n, e in enumerate(doc["traceEvents"]):
        where = "event %d (%r)" % (n, e.get("name") if isinstance(e, dict) else e)
        if not isinstance(e, dict):
            problems.append(where + ": not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            problems.append(where + ": unknown phase %r" % ph)
            continue
        if not isinstance(e.get("name"), str):
            problems.append(where + ": no string name")
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), int) or isinstance(e.get(key), bool):
                problems.append(where + ": %s is not an integer" % key)
        if ph in TIMED and not (_number(e.get("ts")) and e["ts"] >= 0):
            problems.append(where + ": ts %r is not a non-negative number" % e.get("ts"))
        if ph == "X":
            if not (_number(e.get("dur")) and e["dur"] >= 0):
                problems.append(where + ": dur %r is not a non-negative number" % e.get("dur"))
            elif _number(e.get("ts")):
                by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(
                    (e["ts"], e["ts"] + e["dur"], where))
        if ph == "M":
            args = e.get("args")
            if e.get("name") not in METADATA or not isinstance(args, dict):
                problems.append(where + ": unknown metadata or no args")
            elif e["name"].endswith("_name") and not isinstance(args.get("name"), str):
                problems.append(where + ": args.name is not a string")
            elif e["name"].endswith("_sort_index") and not isinstance(args.get("sort_index"), int):
                problems.append(where + ": args.sort_index is not an integer")
        if ph in ("s", "t", "f"):
            if "id" not in e:
                problems.append(where + ": flow event without an id")
                continue
            if e.get("bp", "e") != "e":
                problems.append(where + ": bp %r is not 'e'" % e.get("bp"))
            key = (e.get("cat"), e["id"])
            if ph in ("s", "f"):
                seen = flow_start if ph == "s" else flow_finish
                if key in seen:
                    problems.append(where + ": flow id %r %s twice" % (
                        key, "starts" if ph == "s" else "finishes"))
                seen[key] = (e.get("ts"), where)
    for key, (ts, where) in flow_finish.items():
        if key not in flow_start:
            problems.append(where + ": flow id %r finishes but never starts" % (key,))
        elif _number(ts) and _number(flow_start[key][0]) and flow_start[key][0] > ts + 1e-6:
            problems.append(where + ": flow id %r finishes before it starts" % (key,))
    # Within a thread, complete events nest. Compared to a nanosecond (the
    # traces' resolution), so back-to-back events may share an endpoint.
    for thread, spans in by_thread.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, where in spans:
            while stack and stack[-1][1] <= start + 1e-3:
                stack.pop()
            if stack and end > stack[-1][1] + 1e-3:
                problems.append("%s overlaps %s on thread %r without nesting"
                                % (where, stack[-1][2], thread))
            stack.append((start, end, where))
    return problems
