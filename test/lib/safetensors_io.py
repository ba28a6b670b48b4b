"""Read and write safetensors files with numpy only (test-side helper).

The format: an 8-byte little-endian header length N, N bytes of JSON
(`{name: {"dtype": TAG, "shape": [...], "data_offsets": [begin, end]}, ...}`
plus an optional `"__metadata__": {str: str}`), then the raw little-endian
tensor bytes; offsets are relative to the end of the header.

numpy has no bfloat16, so a bfloat16 tensor is held as its uint16 bit
patterns wrapped in `BF16` (write) and comes back the same way (read).
`float32_to_bf16_bits` / `bf16_bits_to_float32` convert.

    save_file({"x": np.ones((2, 3), np.float32),
               "w": BF16(float32_to_bf16_bits(w))}, "t.safetensors")
    tensors = load_file("t.safetensors")      # {"x": ndarray, "w": BF16}
"""

import json
import struct

import numpy as np

__all__ = [
    "BF16",
    "SafetensorsError",
    "bf16_bits_to_float32",
    "dtype_tag",
    "float32_to_bf16_bits",
    "load",
    "load_file",
    "load_metadata",
    "save",
    "save_file",
    "to_numpy",
]

# Tag -> little-endian numpy dtype. BF16 is stored as uint16 bit patterns.
_TAG_TO_NUMPY = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}

# numpy kind+itemsize -> tag (BF16 never comes from a plain ndarray).
_NUMPY_TO_TAG = {
    ("f", 8): "F64",
    ("f", 4): "F32",
    ("f", 2): "F16",
    ("i", 8): "I64",
    ("i", 4): "I32",
    ("i", 2): "I16",
    ("i", 1): "I8",
    ("u", 8): "U64",
    ("u", 4): "U32",
    ("u", 2): "U16",
    ("u", 1): "U8",
    ("b", 1): "BOOL",
}

# The header is padded with spaces so the data starts 8-byte aligned.
_ALIGN = 8
# Refuse absurd headers instead of allocating them (the Rust crate uses 100MB).
_MAX_HEADER = 100 * 1000 * 1000


class SafetensorsError(ValueError):
    """A malformed file or an unsupported tensor."""


class BF16:
    """A bfloat16 tensor held as its uint16 bit patterns."""

    def __init__(self, bits):
        bits = np.asarray(bits)
        if bits.dtype.kind not in "ui" or bits.dtype.itemsize != 2:
            raise SafetensorsError(
                "BF16 holds 16-bit integer bit patterns, got %s" % bits.dtype)
        self.bits = bits.view(np.uint16)

    @property
    def shape(self):
        return self.bits.shape

    @property
    def dtype(self):
        return "BF16"

    def to_float32(self):
        return bf16_bits_to_float32(self.bits)

    @classmethod
    def from_float32(cls, values):
        return cls(float32_to_bf16_bits(values))

    def __eq__(self, other):
        return (isinstance(other, BF16) and self.bits.shape == other.bits.shape
                and np.array_equal(self.bits, other.bits))

    def __repr__(self):
        return "BF16(shape=%s)" % (list(self.bits.shape),)


def float32_to_bf16_bits(values):
    """Round float32 values to bfloat16 (nearest even), as uint16 bits.

    NaN stays a (quiet) NaN; infinities stay infinities."""
    f = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    bits = rounded.astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        bits = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), bits)
    return bits.astype(np.uint16)


