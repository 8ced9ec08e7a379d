#!/usr/bin/env python3
"""Cosine and mean relative error (kiln compare's definition) of two TensorProto files."""
import math
import struct
import sys


def varint(buf, pos):
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def read_tensor(path):
    """Float values of a float32/float16 TensorProto (raw_data or float_data)."""
    buf = open(path, 'rb').read()
    pos, dtype, raw, floats = 0, 1, None, []
    while pos < len(buf):
        key, pos = varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
            if field == 2:
                dtype = value
        elif wire == 2:
            size, pos = varint(buf, pos)
            chunk = buf[pos:pos + size]
            pos += size
            if field == 9:
                raw = chunk
            elif field == 4:  # packed float_data
                floats += struct.unpack('<%df' % (size // 4), chunk)
            elif field == 5 and dtype == 10:  # float16 values packed in int32_data
                while chunk:
                    v, used = varint(chunk, 0)
                    floats.append(struct.unpack('<e', struct.pack('<H', v & 0xFFFF))[0])
                    chunk = chunk[used:]
        elif wire == 5:
            if field == 4:
                floats.append(struct.unpack('<f', buf[pos:pos + 4])[0])
            pos += 4
        elif wire == 1:
            pos += 8
        else:
            raise ValueError('%s: unexpected wire type %d' % (path, wire))
    if raw is not None:
        code = {1: 'f', 10: 'e'}.get(dtype)
        if code is None:
            raise ValueError('%s: data type %d is not float' % (path, dtype))
        floats = list(struct.unpack('<%d%s' % (len(raw) // struct.calcsize(code), code), raw))
    return floats


def metrics(ref, out):
    dot = norm_ref = norm_out = error_sum = 0.0
    error_count = 0
    for e, a in zip(ref, out):
        diff = abs(a - e)
        dot += e * a
        norm_ref += e * e
        norm_out += a * a
        if diff <= 1e-8 + 1e-5 * abs(e):
            continue
        if abs(e) < 1.1920928955078125e-07:
            if diff > 1e-5:
                error_sum += diff
                error_count += 1
        else:
            error_sum += diff / abs(e)
            error_count += 1
    if norm_ref == 0 and norm_out == 0:
        cosine = 1.0
    elif norm_ref == 0 or norm_out == 0:
        cosine = 0.0
    else:
        cosine = dot / math.sqrt(norm_ref * norm_out)
    return cosine, error_sum / error_count if error_count else 0.0


if __name__ == '__main__':
    reference, candidate = read_tensor(sys.argv[1]), read_tensor(sys.argv[2])
    if len(reference) != len(candidate):
        sys.exit('element counts differ: %d and %d' % (len(reference), len(candidate)))
    print('%.8f %.6g' % metrics(reference, candidate))
