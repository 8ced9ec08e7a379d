#!/usr/bin/env python3
"""Checks an .om file the way ATC's readers see it (docs/om_backend.md, "ATC layout").

Usage: om_fidelity.py PROTOC GE_IR_PROTO_DIR FILE.om [--atc-written]

Walks the 256-byte header and the wide partition table, decodes MODEL_DEF with
`protoc --decode=ge.proto.ModelDef`, and checks that every TensorDescriptor (op input/output
descriptors, Const value descriptors) has a `shape` message, scalars included. With --atc-written
(files kiln wrote) it also checks kiln's ATC layout: header platform_version and ModelDef
custom_version "1.11.z.0", each Const's data_offset on a 512-byte boundary from 512, WEIGHTS_DATA a
multiple of 512 bytes, every tensor size padded (a multiple of 32), and the name-index attributes
on every op. Prints one line per problem and "ok: ..." when there are none; exit 1 on problems.
"""
import re
import struct
import subprocess
import sys


def partitions(data):
    magic, headsize = struct.unpack_from("<II", data, 0)
    if magic != 0x444F4D49:
        raise SystemExit("not an IMOD file")
    platform_version = data[160:180].split(b"\0", 1)[0].decode()
    offset = headsize
    num = struct.unpack_from("<I", data, offset)[0]
    entries = []
    for i in range(num):
        ptype = struct.unpack_from("<I", data, offset + 8 + 24 * i)[0]
        size = struct.unpack_from("<Q", data, offset + 8 + 24 * i + 16)[0]
        entries.append((ptype, size))
    at = offset + 8 + 24 * num
    parts = {}
    for ptype, size in entries:
        parts.setdefault(ptype, data[at:at + size])
        at += size
    return platform_version, parts


DESC_FIELDS = ("input_desc", "output_desc", "desc", "td")


def check_shapes(text):
    """Every descriptor block has a direct `shape {` child. Returns (descriptors, missing, scalars)."""
    stack = []  # [name, has_shape, is_scalar_shape]
    total = missing = scalars = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        m = re.match(r"^(\w+) \{$", s)
        if m:
            name = m.group(1)
            if name == "shape" and stack and stack[-1][0] in DESC_FIELDS:
                stack[-1][1] = True
                if i + 1 < len(lines) and lines[i + 1].strip() == "}":
                    scalars += 1
            stack.append([name, False])
            continue
        if s == "}":
            name, has_shape = stack.pop()[:2]
            if name in DESC_FIELDS:
                total += 1
                if not has_shape:
                    missing += 1
    return total, missing, scalars


def main():
    protoc, proto_dir, path = sys.argv[1:4]
    atc_written = "--atc-written" in sys.argv[4:]
    data = open(path, "rb").read()
    platform_version, parts = partitions(data)
    if 0 not in parts:
        raise SystemExit("no MODEL_DEF partition")
    text = subprocess.run([protoc, "--decode=ge.proto.ModelDef", "-I", proto_dir,
                           proto_dir + "/ge_ir.proto"], input=parts[0], capture_output=True,
                          check=True).stdout.decode()
    problems = []
    total, missing, scalars = check_shapes(text)
    if missing:
        problems.append(f"{missing} of {total} tensor descriptors have no shape")
    if atc_written:
        if platform_version != "1.11.z.0":
            problems.append(f"header platform_version is '{platform_version}'")
        if 'custom_version: "1.11.z.0"' not in text:
            problems.append("ModelDef custom_version is not 1.11.z.0")
        offsets = [int(x) for x in re.findall(r"^\s*data_offset: (\d+)$", text, re.M)]
        bad = [o for o in offsets if o < 512 or o % 512]
        if bad:
            problems.append(f"data_offset not on 512-byte boundaries from 512: {bad[:5]}")
        weights = parts.get(1, b"")
        if weights and len(weights) % 512:
            problems.append(f"WEIGHTS_DATA is {len(weights)} bytes, not a multiple of 512")
        sizes = [int(x) for x in re.findall(r"^\s*size: (\d+)$", text, re.M)]
        unpadded = [x for x in sizes if x % 32]
        if unpadded:
            problems.append(f"tensor sizes not padded to 32: {unpadded[:5]}")
        ops = len(re.findall(r"^\s*op \{$", text, re.M))
        keyed = len(re.findall(r'key: "_(input|output)_name_key"', text))
        if ops and keyed == 0:
            problems.append("no op carries _input_name_key / _output_name_key")
    for p in problems:
        print(f"{path}: {p}")
    if not problems:
        print(f"ok: {path}: {total} tensor descriptors with shape ({scalars} scalar)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
