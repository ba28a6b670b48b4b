"""Make byte-level token files from text: what `make run` trains on.

  python3 examples/gpt/byte_corpus.py OUT_DIR FILE_OR_DIR...

Concatenates the files (a directory's regular files in name order, skipping
fortune's `.dat` indices) and writes each byte as one token id (0..255) to
OUT_DIR/train.u16 and OUT_DIR/eval.u16, uint16 little-endian: zinc-run's
`--data-format=tokens-u16`. Every HELD_OUT-th block of BLOCK bytes goes to
the evaluation file, so both files sample the same text. Only the standard
library: it runs before anything else is installed or built.
"""

import array
import os
import sys

BLOCK = 4096
HELD_OUT = 20


def text_files(paths):
    for path in paths:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                full = os.path.join(path, name)
                if (os.path.isfile(full) and not os.path.islink(full)
                        and not name.endswith(".dat")):
                    yield full
        else:
            yield path


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out_dir, inputs = argv[1], argv[2:]
    try:
        text = b"".join(open(path, "rb").read() for path in text_files(inputs))
    except OSError as e:
        print("byte_corpus: %s: %s" % (e.filename, e.strerror), file=sys.stderr)
        return 1
    if len(text) < 2 * HELD_OUT * BLOCK:
        print("byte_corpus: %d bytes of text in %s: need at least %d"
              % (len(text), " ".join(inputs), 2 * HELD_OUT * BLOCK), file=sys.stderr)
        return 1
    train, held_out = array.array("H"), array.array("H")
    for i, start in enumerate(range(0, len(text), BLOCK)):
        # extend() takes the bytes as an iterable of ints: one id per byte.
        (held_out if i % HELD_OUT == HELD_OUT - 1 else train).extend(text[start:start + BLOCK])
    if sys.byteorder != "little":
        train.byteswap()
        held_out.byteswap()
    os.makedirs(out_dir, exist_ok=True)
    for name, tokens in (("train.u16", train), ("eval.u16", held_out)):
        with open(os.path.join(out_dir, name), "wb") as f:
            tokens.tofile(f)
    print("byte_corpus: %d bytes of text -> %s/train.u16 (%d tokens), eval.u16 (%d tokens)"
          % (len(text), out_dir, len(train), len(held_out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