def bf16_bits_to_float32(bits):
    """Exact widening of bfloat16 bit patterns to float32."""
    b = np.ascontiguousarray(np.asarray(bits)).view(np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def dtype_tag(tensor):
    """The safetensors dtype tag of an ndarray or BF16."""
    if isinstance(tensor, BF16):
        return "BF16"
    dt = np.asarray(tensor).dtype
    tag = _NUMPY_TO_TAG.get((dt.kind, dt.itemsize))
    if tag is None:
        raise SafetensorsError("no safetensors dtype for numpy %s" % dt)
    return tag


def to_numpy(tensor):
    """ndarray view of a loaded tensor; BF16 becomes float32 (exact)."""
    if isinstance(tensor, BF16):
        return tensor.to_float32()
    return tensor


def _raw_bytes(tensor, tag):
    if isinstance(tensor, BF16):
        arr = tensor.bits
    else:
        arr = np.asarray(tensor)
    return np.ascontiguousarray(arr, dtype=_TAG_TO_NUMPY[tag]).tobytes()


def save(tensors, metadata=None):
    """Serialise {name: ndarray | BF16} to bytes."""
    entries = []
    for name, tensor in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError("bad tensor name %r" % (name,))
        tag = dtype_tag(tensor)
        shape = [int(d) for d in tensor.shape]
        entries.append((name, tag, shape, _raw_bytes(tensor, tag)))
    # Largest element first, then by name, as the reference implementation
    # does: every tensor starts aligned to its element size.
    entries.sort(key=lambda e: (-_TAG_TO_NUMPY[e[1]].itemsize, e[0]))

    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError("__metadata__ must map str to str")
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, tag, shape, data in entries:
        header[name] = {"dtype": tag, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % _ALIGN)
    return b"".join([struct.pack("<Q", len(text)), text] +
                    [e[3] for e in entries])


def save_file(tensors, path, metadata=None):
    """Write {name: ndarray | BF16} to a safetensors file."""
    data = save(tensors, metadata)
    with open(path, "wb") as f:
        f.write(data)


def _parse_header(buf):
    if len(buf) < 8:
        raise SafetensorsError("file too short for a safetensors header")
    (n,) = struct.unpack("<Q", bytes(buf[:8]))
    if n > _MAX_HEADER or 8 + n > len(buf):
        raise SafetensorsError("header length %d exceeds the file (%d bytes)"
                               % (n, len(buf)))
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise SafetensorsError("header is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    return 8 + n, header


def load(buf):
    """Parse safetensors bytes into {name: ndarray | BF16} (file order)."""
    buf = memoryview(buf)
    start, header = _parse_header(buf)
    body = len(buf) - start
    out = {}
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            tag = info["dtype"]
            shape = [int(d) for d in info["shape"]]
            begin, end = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError("tensor %r: malformed header entry" % name)
        if tag not in _TAG_TO_NUMPY:
            raise SafetensorsError("tensor %r: unsupported dtype %r" % (name, tag))
        if any(d < 0 for d in shape):
            raise SafetensorsError("tensor %r: negative dimension" % name)
        dt = _TAG_TO_NUMPY[tag]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= body:
            raise SafetensorsError("tensor %r: data_offsets [%d, %d] outside "
                                   "the %d data bytes" % (name, begin, end, body))
        if end - begin != count * dt.itemsize:
            raise SafetensorsError("tensor %r: %d bytes for shape %s of %s"
                                   % (name, end - begin, shape, tag))
        spans.append((begin, end, name))
        raw = buf[start + begin:start + end]
        arr = np.frombuffer(raw, dtype=dt, count=count).reshape(shape).copy()
        if tag == "BOOL" and arr.size and arr.view(np.uint8).max() > 1:
            raise SafetensorsError("tensor %r: BOOL byte other than 0/1" % name)
        if arr.dtype.byteorder not in ("=", "|"):
            arr = arr.astype(arr.dtype.newbyteorder("="))
        out[name] = BF16(arr) if tag == "BF16" else arr
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        if begin != pos:
            raise SafetensorsError("tensor %r: data_offsets overlap or leave a "
                                   "hole at byte %d" % (name, pos))
        pos = end
    if pos != body:
        raise SafetensorsError("%d trailing bytes after the last tensor"
                               % (body - pos))
    return out


def load_file(path):
    """Read a safetensors file into {name: ndarray | BF16}."""
    with open(path, "rb") as f:
        return load(f.read())


def load_metadata(path):
    """The `__metadata__` map of a safetensors file ({} when absent)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError("file too short for a safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            raise SafetensorsError("header length %d is absurd" % n)
        _, header = _parse_header(head + f.read(n))
    return dict(header.get("__metadata__", {}))
