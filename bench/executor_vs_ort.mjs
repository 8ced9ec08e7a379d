// Executor speed: `kiln run` vs ONNX Runtime, same threads, same inputs, interleaved in one run
// (ROUNDS rounds of: REPEAT ONNX Runtime runs, then `kiln run --repeat REPEAT+1`); medians over all
// rounds. kiln runs under GNU time (/usr/bin/time) for its peak RSS (max over the rounds).
// Usage: node executor_vs_ort.mjs KILN NODE_MODULES WORKDIR [REPEAT] [MODEL...]
// Environment: THREADS (default 1), ROUNDS (default 3), ARTIFACTS (unset: the .onnx alone).
// ARTIFACTS=onnx,ms,ms_fp16,om,om_fp32 (any of them, comma separated) also times the converted
// files, made before the timing with converter_lite (--fp16=on for ms_fp16) and atc (default
// precision for om, --precision_mode=force_fp32 for om_fp32) from KILN's folder, with the
// input shapes of tests/real_models/models.mjs: each round then runs `kiln run` on every artifact
// too, and the table gains per artifact its median, its ratio to the .onnx run and its ratio to
// ONNX Runtime, all from the same rounds.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { models, makeInputs, encodeInput, modelPath, writeFile } from '../tests/real_models/models.mjs';

const [kiln, nodeModules, work, repeatText, ...names] = process.argv.slice(2);
const repeat = Number(repeatText || 10);
const threads = Number(process.env.THREADS || 1);
const rounds = Number(process.env.ROUNDS || 3);
const require = createRequire(path.join(path.resolve(nodeModules), 'noop.js'));
const ort = require('onnxruntime-node');
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const timeTool = fs.existsSync('/usr/bin/time') ? '/usr/bin/time' : null;
const all = ['ppocr_det', 'ppocr_rec', 'ppocr_cls', 'oww_embedding', 'isnet_fp16', 'isnet_quint8'];

// The converted artifacts: file suffix and the converter's command line (model, input shapes,
// output path without extension).
const tools = path.dirname(path.resolve(kiln));
const shapeList = (model, sep) => model.inputs.map((i) => `${i.name}:${i.shape.join(',')}`).join(sep);
const artifactKinds = {
  ms: { ext: 'ms', convert: (file, model, out) => [path.join(tools, 'converter_lite'),
    ['--fmk=ONNX', `--modelFile=${file}`, `--outputFile=${out}`, `--inputShape=${shapeList(model, ';')}`]] },
  ms_fp16: { ext: 'ms', convert: (file, model, out) => [path.join(tools, 'converter_lite'),
    ['--fmk=ONNX', `--modelFile=${file}`, `--outputFile=${out}`, `--inputShape=${shapeList(model, ';')}`,
      '--fp16=on']] },
  om: { ext: 'om', convert: (file, model, out) => [path.join(tools, 'atc'),
    ['--framework=5', `--model=${file}`, `--output=${out}`, '--soc_version=Ascend310',
      `--input_shape=${shapeList(model, ';')}`]] },
  om_fp32: { ext: 'om', convert: (file, model, out) => [path.join(tools, 'atc'),
    ['--framework=5', `--model=${file}`, `--output=${out}`, '--soc_version=Ascend310',
      `--input_shape=${shapeList(model, ';')}`, '--precision_mode=force_fp32']] },
};
const artifacts = (process.env.ARTIFACTS || '').split(',').map((a) => a.trim())
  .filter((a) => a && a !== 'onnx');
for (const a of artifacts)
  if (!artifactKinds[a]) throw new Error(`unknown artifact ${a} (onnx, ${Object.keys(artifactKinds).join(', ')})`);

let header = `| model | input | ONNX Runtime ${threads} thread (median ms) | kiln run ${threads} thread (median ms) | ` +
  `kiln / ORT | kiln peak RSS (MiB) |`;
