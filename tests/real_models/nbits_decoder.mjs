// A synthetic decoder step with 4-bit MatMulNBits weights (the layout ONNX Runtime GenAI exports
// Qwen2-class models in), written with its weights as ONNX external data, and ONNX Runtime's
// logits for it; seeded, so every run writes the same bytes.
//
// Usage:
//   node nbits_decoder.mjs write DIR [--layers 28 --hidden 1536 --heads 12 --kv-heads 2 --mlp 8960
//        --vocab 151936 --block 32 --seq 1 --seed 1 --lm-block N --accuracy-level 0 --dq 0]
//     (--dq 1: projections as opset-21 DequantizeLinear of blocked int4 codes + MatMul)
//     DIR/model.onnx + DIR/model.onnx.data (external weights) + DIR/hidden.pb (the step's input)
//   node nbits_decoder.mjs ort DIR NODE_MODULES [THREADS [OPTIMIZATION]] → DIR/ort_logits.pb
//   node nbits_decoder.mjs compare A.pb B.pb [MIN_COSINE MAX_ABS] → prints max abs diff and cosine;
//     exits 1 when cosine < MIN_COSINE or max abs diff > MAX_ABS (when given)
//   node nbits_decoder.mjs tobin T.pb T.bin | frombin T.bin LIKE.pb T.pb  (raw float32 for msrun)
//
// The graph, per layer: RMSNorm → q/k/v MatMulNBits (q with MatMulNBits' bias input) → grouped-query
// attention over the step's tokens (no KV cache, no mask) → o MatMulNBits → residual; RMSNorm →
// gate/up MatMulNBits (up with packed uint8 zero points) → gate·sigmoid(gate)·up → down → residual;
// then a final RMSNorm and the lm_head MatMulNBits (block --lm-block, default --block) to logits.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { encodeFloatTensor, decodeFloatTensor } from './models.mjs';

// ---- protobuf wire format (the few ONNX messages written here)
function varint(n) {
  const out = [];
  let v = typeof n === 'bigint' ? n : BigInt(n);
  if (v < 0n) v += 1n << 64n;
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    out.push(byte);
  } while (v);
  return Buffer.from(out);
}
const key = (field, wire) => varint((field << 3) | wire);
const int = (field, v) => Buffer.concat([key(field, 0), varint(v)]);
const bytes = (field, b) => Buffer.concat([key(field, 2), varint(b.length), b]);
const str = (field, s) => bytes(field, Buffer.from(s, 'utf8'));
const msg = (field, parts) => bytes(field, Buffer.concat(parts));
function float32(field, v) {
  const b = Buffer.alloc(4);
  b.writeFloatLE(v);
  return Buffer.concat([key(field, 5), b]);
}

const FLOAT = 1, UINT8 = 2, INT64 = 7, INT4 = 22;
// AttributeProto: name 1, f 2, i 3, ints 8, type 20 (FLOAT 1, INT 2, INTS 7).
const attrInt = (name, v) => msg(5, [str(1, name), int(3, v), int(20, 2)]);
const attrFloat = (name, v) => msg(5, [str(1, name), float32(2, v), int(20, 1)]);
const attrInts = (name, vs) => msg(5, [str(1, name), ...vs.map((v) => int(8, v)), int(20, 7)]);
// NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7.
function node(op, inputs, outputs, name, attrs = [], domain = '') {
  const parts = [...inputs.map((i) => str(1, i)), ...outputs.map((o) => str(2, o)), str(3, name),
    str(4, op), ...attrs];
  if (domain) parts.push(str(7, domain));
  return msg(1, parts);
}
// ValueInfoProto with a tensor type (TypeProto.tensor_type 1: elem_type 1, shape 2 → dim 1).
function valueInfo(field, name, elemType, dims) {
  const shape = dims.map((d) => msg(1, [int(1, d)]));
  return msg(field, [str(1, name), msg(2, [msg(1, [int(1, elemType), msg(2, shape)])])]);
}

// ---- seeded data (mulberry32)
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function parseOptions(args) {
  const o = { layers: 28, hidden: 1536, heads: 12, 'kv-heads': 2, mlp: 8960, vocab: 151936,
    block: 32, seq: 1, seed: 1, 'lm-block': 0, 'accuracy-level': 0, dq: 0 };
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i].replace(/^--/, '');
    if (!(name in o)) throw new Error(`unknown option ${args[i]}`);
    o[name] = Number(args[i + 1]);
  }
  return o;
}

