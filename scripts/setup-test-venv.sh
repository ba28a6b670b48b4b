#!/usr/bin/env bash
# Creates the test-only virtualenv the transformers end-to-end tests run in:
# Debian's python3 with its torch, onnx and numpy (--system-site-packages)
# plus the pinned packages of test/e2e/transformers/requirements.txt from
# PyPI. Usage: scripts/setup-test-venv.sh VENV_DIR. Idempotent: a venv whose
# stamp matches the requirements is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:?usage: $0 VENV_DIR}"
req=test/e2e/transformers/requirements.txt
stamp="$venv/.requirements"
if [ -f "$stamp" ] && cmp -s "$stamp" "$req"; then
  exit 0
fi
echo "zinc: creating the test virtualenv $venv (transformers for the e2e tests)..."
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r "$req"
"$venv/bin/python" -c "import transformers, torch; print('zinc: transformers', transformers.__version__, 'with torch', torch.__version__)"
cp "$req" "$stamp"
