// converter_lite FULL_QUANT on real models, measured against their FP32 conversion (issue 27):
// each model is calibrated on 50 seeded samples (converter_lite's calibrate_path layout, .pb files)
// and both .ms files run in kiln's executor on other seeded inputs of the same kind.
//   ppocr_cls      200 inputs (100 text-line images and the same turned 180 degrees): top-1 agreement >= 99%
//   ppocr_rec      100 text-line images: the same CTC-decoded string (index sequence) on >= 95%
//   ppocr_det      8 page images at 640x640: cosine of the probability map >= 0.99
//   oww_embedding  50 feature maps: cosine >= 0.99
// The OCR inputs are seeded images of printed text (tests/real_models/text_images.py: DejaVu fonts
// on light paper, cropped lines or whole pages; cls's second half turned 180 degrees); the
// embedding's are seeded log-mel-like feature maps. Calibration samples come from the same
// generators with another seed. With the MindSpore Lite runtime
// judge present (../shared/judges/mslite), the real runtime runs the int8 .ms on 3 inputs per model
// and must agree with kiln's run of it (cosine >= 0.999). Writes WORK/full_quant.md (the table
// bench/results.md quotes). Exits 77 when the models are not installed.
// Usage: node full_quant.mjs KILN_TOOLS_DIR NODE_MODULES WORKDIR JUDGES_DIR [MODEL...]
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { models, encodeFloatTensor, decodeFloatTensor, modelPath, writeFile } from './models.mjs';

const [tools, nodeModules, work, judges, ...requested] = process.argv.slice(2);
const kiln = path.join(tools, 'kiln'), converter = path.join(tools, 'converter_lite');
const msrun = judges ? path.join(judges, 'mslite', 'run-msrun.sh') : '';
const calibrationSamples = 50;
// `config`: [full_quant_param] / [common_quant_param] lines a user would set for the model
// (FULL_QUANT_METHOD overrides the method, FULL_QUANT_EXTRA adds lines, for experiments).
const plans = {
  ppocr_cls: { inputs: 200, kind: 'line', measure: 'top1', gate: 0.99, method: 'MAX_MIN' },
  // The CTC classifier (the last MatMul, 6625 classes) stays float: its int8 output codes would
  // round close logits together, and the decoded string is their argmax.
  ppocr_rec: { inputs: 100, kind: 'line', measure: 'ctc', gate: 0.95, method: 'REMOVAL_OUTLIER',
    skip: 'p2o.MatMul.24', full: 'kiln_target_cosine=0.999' },
  ppocr_det: { inputs: 8, kind: 'page', measure: 'cosine', gate: 0.99, method: 'REMOVAL_OUTLIER' },
  oww_embedding: { inputs: 50, kind: 'features', measure: 'cosine', gate: 0.99, method: 'MAX_MIN' },
};
const wanted = requested.length ? requested : Object.keys(plans);
let passed = 0, failed = 0;
const check = (ok, label) => { console.log(`${ok ? 'PASS' : 'FAIL'} ${label}`); ok ? passed++ : failed++; };

// A seeded generator: an LCG in [0, 1).
function random(seed) {
  let state = (seed * 2654435761) >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
}

// Writes COUNT text images for `plan` into DIR/bin (raw float32 NCHW) and DIR/png; returns the .bin paths.
function textImages(plan, shape, dir, count, seed, turnHalf) {
  execFileSync('/usr/bin/python3', [path.join(path.dirname(new URL(import.meta.url).pathname), 'text_images.py'),
    plan.kind, dir, String(count), String(seed), String(shape[2]), String(shape[3]), ...(turnHalf ? ['--turn-half'] : [])]);
  return fs.readdirSync(path.join(dir, 'bin')).sort().map((f) => path.join(dir, 'bin', f));
}
const readFloats = (file) => {
  const bytes = fs.readFileSync(file);
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
};

// Log-mel-like features [1, T, F, 1]: smooth bands over time plus noise, the range openWakeWord's
// melspectrogram model gives (about -4 to 4).
function featureMap(shape, seed) {
  const [, frames, bins] = shape;
  const next = random(seed);
  const data = new Float32Array(frames * bins);
  const waves = [0, 1, 2].map(() => ({ f: 0.05 + 0.3 * next(), p: next() * 6.28, a: 1 + 2 * next(), b: next() * bins }));
  for (let t = 0; t < frames; t++)
    for (let b = 0; b < bins; b++) {
      let v = -2 + (next() - 0.5) * 0.5;
      for (const w of waves) v += w.a * Math.exp(-(((b - w.b) / 4) ** 2)) * (0.5 + 0.5 * Math.sin(w.f * t + w.p));
      data[t * bins + b] = v;
    }
  return data;
}

