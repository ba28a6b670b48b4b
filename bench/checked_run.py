"""Running a zinc tool from a benchmark: its output, or the benchmark stops
with the tool's command and the end of its stderr."""
import subprocess
import sys


def checked_run(argv, who):
    """Runs argv to completion; on failure exits, naming `who` (the benchmark)."""
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit("%s: %s failed:\n%s" % (who, " ".join(argv), proc.stderr[-2000:]))
    return proc
