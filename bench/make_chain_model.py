#!/usr/bin/env python3
"""Writes a binary ONNX model that is one long chain of unary nodes (Relu by default), for timing
how import, check and conversion scale with the node count. Standard library only: the protobuf
wire format is written by hand, so the script runs where the onnx Python package is not installed.

Usage: bench/make_chain_model.py OUT.onnx [NODES] [OP] [--dead-tail]
  --dead-tail: the graph output is the first node's, so every later node is dead and
  eliminate-dead-nodes erases the chain back to front (how IR erasure scales).
"""
import sys


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def field_bytes(number, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def tensor_value_info(name, dims):
    # ValueInfoProto{name=1, type=2: TypeProto{tensor_type=1: {elem_type=1 (FLOAT), shape=2}}}
    shape = b"".join(field_bytes(1, field_varint(1, d)) for d in dims)
    tensor_type = field_varint(1, 1) + field_bytes(2, shape)
    return field_bytes(1, name) + field_bytes(2, field_bytes(1, tensor_type))


def main():
    dead_tail = "--dead-tail" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--dead-tail"]
    out_path = args[0]
    nodes = int(args[1]) if len(args) > 1 else 100000
    op = args[2] if len(args) > 2 else "Relu"
    graph = bytearray()
    for i in range(nodes):
        src = "x" if i == 0 else ("y" if dead_tail and i == 1 else f"t{i - 1}")
        last = 0 if dead_tail else nodes - 1
        dst = "y" if i == last else f"t{i}"
        # NodeProto{input=1, output=2, name=3, op_type=4}
        node = field_bytes(1, src) + field_bytes(2, dst) + field_bytes(3, f"n{i}") + field_bytes(4, op)
        graph += field_bytes(1, node)
    graph += field_bytes(2, "chain")
    graph += field_bytes(11, tensor_value_info("x", [1, 16]))
    graph += field_bytes(12, tensor_value_info("y", [1, 16]))
    # ModelProto{ir_version=1, producer_name=2, graph=7, opset_import=8: {domain=1, version=2}}
    model = field_varint(1, 8) + field_bytes(2, "make_chain_model") + field_bytes(7, bytes(graph))
    model += field_bytes(8, field_bytes(1, "") + field_varint(2, 17))
    with open(out_path, "wb") as f:
        f.write(model)


if __name__ == "__main__":
    main()
