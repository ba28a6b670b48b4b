"""The trace-format checker accepts a well-formed trace and names each way
a trace can be malformed."""

import unittest

from trace_format import check_trace


def trace(*events):
    meta = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "compute"}}]
    return {"traceEvents": meta + list(events), "displayTimeUnit": "ms"}


def x(ts, dur, tid=0, name="k"):
    return {"name": name, "ph": "X", "pid": 0, "tid": tid, "ts": ts, "dur": dur}


class TraceFormatTest(unittest.TestCase):
    def test_a_valid_trace_passes(self):
        doc = trace(x(0, 10), x(2, 3), x(10, 5), x(1, 20, tid=1),
                    {"name": "e", "cat": "event", "ph": "s", "id": 7, "pid": 0, "tid": 1, "ts": 21},
                    {"name": "e", "cat": "event", "ph": "f", "bp": "e", "id": 7, "pid": 0,
                     "tid": 0, "ts": 22})
        self.assertEqual(check_trace(doc), [])

    def test_each_defect_is_named(self):
        cases = [
            ([], "not an object with a traceEvents array"),
            (trace({"name": "k", "ph": "Q", "pid": 0, "tid": 0}), "unknown phase"),
            (trace(x(-1, 2)), "ts -1 is not a non-negative number"),
            (trace(x(0, -2)), "dur -2 is not a non-negative number"),
            (trace({"ph": "X", "pid": 0, "tid": 0, "ts": 0, "dur": 1}), "no string name"),
            (trace(dict(x(0, 1), tid="0")), "tid is not an integer"),
            (trace(x(0, 10), x(5, 10)), "without nesting"),
            (trace({"name": "f", "cat": "event", "ph": "f", "id": 3, "pid": 0, "tid": 0,
                    "ts": 1}), "finishes but never starts"),
            (trace({"name": "f", "cat": "c", "ph": "s", "id": 3, "pid": 0, "tid": 0, "ts": 9},
                   {"name": "f", "cat": "c", "ph": "f", "id": 3, "pid": 0, "tid": 1, "ts": 1}),
             "finishes before it starts"),
            (trace({"name": "thread_name", "ph": "M", "pid": 0, "tid": 2, "args": {"name": 5}}),
             "args.name is not a string"),
            (trace({"name": "f", "cat": "c", "ph": "s", "id": 3, "pid": 0, "tid": 0, "ts": 1},
                   {"name": "f", "cat": "c", "ph": "s", "id": 3, "pid": 0, "tid": 0, "ts": 2}),
             "starts twice"),
            (trace({"name": "k", "ph": "X", "pid": 0, "tid": 0, "dur": 1}),
             "ts None is not a non-negative number"),
        ]
        for doc, want in cases:
            problems = check_trace(doc)
            self.assertTrue(any(want in p for p in problems), (want, problems))
        self.assertIn("displayTimeUnit", check_trace(dict(trace(), displayTimeUnit="s"))[0])


if __name__ == "__main__":
    unittest.main()
