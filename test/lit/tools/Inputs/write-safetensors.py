"""Writes a safetensors file of zeros: write-safetensors.py OUT NAME:DTYPE:D0,D1 ..."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "lib"))
import safetensors_io  # noqa: E402

DTYPES = {"f32": np.float32, "i64": np.int64, "f16": np.float16}
tensors = {}
for spec in sys.argv[2:]:
    name, dtype, dims = spec.split(":")
    tensors[name] = np.zeros([int(d) for d in dims.split(",")], dtype=DTYPES[dtype])
safetensors_io.save_file(tensors, sys.argv[1])
