#!/usr/bin/env python3
"""The outcome of each test of a `python3 -m unittest -v` log, as JSON on
stdout: scripts/cuda-device-check.sh's record of a stage that runs tests.

  unittest-summary.py LOG EXIT
"""
import json
import re
import sys

text = open(sys.argv[1]).read()
tests = {}
for m in re.finditer(r"^(test_\w+) \(([\w.]+)\)(?:\n.*?)?(?: \.\.\. )(ok|FAIL|ERROR|skipped.*)$",
                     text, re.M):
    # Python 3.11 and later put the whole id in the parentheses.
    name = m.group(2) if m.group(2).endswith("." + m.group(1)) else "%s.%s" % (
        m.group(2), m.group(1))
    tests[name] = m.group(3)
ran = re.findall(r"^Ran (\d+) tests?", text, re.M)
json.dump({"exit": int(sys.argv[2]), "ran": int(ran[-1]) if ran else None, "tests": tests},
          sys.stdout, indent=1)
print()
