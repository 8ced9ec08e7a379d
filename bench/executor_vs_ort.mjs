// Executor speed: `kiln run` vs ONNX Runtime, same threads, same inputs, interleaved in one run
// (ROUNDS rounds of: REPEAT ONNX Runtime runs, then `kiln run --repeat REPEAT+1`); medians over all
// rounds. kiln runs under GNU time (/usr/bin/time) for its peak RSS (max over the rounds).
// Usage: node executor_vs_ort.mjs KILN NODE_MODULES WORKDIR [REPEAT] [MODEL...]
// Environment: THREADS (default 1), ROUNDS (default 3).
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

console.log(`| model | input | ONNX Runtime ${threads} thread (median ms) | kiln run ${threads} thread (median ms) | ` +
  `kiln / ORT | kiln peak RSS (MiB) |`);
console.log(`|---|---|---|---|---|---|`);
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

  const session = await ort.InferenceSession.create(file, { intraOpNumThreads: threads, interOpNumThreads: 1 });
  const feeds = {};
  for (const input of inputs) feeds[input.name] = new ort.Tensor(input.type, input.data, input.shape);
  await session.run(feeds);  // warm-up
  const ortTimes = [], kilnTimes = [];
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
  }
  const kilnMedian = median(kilnTimes);
  const ortMedian = median(ortTimes);
  console.log(`| ${name} | ${inputs.map((i) => `[${i.shape}]`).join(' ')} | ${ortMedian.toFixed(1)} | ` +
    `${kilnMedian.toFixed(1)} | ${(kilnMedian / ortMedian).toFixed(2)}x | ${rss ? (rss / 1024).toFixed(0) : '-'} |`);
}
