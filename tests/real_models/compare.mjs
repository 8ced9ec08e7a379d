// Runs each real model in kiln and in ONNX Runtime (single thread) on the same deterministic input
// and checks kiln's outputs within rtol/atol. Usage: node compare.mjs KILN NODE_MODULES WORKDIR
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { models, makeInput, encodeFloatTensor, decodeFloatTensor, modelPath, preActivationName, writeFile }
  from './models.mjs';

const [kiln, nodeModules, work] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(nodeModules), 'noop.js'));
const ort = require('onnxruntime-node');
const rtol = 1e-4, atol = 1e-5;
let passed = 0, failed = 0;

function compare(label, expected, actual) {
  if (expected.dims.join(',') !== actual.dims.join(',')) {
    console.log(`FAIL ${label}: shape [${actual.dims}] vs reference [${expected.dims}]`);
    return false;
  }
  let maxAbs = 0, maxRel = 0, violations = 0, firstBad = -1;
  for (let i = 0; i < expected.data.length; i++) {
    const e = expected.data[i], a = actual.data[i];
    const err = Math.abs(a - e);
    if (!(err <= atol + rtol * Math.abs(e))) { violations++; if (firstBad < 0) firstBad = i; }
    if (err > maxAbs || Number.isNaN(err)) maxAbs = err;
    const rel = err / Math.max(Math.abs(e), 1e-12);
    if (Math.abs(e) > 1e-3 && rel > maxRel) maxRel = rel;
  }
  const ok = violations === 0;
  console.log(`${ok ? 'PASS' : 'FAIL'} ${label} [${expected.dims}] max_abs_err=${maxAbs.toExponential(3)} ` +
    `max_rel_err(|ref|>1e-3)=${maxRel.toExponential(3)} out_of_tolerance=${violations}` +
    (ok ? '' : ` first at ${firstBad}: kiln ${actual.data[firstBad]} vs ort ${expected.data[firstBad]}`));
  return ok;
}

for (const [index, model] of models.entries()) {
  const file = modelPath(nodeModules, model);
  const input = makeInput(model.shape, 1234 + index);
  const inputFile = path.join(work, model.name, 'input.pb');
  writeFile(inputFile, encodeFloatTensor(model.input, model.shape, input));

  let ortModel = file;
  const extra = [];
  const outputName = JSON.parse(execFileSync(kiln, ['inspect', '--json', file]).toString()).outputs[0].name;
  if (model.preActivation) {
    const ir = execFileSync(kiln, ['inspect', '--ir', file], { maxBuffer: 1 << 28 }).toString();
    const pre = preActivationName(ir, outputName, model.preActivation);
    ortModel = path.join(work, model.name, 'exposed.onnx');
    execFileSync(kiln, ['convert', file, '--to', 'onnx', '--expose', pre, '-o', ortModel]);
    extra.push(pre);
  }
  const session = await ort.InferenceSession.create(ortModel, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  const feeds = { [model.input]: new ort.Tensor('float32', input, model.shape) };
  const reference = await session.run(feeds);

  const outDir = path.join(work, model.name, 'kiln');
  const args = ['run', file, '--input', `${model.input}=${inputFile}`, '--output-dir', outDir];
  for (const name of extra) args.push('--capture', name);
  try {
    execFileSync(kiln, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    console.log(`FAIL ${model.name}: kiln run failed: ${e.stderr}`);
    failed++;
    continue;
  }
  const safe = (n) => n.replace(/[^A-Za-z0-9_.-]/g, '_') + '.pb';
  for (const name of [outputName, ...extra]) {
    const kilnFile = extra.includes(name) ? path.join(outDir, 'intermediates', safe(name)) : path.join(outDir, safe(name));
    const actual = decodeFloatTensor(fs.readFileSync(kilnFile));
    const ref = reference[name];
    const ok = compare(`${model.name} ${name}`, { dims: Array.from(ref.dims), data: ref.data }, actual);
    ok ? passed++ : failed++;
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
