#!/usr/bin/env python3
"""Moves tensors of a text plan (zinc-compile --emit=text) to another tier,
or deletes instructions, resizes byte tensors, changes the files it names,
and re-seals the plan's checksum, so lit tests can hand zinc-run plans the
compiler would not emit.

usage: edit-plan.py IN OUT [--move NAME=TIER:OFFSET]... [--tier TIER:PEAK:ALIGNMENT]...
                           [--capacity TIER=BYTES]... [--delete NAME]... [--resize NAME=BYTES]...
                           [--init-file NAME=PATH]... [--model-path PATH]

--capacity sets the capacity of a tier the plan describes.

--init-file makes tensor NAME's initializer load from the external-data
file PATH; --model-path replaces the model path.

--delete drops the instruction named NAME as if the compiler had never
emitted it: the waits on the events it signalled go too, and the remaining
events are renumbered 0, 1, 2, ... (each still signalled exactly once).
"""
import argparse
import json
import re

M = (1 << 64) - 1
P1, P2, P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P4, P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def _round(acc, lane):
    return (_rotl((acc + lane * P2) & M, 31) * P1) & M


def xxh64(data, seed=0):
    """XXH64, as llvm::xxHash64 computes it (seed 0)."""
    n, i = len(data), 0
    u64 = lambda at: int.from_bytes(data[at:at + 8], "little")
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while i + 32 <= n:
            v = [_round(v[k], u64(i + 8 * k)) for k in range(4)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M
        for lane in v:
            h = ((h ^ _round(0, lane)) * P1 + P4) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, u64(i)), 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ ((int.from_bytes(data[i:i + 4], "little") * P1) & M), 23) * P2 + P3) & M
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * P5) & M), 11) * P1) & M
        i += 1
    h ^= h >> 33
    h = (h * P2) & M
    h ^= h >> 29
    h = (h * P3) & M
    return h ^ (h >> 32)


def delete_instruction(body, name):
    block = re.compile(r'instructions \{\n  name: "%s"\n(?:  .*\n)*?\}\n' % re.escape(name))
    match = block.search(body)
    assert match, "no instruction " + name
    gone = set(int(e) for e in re.findall(r"^  signal_events: (\d+)$", match.group(0), re.M))
    body = body[:match.start()] + body[match.end():]
    body = re.sub(r"^  wait_events: (\d+)\n",
                  lambda m: "" if int(m.group(1)) in gone else m.group(0), body, flags=re.M)
    kept = sorted(set(int(e) for e in re.findall(r"^  signal_events: (\d+)$", body, re.M)))
    renumber = {old: new for new, old in enumerate(kept)}
    body = re.sub(r"^  (wait|signal)_events: (\d+)$",
                  lambda m: "  %s_events: %d" % (m.group(1), renumber[int(m.group(2))]),
                  body, flags=re.M)
    body, count = re.subn(r"^num_events: \d+$", "num_events: %d" % len(kept), body, flags=re.M)
    assert count == 1 or not kept, "no num_events"
    return body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--move", action="append", default=[])
    ap.add_argument("--tier", action="append", default=[])
    ap.add_argument("--capacity", action="append", default=[])
    ap.add_argument("--delete", action="append", default=[])
    ap.add_argument("--resize", action="append", default=[])
    ap.add_argument("--init-file", action="append", default=[])
    ap.add_argument("--model-path")
    args = ap.parse_args()
    text = open(args.input).read()
    version, checksum, body = text.split("\n", 2)
    assert checksum.startswith("# checksum "), "not a text plan"
    assert checksum[len("# checksum "):] == "%x" % xxh64(body.encode()), "checksum"
    for move in args.move:
        name, where = move.split("=")
        tier, offset = where.split(":")
        block = re.compile(r'(tensors \{\n(?:  .*\n)*?  name: "%s"\n)((?:  .*\n)*?)\}' % re.escape(name))
        match = block.search(body)
        assert match, "no tensor " + name
        rest = "".join(l + "\n" for l in match.group(2).splitlines()
                       if not l.startswith(("  offset:", "  tier:")))
        body = (body[:match.start()] + match.group(1) + rest +
                "  tier: %s\n  offset: %s\n}" % (tier, offset) + body[match.end():])
    for name in args.delete:
        body = delete_instruction(body, name)
    for resize in args.resize:
        # A u8[N] tensor (a kernel workspace) becomes u8[BYTES].
        name, size = resize.split("=")
        block = re.compile(r'(tensors \{\n(?:  .*\n)*?  name: "%s"\n)((?:  .*\n)*?)\}' % re.escape(name))
        match = block.search(body)
        assert match, "no tensor " + name
        rest = "".join(l + "\n" for l in match.group(2).splitlines()
                       if not l.startswith(("  shape:", "  size_bytes:")))
        body = (body[:match.start()] + match.group(1) + rest +
                "  shape: %s\n  size_bytes: %s\n}" % (size, size) + body[match.end():])
    for init_file in args.init_file:
        name, path = init_file.split("=", 1)
        block = re.compile(r'(tensors \{\n(?:  .*\n)*?  name: "%s"\n(?:  .*\n)*?  init \{\n)((?:    .*\n)*?)(  \})' % re.escape(name))
        match = block.search(body)
        assert match, "no initializer of tensor " + name
        rest = "".join(l + "\n" for l in match.group(2).splitlines()
                       if not l.startswith("    file:"))
        body = (body[:match.start()] + match.group(1) + rest +
                "    file: %s\n" % json.dumps(path) + match.group(3) + body[match.end():])
    if args.model_path is not None:
        body, count = re.subn(r'^model_path: .*$', lambda m: "model_path: " + json.dumps(args.model_path),
                              body, flags=re.M)
        assert count == 1, "no model_path"
    for capacity in args.capacity:
        name, size = capacity.split("=")
        found = []

        def set_capacity(match):
            block = match.group(0)
            tier = re.search(r"^  tier: (\w+)$", block, flags=re.M)
            # Text format leaves out the default, TIER_GPU.
            if (tier.group(1) if tier else "TIER_GPU") != name:
                return block
            found.append(name)
            block = re.sub(r"^  capacity: .*\n", "", block, flags=re.M)
            return block.replace("tiers {\n", "tiers {\n  capacity: %s\n" % size, 1)

        body = re.sub(r"^tiers \{\n(?:  .*\n)*?\}", set_capacity, body, flags=re.M)
        assert found, "no tier " + name
    for tier in args.tier:
        name, peak, alignment = tier.split(":")
        body = body.rstrip("\n") + "\ntiers {\n  tier: %s\n  peak: %s\n  alignment: %s\n}\n" % (
            name, peak, alignment)
    with open(args.output, "w") as f:
        f.write("%s\n# checksum %x\n%s" % (version, xxh64(body.encode()), body))


if __name__ == "__main__":
    main()
