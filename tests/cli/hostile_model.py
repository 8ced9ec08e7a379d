#!/usr/bin/env python3
"""Writes a one-node ONNX model (x[1,4] -> OP -> y, float) whose node name, op type or value
names hold hostile bytes: forged log lines, terminal escapes, invalid UTF-8, 10 MB names.
Encodes the protobuf by hand so the tests need no onnx package.

usage: hostile_model.py OUT.onnx [--name TEXT] [--op TYPE] [--input NAME] [--output NAME]
                        [--graph NAME]
TEXT, TYPE and NAME take Python escapes (\\n, \\x1b, \\xff); "huge:N:C" is N bytes of C."""
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, payload):  # length-delimited field
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def number_field(number, value):
    return varint(number << 3) + varint(value)


def decode(text):
    if text.startswith("huge:"):
        _, count, char = text.split(":", 2)
        return char.encode() * int(count)
    # Python escapes to the bytes they stand for (\xff stays one byte, not U+00FF's two).
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")


def value_info(name):
    dims = field(1, number_field(1, 1)) + field(1, number_field(1, 4))
    tensor = number_field(1, 1) + field(2, dims)  # FLOAT, [1,4]
    return field(1, name) + field(2, field(1, tensor))


def main(argv):
    out = argv[1]
    options = {"--name": "n", "--op": "Relu", "--input": "x", "--output": "y", "--graph": "g"}
    rest = argv[2:]
    for flag, value in zip(rest[::2], rest[1::2]):
        options[flag] = value
    name, op = decode(options["--name"]), decode(options["--op"])
    x, y = decode(options["--input"]), decode(options["--output"])
    node = field(1, x) + field(2, y) + field(3, name) + field(4, op)
    graph = field(1, node) + field(2, decode(options["--graph"])) + field(11, value_info(x)) + field(12, value_info(y))
    opset = field(1, b"") + number_field(2, 17)
    model = number_field(1, 8) + field(8, opset) + field(7, graph)
    with open(out, "wb") as f:
        f.write(model)


if __name__ == "__main__":
    main(sys.argv)
