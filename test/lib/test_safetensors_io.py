"""Unit tests of safetensors_io: round trips of every dtype and bad files.

Run: cd test/lib && /usr/bin/python3 -m unittest
 or: /usr/bin/python3 -m unittest discover -s test/lib
"""

import json
import os
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402


def _header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return n, json.loads(f.read(n))


def _raw(header_obj, data, pad=True):
    text = json.dumps(header_obj).encode()
    if pad:
        text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


class RoundTripTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "t.safetensors")

    def tearDown(self):
        self.dir.cleanup()

    def roundtrip(self, tensors, metadata=None):
        st.save_file(tensors, self.path, metadata)
        return st.load_file(self.path)

    def test_every_numpy_dtype(self):
        rng = np.random.default_rng(0)
        cases = {
            "F64": rng.standard_normal((2, 3)).astype(np.float64),
            "F32": rng.standard_normal((3, 1, 2)).astype(np.float32),
            "F16": rng.standard_normal((5,)).astype(np.float16),
            "I64": np.array([[-(2 ** 62), 2 ** 62 + 7]], np.int64),
            "I32": np.array([-(2 ** 31), 2 ** 31 - 1, 5], np.int32),
            "I16": np.array([-32768, 32767], np.int16),
            "I8": np.array([[-128], [127]], np.int8),
            "U64": np.array([2 ** 64 - 1, 0], np.uint64),
            "U32": np.array([2 ** 32 - 1], np.uint32),
            "U16": np.array([65535, 1], np.uint16),
            "U8": np.arange(256, dtype=np.uint8).reshape(16, 16),
            "BOOL": np.array([[True, False, True]]),
        }
        tensors = {tag.lower(): arr for tag, arr in cases.items()}
        back = self.roundtrip(tensors)
        self.assertEqual(set(back), set(tensors))
        _, header = _header(self.path)
        for tag, arr in cases.items():
            got = back[tag.lower()]
            self.assertEqual(header[tag.lower()]["dtype"], tag)
            self.assertEqual(got.dtype, arr.dtype, tag)
            self.assertEqual(got.shape, arr.shape, tag)
            np.testing.assert_array_equal(got, arr, err_msg=tag)

    def test_special_floats_bitwise(self):
        x = np.array([np.nan, -np.inf, np.inf, -0.0, 1e-45, 3.4e38], np.float32)
        h = np.array([np.nan, -np.inf, np.inf, -0.0, 6e-8, 65504], np.float16)
        back = self.roundtrip({"x": x, "h": h})
        self.assertEqual(back["x"].tobytes(), x.tobytes())
        self.assertEqual(back["h"].tobytes(), h.tobytes())

    def test_bf16(self):
        values = np.array([[1.0, -2.5, 0.1], [np.inf, -0.0, 65504.0]], np.float32)
        bits = st.float32_to_bf16_bits(values)
        back = self.roundtrip({"w": st.BF16(bits)})
        self.assertIsInstance(back["w"], st.BF16)
        self.assertEqual(back["w"], st.BF16(bits))
        self.assertEqual(back["w"].shape, (2, 3))
        self.assertEqual(_header(self.path)[1]["w"]["dtype"], "BF16")
        # Values that are exact in bf16 survive; 0.1 rounds to nearest even.
        f = back["w"].to_float32()
        np.testing.assert_array_equal(f[0, :2], [1.0, -2.5])
        self.assertEqual(f[0, 2], np.float32(0.10009765625))
        self.assertTrue(np.isinf(f[1, 0]) and f[1, 0] > 0)
        self.assertTrue(np.signbit(f[1, 1]))

    def test_bf16_rounding(self):
        # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0);
        # 1 + 3*2^-8 ties up to 1 + 2^-6; NaN stays NaN.
        v = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, np.nan, 3.4e38], np.float32)
        f = st.bf16_bits_to_float32(st.float32_to_bf16_bits(v))
        self.assertEqual(f[0], 1.0)
        self.assertEqual(f[1], 1 + 2 ** -6)
        self.assertTrue(np.isnan(f[2]))
        self.assertTrue(np.isinf(f[3]))
        self.assertEqual(torch_like_bf16(np.float32(0.1)), 0x3DCD)

    def test_scalar_empty_and_metadata(self):
        tensors = {"s": np.array(3.5, np.float32),
                   "e": np.zeros((0, 4), np.int64),
                   "one": np.array([7], np.int8)}
        back = self.roundtrip(tensors, metadata={"format": "pt"})
        self.assertEqual(back["s"].shape, ())
        self.assertEqual(back["s"], 3.5)
        self.assertEqual(back["e"].shape, (0, 4))
        self.assertEqual(back["e"].dtype, np.int64)
        self.assertEqual(st.load_metadata(self.path), {"format": "pt"})
        self.assertNotIn("__metadata__", back)

    def test_layout(self):
        st.save_file({"a": np.zeros(3, np.int8), "b": np.ones(2, np.float64),
                      "c": np.ones((2, 2), np.float32)}, self.path)
        n, header = _header(self.path)
        self.assertEqual((8 + n) % 8, 0)
        # Larger elements first, contiguous, covering the data exactly.
        self.assertEqual(header["b"]["data_offsets"], [0, 16])
        self.assertEqual(header["c"]["data_offsets"], [16, 32])
        self.assertEqual(header["a"]["data_offsets"], [32, 35])
        self.assertEqual(os.path.getsize(self.path), 8 + n + 35)

    def test_non_contiguous_and_big_endian_input(self):
        a = np.arange(12, dtype=np.float32).reshape(3, 4).T
        b = np.arange(4, dtype=">i4")
        back = self.roundtrip({"a": a, "b": b})
        np.testing.assert_array_equal(back["a"], a)
        np.testing.assert_array_equal(back["b"], b)
        self.assertEqual(back["b"].dtype, np.int32)

    def test_loaded_arrays_are_writable(self):
        back = self.roundtrip({"x": np.zeros(2, np.float32)})
        back["x"][0] = 1.0

    def test_to_numpy(self):
        self.assertEqual(st.to_numpy(st.BF16.from_float32([2.0]))[0], 2.0)
        x = np.ones(2)
        self.assertIs(st.to_numpy(x), x)


