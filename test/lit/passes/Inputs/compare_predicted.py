"""Compares two compile reports of the same model: whether they move the
same bytes over every link, and whether the first's predicted step is
faster than the second's. Usage: compare_predicted.py FIRST.json SECOND.json"""
import json
import sys

first, second = (json.load(open(path)) for path in sys.argv[1:3])
same = first["predicted_transfer_bytes_per_step"] == second["predicted_transfer_bytes_per_step"]
a, b = first["predicted"]["step_seconds"], second["predicted"]["step_seconds"]
print("%s bytes per link; timed step %s (%.6g s against %.6g s)"
      % ("same" if same else "different", "faster" if a < b else "not faster", a, b))
