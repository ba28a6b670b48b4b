#!/usr/bin/env bash
# Makes the bench-only virtualenv with DeepSpeed 0.19.8's CPU ops (cpu_adam,
# async_io), the baseline of `make bench-nvme` and `make bench-adam`
# (bench/deepspeed_ops.py). It sees Debian's torch 1.13 (--system-site-packages)
# and JIT-builds the ops once, here, so a benchmark never times a build.
#   bash bench/setup_deepspeed.sh [DIR]      (default /var/tmp/zinc-ds-venv)
# then: bench/nvme_io.py --ds-python DIR/bin/python   (make bench-nvme DS_VENV=DIR)
# About 4 minutes on 2 cores the first time; seconds after.
set -euo pipefail
dir=${1:-/var/tmp/zinc-ds-venv}
here=$(cd "$(dirname "$0")" && pwd)

# DeepSpeed's JIT builds need torch's C++ headers (libtorch-dev, pybind11-dev),
# ninja and libaio's header.
pkgs="python3-torch python3-numpy python3-psutil python3-dev python3-venv g++ ninja-build libaio-dev libtorch-dev pybind11-dev"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup_deepspeed.sh: apt-get install$missing" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs
fi

[ -x "$dir/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$dir"
pip="$dir/bin/pip --disable-pip-version-check"
# DeepSpeed's runtime dependencies other than torch, numpy and psutil (Debian's).
$pip install -q einops==0.8.2 hjson==3.1.0 msgpack==1.2.4 packaging==26.3 py-cpuinfo==9.0.0 \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  typing-extensions==4.16.0 tqdm==4.70.1 ninja==1.13.2
# An sdist only; --no-deps: it asks for torch >= 2 and we keep Debian's 1.13;
# DS_BUILD_OPS=0: the ops are JIT-built below.
if ! "$dir/bin/python" -c "import importlib.metadata as m; assert m.version('deepspeed') == '0.19.8'" 2>/dev/null; then
  DS_BUILD_OPS=0 $pip install -q --no-deps --no-build-isolation deepspeed==0.19.8
fi
# torch < 2.1 compiles extensions with -std=c++14 and DeepSpeed's C++ needs
# C++17; GCC takes the last -std flag. deepspeed_ops.py uses this as CXX.
cat > "$dir/bin/g++-std17" <<'WRAP'
#!/bin/sh
exec /usr/bin/g++ "$@" -std=c++17
WRAP
chmod +x "$dir/bin/g++-std17"

# Build (or find built) both ops on a small run, which is also a smoke test.
MAX_JOBS=${MAX_JOBS:-2} "$dir/bin/python" "$here/deepspeed_ops.py" adam --params 1048576 --warmup 1 --steps 2 >/dev/null
MAX_JOBS=${MAX_JOBS:-2} "$dir/bin/python" "$here/deepspeed_ops.py" aio --dir /var/tmp --size $((16 << 20)) --warmup 0 --loops 1 >/dev/null
echo "setup_deepspeed.sh: DeepSpeed ops ready: $dir/bin/python" >&2
