#!/bin/sh
# Makes the bench-only virtualenv with ONNX Runtime Training (CPU build, from
# PyPI), the second baseline of bench/train_nanogpt.py. It sees Debian's
# packages (--system-site-packages): onnxruntime.training imports torch.
#   sh bench/setup_ort.sh [DIR]      (default /var/tmp/zinc-ort-venv)
# then: bench/train_nanogpt.py --ort-python DIR/bin/python
set -eu
dir=${1:-/var/tmp/zinc-ort-venv}
/usr/bin/python3 -m venv --system-site-packages "$dir"
"$dir/bin/pip" install -q onnxruntime-training==1.19.2
"$dir/bin/python" -c "import onnxruntime.training.api; print('onnxruntime-training ready:', '$dir/bin/python')"