// COUNT samples as float arrays: text images for the OCR models, feature maps otherwise.
function makeSamples(name, plan, shape, dir, count, seed) {
  if (plan.kind === 'features') return Array.from({ length: count }, (_, i) => featureMap(shape, seed + i));
  return textImages(plan, shape, dir, count, seed, name === 'ppocr_cls').map(readFloats);
}

function cosine(a, b) {
  let dot = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { dot += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return aa === 0 && bb === 0 ? 1 : dot / Math.sqrt(Math.max(aa * bb, 1e-60));
}
const argmax = (data, from, width) => {
  let best = 0;
  for (let c = 1; c < width; c++) if (data[from + c] > data[from + best]) best = c;
  return best;
};
// CTC greedy decoding of [1, T, C]: argmax per step, repeats collapsed, blank (0) dropped.
function ctcDecode({ dims, data }) {
  const steps = dims[1], classes = dims[2];
  const out = [];
  let previous = -1;
  for (let t = 0; t < steps; t++) {
    const best = argmax(data, t * classes, classes);
    if (best !== previous && best !== 0) out.push(best);
    previous = best;
  }
  return out.join(',');
}

// kiln's outputs (the first, by file name) for every input file: one process per model with
// --input-list (one tool start for all the inputs, the same bytes as one run each).
function runKiln(model, inputName, inputFiles, outDir) {
  fs.rmSync(outDir, { recursive: true, force: true });
  fs.mkdirSync(outDir, { recursive: true });
  const list = path.join(outDir, 'inputs.txt');
  fs.writeFileSync(list, inputFiles.map((f) => `${inputName}=${path.resolve(f)}\n`).join(''));
  execFileSync(kiln, ['run', model, '--input-list', list, '--output-dir', outDir],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  return inputFiles.map((_, k) => {
    const dir = path.join(outDir, String(k));
    const file = fs.readdirSync(dir).filter((f) => f.endsWith('.pb')).sort()[0];
    return decodeFloatTensor(fs.readFileSync(path.join(dir, file)));
  });
}

const rows = [];
for (const name of wanted) {
  const model = models.find((m) => m.name === name);
  const plan = plans[name];
  if (!model || !plan) { check(false, `${name}: no plan`); continue; }
  const source = modelPath(nodeModules, model, work);
  if (!fs.existsSync(source)) { console.log(`SKIP ${name}: ${source} is not installed`); continue; }
  const input = model.inputs[0];
  const shape = input.shape;
  const dir = path.join(work, name);
  fs.rmSync(dir, { recursive: true, force: true });
  makeSamples(name, plan, shape, path.join(dir, 'calibration_images'), calibrationSamples, 1)
    .forEach((data, i) => writeFile(path.join(dir, 'calibration', `s${String(i).padStart(2, '0')}.pb`),
      encodeFloatTensor(input.name, shape, data)));
  const samples = makeSamples(name, plan, shape, path.join(dir, 'test_images'), plan.inputs, 2);
  const config = path.join(dir, 'full_quant.cfg');
  fs.writeFileSync(config, `[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n` +
    (plan.skip ? `skip_quant_node=${plan.skip}\n` : '') + `[data_preprocess_param]\n` +
    `calibrate_path=${input.name}:${path.join(dir, 'calibration')}\ninput_type=BIN\n` +
    `[full_quant_param]\nactivation_quant_method=${process.env.FULL_QUANT_METHOD || plan.method}\n` +
    (plan.full ? `${plan.full}\n` : '') + (process.env.FULL_QUANT_EXTRA || '').split(';').filter(Boolean).map((l) => l + '\n').join(''));
  const shapeFlag = `--inputShape=${input.name}:${shape.join(',')}`;
  const started = process.hrtime.bigint();
  const converted = spawnSync('/usr/bin/time', ['-f', 'peak_rss_kb %M', converter, '--fmk=ONNX', `--modelFile=${source}`,
    `--outputFile=${path.join(dir, 'int8')}`, `--configFile=${config}`, shapeFlag], { encoding: 'utf8' });
  if (converted.status !== 0) { check(false, `${name}: FULL_QUANT conversion failed: ${converted.stdout}${converted.stderr}`); continue; }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  execFileSync(converter, ['--fmk=ONNX', `--modelFile=${source}`, `--outputFile=${path.join(dir, 'fp32')}`, shapeFlag],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  const int8 = path.join(dir, 'int8.ms'), fp32 = path.join(dir, 'fp32.ms');
  const inspect = execFileSync(kiln, ['inspect', int8]).toString();
  const count = (op) => Number((inspect.match(new RegExp(`^\\s+${op}\\s+(\\d+)`, 'm')) || [0, 0])[1]);
  let agree = 0, worst = 1, total = 0, cosineSum = 0;
  const kilnInt8 = [];
  const files = [];
  for (let k = 0; k < plan.inputs; k++) {
    files.push(path.join(dir, 'inputs', `${k}.pb`));
    writeFile(files[k], encodeFloatTensor(input.name, shape, samples[k]));
  }
  const references = runKiln(fp32, input.name, files, path.join(dir, 'out_fp32'));
  const quantizeds = runKiln(int8, input.name, files, path.join(dir, 'out_int8'));
  for (let k = 0; k < plan.inputs; k++) {
    const file = files[k];
    const reference = references[k];
    const quantized = quantizeds[k];
    if (k < 3) kilnInt8.push({ file, quantized });
    total++;
    cosineSum += cosine(reference.data, quantized.data);
    if (plan.measure === 'top1') agree += argmax(reference.data, 0, reference.data.length) === argmax(quantized.data, 0, quantized.data.length);
    else if (plan.measure === 'ctc') agree += ctcDecode(reference) === ctcDecode(quantized);
    else {
      const c = cosine(reference.data, quantized.data);
      worst = Math.min(worst, c);
      agree += c >= plan.gate;
    }
  }
  const rate = agree / total;
  const label = plan.measure === 'top1' ? 'top-1 agreement' : plan.measure === 'ctc' ? 'same decoded string' : 'inputs with cosine >= 0.99';
  check(rate >= (plan.measure === 'cosine' ? 1 : plan.gate),
    `${name}: ${label} ${(100 * rate).toFixed(1)}% of ${total}${plan.measure === 'cosine' ? ` (worst cosine ${worst.toFixed(5)})` : ''}, mean output cosine ${(cosineSum / total).toFixed(6)}`);
  check(count('QuantDTypeCast') > 0, `${name}: the .ms holds int8 ops (${count('QuantDTypeCast')} QuantDTypeCast)`);
  // The real runtime on the first inputs.
  let runtime = 'not run (no judge)';
  if (msrun && fs.existsSync(msrun)) {
    let least = 1;
    for (const [k, { file, quantized }] of kilnInt8.entries()) {
      const raw = path.join(dir, 'inputs', `${k}.bin`);
      execFileSync(kiln, ['tensor', 'make', file, '-o', raw], { stdio: 'ignore' });
      const out = path.join(dir, `msrun_${k}`);
      fs.mkdirSync(out, { recursive: true });
      execFileSync('bash', [msrun, int8, out, raw], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 600000 });
      const bytes = fs.readFileSync(path.join(out, '0.bin'));
      const got = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
      least = Math.min(least, cosine(quantized.data, got));
    }
    runtime = least.toFixed(6);
    check(least >= 0.999, `${name}: the MindSpore Lite runtime agrees with kiln's run of the int8 .ms (worst cosine ${runtime} on ${kilnInt8.length} inputs)`);
  } else console.log(`SKIP ${name}: MindSpore Lite runtime check (${msrun || 'no judges folder'} is absent)`);
  const rss = Number(converted.stderr.match(/peak_rss_kb (\d+)/)?.[1] || 0);
  const sizes = [fs.statSync(fp32).size, fs.statSync(int8).size];
  rows.push(`| ${name} | ${label} ${(100 * rate).toFixed(1)}% of ${total}${plan.measure === 'cosine' ? `, worst ${worst.toFixed(4)}` : ''} | ${runtime} | ` +
    `${seconds.toFixed(1)} s (${(seconds / calibrationSamples).toFixed(3)} s/sample) | ${(sizes[0] / 1e6).toFixed(2)} -> ${(sizes[1] / 1e6).toFixed(2)} MB | ${rss ? (rss / 1024).toFixed(0) + ' MB' : '?'} |`);
}
const table = ['| model | vs FP32 .ms (kiln executor) | MS Lite runtime vs kiln (cosine) | FULL_QUANT conversion (50 samples) | .ms size fp32 -> int8 | peak RSS |',
  '|---|---|---|---|---|---|', ...rows].join('\n');
fs.mkdirSync(work, { recursive: true });
fs.writeFileSync(path.join(work, 'full_quant.md'), table + '\n');
console.log(table);
console.log(`${passed} passed, ${failed} failed`);
if (passed + failed === 0) { console.log('SKIP: no model was installed'); process.exit(77); }
process.exit(failed ? 1 : 0);