// Writes the model. Weights go to DIR/model.onnx.data as they are made (one tensor in memory at a
// time, in chunks for the big ones), so a 1.5B-parameter model needs little memory to write.
function write(dir, o) {
  fs.mkdirSync(dir, { recursive: true });
  const dataName = 'model.onnx.data';
  const dataFd = fs.openSync(path.join(dir, dataName), 'w');
  let dataOffset = 0;
  const random = rng(o.seed);
  const initializers = [], nodes = [];
  let params = 0;
  // TensorProto: dims 1, data_type 2, name 8, raw_data 9, external_data 13, data_location 14.
  function external(name, dims, type, fill, byteLength) {
    const chunk = 1 << 24;
    for (let at = 0; at < byteLength; at += chunk) {
      const b = Buffer.alloc(Math.min(chunk, byteLength - at));
      fill(b, at);
      fs.writeSync(dataFd, b);
    }
    const entry = (k, v) => msg(13, [str(1, k), str(2, String(v))]);
    initializers.push(msg(5, [...dims.map((d) => int(1, d)), int(2, type), str(8, name),
      entry('location', dataName), entry('offset', dataOffset), entry('length', byteLength),
      int(14, 1)]));
    dataOffset += byteLength;
  }
  function inline(name, dims, type, b) {
    initializers.push(msg(5, [...dims.map((d) => int(1, d)), int(2, type), str(8, name), bytes(9, b)]));
  }
  const floats = (n, f) => {
    const b = Buffer.alloc(n * 4);
    for (let i = 0; i < n; i++) b.writeFloatLE(f(i), i * 4);
    return b;
  };
  const ints64 = (vs) => {
    const b = Buffer.alloc(vs.length * 8);
    vs.forEach((v, i) => b.writeBigInt64LE(BigInt(v), i * 8));
    return b;
  };
  // A MatMulNBits projection [.., k] → [.., n]: random 4-bit codes, scales near 0.2/sqrt(k) (so
  // activations keep their size layer after layer), optional packed zero points and bias.
  function projection(name, x, y, k, n, block, options = {}) {
    if (o.dq) return dequantizeProjection(name, x, y, k, n, block, options);
    const { zeroPoints = false, bias = false } = options;
    const blocks = Math.ceil(k / block), blob = block / 2;
    params += k * n;
    external(`${name}.qweight`, [n, blocks, blob], UINT8, (b) => {
      for (let i = 0; i < b.length; i++) b[i] = (random() * 256) | 0;
    }, n * blocks * blob);
    const scale = 0.2 / Math.sqrt(k);
    external(`${name}.scales`, [n * blocks], FLOAT, (b) => {
      for (let i = 0; i < b.length; i += 4) b.writeFloatLE(scale * (0.5 + random()), i);
    }, n * blocks * 4);
    const inputs = [x, `${name}.qweight`, `${name}.scales`];
    if (zeroPoints) {
      const rowBytes = Math.ceil(blocks / 2);
      const zp = Buffer.alloc(n * rowBytes);
      for (let i = 0; i < zp.length; i++)
        zp[i] = (6 + ((random() * 5) | 0)) | ((6 + ((random() * 5) | 0)) << 4);
      inline(`${name}.zero_points`, [n * rowBytes], UINT8, zp);
      inputs.push(`${name}.zero_points`);
    }
    if (bias) {
      while (inputs.length < 5) inputs.push('');
      inline(`${name}.bias`, [n], FLOAT, floats(n, () => (random() - 0.5) * 0.2));
      inputs.push(`${name}.bias`);
    }
    nodes.push(node('MatMulNBits', inputs, [y], name, [attrInt('K', k), attrInt('N', n),
      attrInt('bits', 4), attrInt('block_size', block), attrInt('accuracy_level', o['accuracy-level'])],
    'com.microsoft'));
  }
  // --dq 1: the same projection as ONNX (opset 21) DequantizeLinear of int4 codes [k, n] blocked
  // along k, then MatMul (and Add for the bias): the other way 4-bit weights reach kiln.
  function dequantizeProjection(name, x, y, k, n, block, { zeroPoints = false, bias = false } = {}) {
    const blocks = Math.ceil(k / block);
    params += k * n;
    external(`${name}.qweight`, [k, n], INT4, (b) => {
      for (let i = 0; i < b.length; i++) b[i] = (random() * 256) | 0;
    }, Math.ceil(k * n / 2));
    const scale = 0.2 / Math.sqrt(k);
    external(`${name}.scales`, [blocks, n], FLOAT, (b) => {
      for (let i = 0; i < b.length; i += 4) b.writeFloatLE(scale * (0.5 + random()), i);
    }, blocks * n * 4);
    const inputs = [`${name}.qweight`, `${name}.scales`];
    if (zeroPoints) {
      const zp = Buffer.alloc(Math.ceil(blocks * n / 2));
      for (let i = 0; i < zp.length; i++)
        zp[i] = (((random() * 5) | 0) - 2 & 15) | ((((random() * 5) | 0) - 2 & 15) << 4);
      inline(`${name}.zero_points`, [blocks, n], INT4, zp);
      inputs.push(`${name}.zero_points`);
    }
    nodes.push(node('DequantizeLinear', inputs, [`${name}.weight`], `${name}.dequantize`,
      [attrInt('axis', 0), attrInt('block_size', block)]));
    nodes.push(node('MatMul', [x, `${name}.weight`], [bias ? `${name}.mm` : y], name));
    if (bias) {
      inline(`${name}.bias`, [n], FLOAT, floats(n, () => (random() - 0.5) * 0.2));
      nodes.push(node('Add', [`${name}.mm`, `${name}.bias`], [y], `${name}.bias_add`));
    }
  }
  function rmsNorm(name, x, y) {
    inline(`${name}.weight`, [o.hidden], FLOAT, floats(o.hidden, () => 0.8 + 0.4 * random()));
    params += o.hidden;
    nodes.push(node('Mul', [x, x], [`${name}.sq`], `${name}.sq`));
    // Opset 18 moved ReduceMean's axes from an attribute to an input (--dq models are opset 21).
    nodes.push(o.dq ? node('ReduceMean', [`${name}.sq`, 'reduce_axes'], [`${name}.ms`], `${name}.mean`)
      : node('ReduceMean', [`${name}.sq`], [`${name}.ms`], `${name}.mean`, [attrInts('axes', [-1])]));
    nodes.push(node('Add', [`${name}.ms`, 'eps'], [`${name}.var`], `${name}.add_eps`));
    nodes.push(node('Sqrt', [`${name}.var`], [`${name}.rms`], `${name}.sqrt`));
    nodes.push(node('Div', [x, `${name}.rms`], [`${name}.normed`], `${name}.div`));
    nodes.push(node('Mul', [`${name}.normed`, `${name}.weight`], [y], `${name}.scale`));
  }
  const { hidden: h, heads, seq } = o;
  const kvHeads = o['kv-heads'], headDim = h / heads, group = heads / kvHeads;
  if (headDim !== Math.floor(headDim) || group !== Math.floor(group))
    throw new Error('hidden must divide into heads, heads into kv-heads');
  inline('eps', [1], FLOAT, floats(1, () => 1e-6));
  if (o.dq) inline('reduce_axes', [1], INT64, ints64([-1]));
  inline('attn_scale', [1], FLOAT, floats(1, () => 1 / Math.sqrt(headDim)));
  inline('shape_q', [5], INT64, ints64([1, seq, kvHeads, group, headDim]));
  inline('shape_kv', [4], INT64, ints64([1, seq, kvHeads, headDim]));
  inline('shape_scores', [4], INT64, ints64([1, kvHeads, group * seq, headDim]));
  inline('shape_heads', [5], INT64, ints64([1, kvHeads, group, seq, headDim]));
  inline('shape_hidden', [3], INT64, ints64([1, seq, h]));
  let x = 'hidden';
  for (let l = 0; l < o.layers; l++) {
    const p = `layers.${l}`;
    rmsNorm(`${p}.input_norm`, x, `${p}.h`);
    projection(`${p}.attn.q_proj`, `${p}.h`, `${p}.q`, h, h, o.block, { bias: true });
    projection(`${p}.attn.k_proj`, `${p}.h`, `${p}.k`, h, kvHeads * headDim, o.block);
    projection(`${p}.attn.v_proj`, `${p}.h`, `${p}.v`, h, kvHeads * headDim, o.block);
    // q [1,S,H] → [1,KV,G·S,D]; k → [1,KV,D,S]; v → [1,KV,S,D]; softmax(q·k·scale)·v back to [1,S,H].
    nodes.push(node('Reshape', [`${p}.q`, 'shape_q'], [`${p}.q5`], `${p}.attn.q_reshape`));
    nodes.push(node('Transpose', [`${p}.q5`], [`${p}.qt`], `${p}.attn.q_transpose`, [attrInts('perm', [0, 2, 3, 1, 4])]));
    nodes.push(node('Reshape', [`${p}.qt`, 'shape_scores'], [`${p}.qg`], `${p}.attn.q_group`));
    nodes.push(node('Reshape', [`${p}.k`, 'shape_kv'], [`${p}.k4`], `${p}.attn.k_reshape`));
    nodes.push(node('Transpose', [`${p}.k4`], [`${p}.kt`], `${p}.attn.k_transpose`, [attrInts('perm', [0, 2, 3, 1])]));
    nodes.push(node('Reshape', [`${p}.v`, 'shape_kv'], [`${p}.v4`], `${p}.attn.v_reshape`));
    nodes.push(node('Transpose', [`${p}.v4`], [`${p}.vt`], `${p}.attn.v_transpose`, [attrInts('perm', [0, 2, 1, 3])]));
    nodes.push(node('MatMul', [`${p}.qg`, `${p}.kt`], [`${p}.qk`], `${p}.attn.qk`));
    nodes.push(node('Mul', [`${p}.qk`, 'attn_scale'], [`${p}.scores`], `${p}.attn.scale`));
    nodes.push(node('Softmax', [`${p}.scores`], [`${p}.probs`], `${p}.attn.softmax`, [attrInt('axis', -1)]));
    nodes.push(node('MatMul', [`${p}.probs`, `${p}.vt`], [`${p}.ctx`], `${p}.attn.pv`));
    nodes.push(node('Reshape', [`${p}.ctx`, 'shape_heads'], [`${p}.ctx5`], `${p}.attn.ctx_reshape`));
    nodes.push(node('Transpose', [`${p}.ctx5`], [`${p}.ctxt`], `${p}.attn.ctx_transpose`, [attrInts('perm', [0, 3, 1, 2, 4])]));
    nodes.push(node('Reshape', [`${p}.ctxt`, 'shape_hidden'], [`${p}.attn_out`], `${p}.attn.merge`));
    projection(`${p}.attn.o_proj`, `${p}.attn_out`, `${p}.o`, h, h, o.block);
    nodes.push(node('Add', [x, `${p}.o`], [`${p}.resid1`], `${p}.attn.residual`));
    rmsNorm(`${p}.post_norm`, `${p}.resid1`, `${p}.h2`);
    projection(`${p}.mlp.gate_proj`, `${p}.h2`, `${p}.gate`, h, o.mlp, o.block);
    projection(`${p}.mlp.up_proj`, `${p}.h2`, `${p}.up`, h, o.mlp, o.block, { zeroPoints: true });
    nodes.push(node('Sigmoid', [`${p}.gate`], [`${p}.gate_sig`], `${p}.mlp.sigmoid`));
    nodes.push(node('Mul', [`${p}.gate`, `${p}.gate_sig`], [`${p}.silu`], `${p}.mlp.silu`));
    nodes.push(node('Mul', [`${p}.silu`, `${p}.up`], [`${p}.act`], `${p}.mlp.act`));
    projection(`${p}.mlp.down_proj`, `${p}.act`, `${p}.down`, o.mlp, h, o.block);
    nodes.push(node('Add', [`${p}.resid1`, `${p}.down`], [`${p}.out`], `${p}.mlp.residual`));
    x = `${p}.out`;
  }
  rmsNorm('final_norm', x, 'final');
  projection('lm_head', 'final', 'logits', h, o.vocab, o['lm-block'] || o.block);
  fs.closeSync(dataFd);

  const graph = msg(7, [...nodes, str(2, 'nbits_decoder_step'), ...initializers,
    valueInfo(11, 'hidden', FLOAT, [1, seq, h]), valueInfo(12, 'logits', FLOAT, [1, seq, o.vocab])]);
  // ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 (domain 1, version 2).
  const model = Buffer.concat([int(1, 8), str(2, 'kiln nbits_decoder.mjs'), graph,
    msg(8, [str(1, ''), int(2, o.dq ? 21 : 17)]), msg(8, [str(1, 'com.microsoft'), int(2, 1)])]);
  fs.writeFileSync(path.join(dir, 'model.onnx'), model);
  const inputRandom = rng(o.seed + 7919);
  const input = new Float32Array(seq * h).map(() => (inputRandom() - 0.5) * 2);
  fs.writeFileSync(path.join(dir, 'hidden.pb'), encodeFloatTensor('hidden', [1, seq, h], input));
  const total = fs.statSync(path.join(dir, dataName)).size + model.length;
  console.log(`wrote ${dir}/model.onnx: ${o.layers} layers, hidden ${h}, ${params} parameters, ` +
    `${total} bytes with its external data`);
}