let rule = `|---|---|---|---|---|---|`;
for (const a of artifacts) {
  header += ` kiln .${a} (median ms) | .${a} / .onnx | .${a} / ORT |`;
  rule += `---|---|---|`;
}
console.log(header);
console.log(rule);
for (const name of names.length ? names : all) {
  const index = models.findIndex((m) => m.name === name);
  if (index < 0) throw new Error(`unknown model ${name}`);
  const model = models[index];
  const file = modelPath(nodeModules, model, work);
  const inputs = makeInputs(model, 1234 + index);
  const inputArgs = [];
  for (const input of inputs) {
    const inputFile = path.join(work, name, `input.${input.name.replace(/[^A-Za-z0-9_.-]/g, '_')}.pb`);
    writeFile(inputFile, encodeInput(input));
    inputArgs.push('--input', `${input.name}=${inputFile}`);
  }

  // Each artifact converted once; a failed conversion leaves its columns empty.
  const artifactFiles = {};
  // atc takes model paths of plain characters only (npm's '@' scopes are refused): a copy.
  const source = path.join(work, name, `${name}.onnx`);
  if (artifacts.length) fs.copyFileSync(file, source);
  for (const a of artifacts) {
    const out = path.join(work, name, `${name}_${a}`);
    const [tool, toolArgs] = artifactKinds[a].convert(source, model, out);
    try {
      execFileSync(tool, toolArgs, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      artifactFiles[a] = `${out}.${artifactKinds[a].ext}`;
    } catch (e) {
      console.error(`${name}: converting to .${a} failed: ${String(e.stderr || e.message).trim().split('\n').pop()}`);
    }
  }

  const session = await ort.InferenceSession.create(file, { intraOpNumThreads: threads, interOpNumThreads: 1 });
  const feeds = {};
  for (const input of inputs) feeds[input.name] = new ort.Tensor(input.type, input.data, input.shape);
  await session.run(feeds);  // warm-up
  const ortTimes = [], kilnTimes = [];
  const artifactTimes = Object.fromEntries(artifacts.map((a) => [a, []]));
  let rss = 0;
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < repeat; i++) {
      const start = process.hrtime.bigint();
      await session.run(feeds);
      ortTimes.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    const args = ['run', file, ...inputArgs, '--output-dir', path.join(work, name, 'out'), '--threads',
      String(threads), '--repeat', String(repeat + 1)];
    const rssFile = path.join(work, name, 'maxrss.txt');
    const out = timeTool
      ? execFileSync(timeTool, ['-o', rssFile, '-f', '%M', kiln, ...args], { encoding: 'utf8' })
      : execFileSync(kiln, args, { encoding: 'utf8' });
    kilnTimes.push(Number(out.match(/median ([0-9.]+) ms/)[1]));
    if (timeTool) rss = Math.max(rss, Number(fs.readFileSync(rssFile, 'utf8').trim().split('\n').pop()));
    for (const a of artifacts) {
      if (!artifactFiles[a]) continue;
      const artifactArgs = ['run', artifactFiles[a], ...inputArgs, '--output-dir', path.join(work, name, `out.${a}`),
        '--threads', String(threads), '--repeat', String(repeat + 1)];
      const artifactOut = execFileSync(kiln, artifactArgs, { encoding: 'utf8' });
      artifactTimes[a].push(Number(artifactOut.match(/median ([0-9.]+) ms/)[1]));
    }
  }
  const kilnMedian = median(kilnTimes);
  const ortMedian = median(ortTimes);
  let row = `| ${name} | ${inputs.map((i) => `[${i.shape}]`).join(' ')} | ${ortMedian.toFixed(1)} | ` +
    `${kilnMedian.toFixed(1)} | ${(kilnMedian / ortMedian).toFixed(2)}x | ${rss ? (rss / 1024).toFixed(0) : '-'} |`;
  for (const a of artifacts) {
    if (!artifactTimes[a].length) {
      row += ` - | - | - |`;
      continue;
    }
    const m = median(artifactTimes[a]);
    row += ` ${m.toFixed(1)} | ${(m / kilnMedian).toFixed(2)}x | ${(m / ortMedian).toFixed(2)}x |`;
  }
  console.log(row);
}
