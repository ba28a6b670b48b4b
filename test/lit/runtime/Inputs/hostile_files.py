"""Writes files built to hurt a parser: safetensors files with an oversized
header, a shape whose byte count wraps 64 bits, or a header nested deeper
than zinc's JSON bound; and plain JSON nested 100k deep (a --hw file, a
checkpoint manifest). Usage: hostile_files.py KIND OUT"""
import json
import struct
import sys

kind, out = sys.argv[1], sys.argv[2]
deep = "[" * 100000 + "]" * 100000


def safetensors(header_text, data=b""):
    raw = header_text.encode()
    return struct.pack("<Q", len(raw)) + raw + data


if kind == "big-header":
    # A header size just past the 100 MB cap, inside a (sparse) file that
    # holds it: only the cap refuses it.
    size = 100_000_001
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", size))
        f.truncate(8 + size + 8)
elif kind == "wrapping-shape":
    # 2^52 * 512 elements of 4 bytes is 2^73 bytes: wraps to 0, which the
    # empty data_offsets [0, 0] matched.
    header = {"x": {"dtype": "F32", "shape": [2 ** 52, 512], "data_offsets": [0, 0]}}
    open(out, "wb").write(safetensors(json.dumps(header)))
elif kind == "deep-header":
    open(out, "wb").write(safetensors('{"__metadata__": ' + deep + "}"))
elif kind == "deep-json":
    open(out, "w").write('{"name": ' + deep + "}")
else:
    sys.exit("unknown kind " + kind)