// ONNX Runtime's optimizer fuses DequantizeLinear + MatMul into MatMulNBits computing with int8
// activations (accuracy level 4); the reference for --dq models runs unoptimized (level "disabled").
async function runOrt(dir, nodeModules, threads, optimization = 'all') {
  const require = createRequire(path.join(path.resolve(nodeModules), 'noop.js'));
  const ort = require('onnxruntime-node');
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'),
    { intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: optimization });
  const input = decodeFloatTensor(fs.readFileSync(path.join(dir, 'hidden.pb')));
  const started = Date.now();
  const out = await session.run({ hidden: new ort.Tensor('float32', input.data, input.dims) });
  const logits = out.logits;
  console.log(`ONNX Runtime: one step in ${Date.now() - started} ms, logits [${logits.dims}]`);
  fs.writeFileSync(path.join(dir, 'ort_logits.pb'), encodeFloatTensor('logits', logits.dims, logits.data));
}

function compare(fileA, fileB, minCosine, maxAbs) {
  const a = decodeFloatTensor(fs.readFileSync(fileA)).data, b = decodeFloatTensor(fs.readFileSync(fileB)).data;
  if (a.length !== b.length) throw new Error(`${a.length} vs ${b.length} values`);
  let dot = 0, aa = 0, bb = 0, worst = 0, argA = 0, argB = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i];
    worst = Math.max(worst, Math.abs(a[i] - b[i]));
    if (a[i] > a[argA]) argA = i;
    if (b[i] > b[argB]) argB = i;
  }
  const cosine = dot / Math.sqrt(Math.max(aa * bb, 1e-60));
  console.log(`max_abs_diff ${worst.toExponential(3)} cosine ${cosine.toFixed(9)} ` +
    `rms ${Math.sqrt(bb / b.length).toFixed(4)} argmax ${argA} vs ${argB}`);
  const bad = (minCosine !== undefined && !(cosine >= minCosine)) || (maxAbs !== undefined && !(worst <= maxAbs));
  process.exit(bad ? 1 : 0);
}

// Raw little-endian float32 files for the MindSpore Lite judge and back (dims from a like tensor).
function toBin(pb, bin) {
  const t = decodeFloatTensor(fs.readFileSync(pb));
  fs.writeFileSync(bin, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
}
function fromBin(bin, like, pb) {
  const raw = Buffer.from(fs.readFileSync(bin));
  const dims = decodeFloatTensor(fs.readFileSync(like)).dims;
  fs.writeFileSync(pb, encodeFloatTensor('logits', dims, new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4)));
}

const [verb, ...rest] = process.argv.slice(2);
if (verb === 'write') write(rest[0], parseOptions(rest.slice(1)));
else if (verb === 'ort') await runOrt(rest[0], rest[1], Number(rest[2] || 1), rest[3] || 'all');
else if (verb === 'tobin') toBin(rest[0], rest[1]);
else if (verb === 'frombin') fromBin(rest[0], rest[1], rest[2]);
else if (verb === 'compare') compare(rest[0], rest[1], rest[2] && Number(rest[2]), rest[3] && Number(rest[3]));
else {
  console.error('usage: nbits_decoder.mjs write DIR [options] | ort DIR NODE_MODULES [THREADS] | compare A.pb B.pb');
  process.exit(2);
}