def torch_like_bf16(x):
    return int(st.float32_to_bf16_bits(np.array([x], np.float32))[0])


class BadInputTest(unittest.TestCase):
    def check_bad(self, blob, fragment):
        with self.assertRaises(st.SafetensorsError) as cm:
            st.load(blob)
        self.assertIn(fragment, str(cm.exception))

    def test_unsupported_numpy_dtype(self):
        with self.assertRaises(st.SafetensorsError):
            st.save({"c": np.zeros(2, np.complex64)})
        with self.assertRaises(st.SafetensorsError):
            st.BF16(np.zeros(2, np.float32))

    def test_truncated(self):
        self.check_bad(b"\x01\x00", "too short")
        self.check_bad(struct.pack("<Q", 100) + b"{}", "exceeds")

    def test_not_json(self):
        self.check_bad(struct.pack("<Q", 3) + b"{x}", "not JSON")

    def test_size_mismatch(self):
        blob = _raw({"x": {"dtype": "F32", "shape": [2],
                           "data_offsets": [0, 4]}}, b"\0" * 4)
        self.check_bad(blob, "bytes for shape")

    def test_out_of_range(self):
        blob = _raw({"x": {"dtype": "F32", "shape": [2],
                           "data_offsets": [0, 8]}}, b"\0" * 4)
        self.check_bad(blob, "outside")

    def test_hole_and_trailing(self):
        hole = _raw({"x": {"dtype": "U8", "shape": [1],
                           "data_offsets": [1, 2]}}, b"\0" * 2)
        self.check_bad(hole, "hole")
        trailing = _raw({"x": {"dtype": "U8", "shape": [1],
                               "data_offsets": [0, 1]}}, b"\0" * 2)
        self.check_bad(trailing, "trailing")

    def test_unknown_dtype(self):
        blob = _raw({"x": {"dtype": "C64", "shape": [1],
                           "data_offsets": [0, 8]}}, b"\0" * 8)
        self.check_bad(blob, "unsupported dtype")

    def test_bad_bool(self):
        blob = _raw({"x": {"dtype": "BOOL", "shape": [1],
                           "data_offsets": [0, 1]}}, b"\x02")
        self.check_bad(blob, "BOOL")

    def test_reads_unpadded_header(self):
        blob = _raw({"x": {"dtype": "I16", "shape": [2],
                           "data_offsets": [0, 4]}},
                    struct.pack("<2h", -3, 9), pad=False)
        np.testing.assert_array_equal(st.load(blob)["x"], [-3, 9])


class TorchCompatTest(unittest.TestCase):
    """bf16 rounding agrees with torch where torch is installed."""

    def test_matches_torch(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch not installed")
        rng = np.random.default_rng(1)
        x = (rng.standard_normal(10000) * 10.0 ** rng.integers(-30, 30, 10000)
             ).astype(np.float32)
        ours = st.float32_to_bf16_bits(x)
        theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy()
        np.testing.assert_array_equal(ours, theirs.view(np.uint16))


if __name__ == "__main__":
    unittest.main()
