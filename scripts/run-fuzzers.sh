#!/usr/bin/env bash
# Runs zinc's libFuzzer targets (fuzz/): each first replays its regression
# inputs (fuzz/regressions/<target>/: every crash fuzzing ever found), then
# fuzzes for SECONDS from its seed corpus (fuzz/corpus/<target>/), growing a
# scratch corpus so the repository's stays as it is. A crash, a leak, an
# input slower than 25 s or over 2 GiB of memory fails the run; the input
# that did it is kept in BUILD/fuzz-artifacts/ and named. The mutations
# follow FUZZ_SEED (default 1), so that a run CI passed passes again and one
# it failed fails again; FUZZ_SEED=0 draws a new seed each run (libFuzzer's
# default), for exploring.
# Usage: [FUZZ_SEED=N] scripts/run-fuzzers.sh [BUILD (build-fuzz)] [SECONDS (60)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build-fuzz}" && pwd)
seconds=${2:-60}
targets=(onnx-binary onnx-text plan safetensors hw-json checkpoint-manifest)
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/zinc-fuzz-corpus-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

failed=()
for target in "${targets[@]}"; do
  bin="$build/zinc-fuzz-$target"
  if [ ! -x "$bin" ]; then
    echo "zinc-fuzz: $bin is not built (make fuzz builds it)" >&2
    exit 1
  fi
  log="$build/fuzz-$target.log"
  : >"$log"
  options=(-timeout=25 -rss_limit_mb=2048 "-seed=${FUZZ_SEED:-1}" "-artifact_prefix=$artifacts/$target-")
  regressions=("$root/fuzz/regressions/$target"/*)
  if [ -e "${regressions[0]}" ]; then
    if ! "$bin" "${options[@]}" "${regressions[@]}" >>"$log" 2>&1; then
      echo "zinc-fuzz: $target: a regression input fails again (see $log)" >&2
      tail -n 30 "$log" >&2
      failed+=("$target")
      continue
    fi
  fi
  mkdir -p "$scratch/$target"
  if "$bin" "${options[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      "$scratch/$target" "$root/fuzz/corpus/$target" >>"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    echo "zinc-fuzz: $target: ${seconds}s, ${runs:-?} inputs, no failure"
  else
    echo "zinc-fuzz: $target: FAILED (log: $log)" >&2
    grep -E 'ERROR|SUMMARY|Test unit written' "$log" >&2 || tail -n 30 "$log" >&2
    failed+=("$target")
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "zinc-fuzz: failing targets: ${failed[*]}; each input that failed is in $artifacts/:" \
       "add it to fuzz/regressions/<target>/ with the fix, and a test of the diagnostic" >&2
  exit 1
fi
