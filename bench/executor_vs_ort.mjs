// Executor speed: `kiln run` vs ONNX Runtime, same threads, same inputs, interleaved in one run
// (ROUNDS rounds of: REPEAT ONNX Runtime runs, then `kiln run --repeat REPEAT`); medians over all
// rounds.
// Usage: node executor_vs_ort.mjs KILN NODE_MODULES WORKDIR [REPEAT] [MODEL...]
// Environment: THREADS (default 1), ROUNDS (default 3).
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { createRequire } from 'node:module';
import { models, makeInput, encodeFloatTensor, modelPath, writeFile } from '../tests/real_models/models.mjs';

const [kiln, nodeModules, work, repeatText, ...names] = process.argv.slice(2);
const repeat = Number(repeatText || 10);
const threads = Number(process.env.THREADS || 1);
const rounds = Number(process.env.ROUNDS || 3);
const require = createRequire(path.join(path.resolve(nodeModules), 'noop.js'));
const ort = require('onnxruntime-node');
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

console.log(`| model | input | ONNX Runtime ${threads} thread (median ms) | kiln run ${threads} thread (median ms) | kiln / ORT |`);
console.log(`|---|---|---|---|---|`);
for (const name of names.length ? names : ['ppocr_det', 'ppocr_rec']) {
  const index = models.findIndex((m) => m.name === name);
  const model = models[index];
  if (model.inputs.length !== 1) throw new Error(`${name}: only single-input models are benchmarked`);
  const file = modelPath(nodeModules, model, work);
  const input = makeInput(model.shape, 1234 + index);
  const inputFile = path.join(work, name, 'input.pb');
  writeFile(inputFile, encodeFloatTensor(model.input, model.shape, input));

  const session = await ort.InferenceSession.create(file, { intraOpNumThreads: threads, interOpNumThreads: 1 });
  const feeds = { [model.input]: new ort.Tensor('float32', input, model.shape) };
  await session.run(feeds);  // warm-up
  const ortTimes = [], kilnTimes = [];
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < repeat; i++) {
      const start = process.hrtime.bigint();
      await session.run(feeds);
      ortTimes.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    const out = execFileSync(kiln, ['run', file, '--input', `${model.input}=${inputFile}`, '--output-dir',
      path.join(work, name, 'out'), '--threads', String(threads), '--repeat', String(repeat + 1)]).toString();
    kilnTimes.push(Number(out.match(/median ([0-9.]+) ms/)[1]));
  }
  const kilnMedian = median(kilnTimes);
  const ortMedian = median(ortTimes);
  console.log(`| ${name} | [${model.shape}] | ${ortMedian.toFixed(1)} | ${kilnMedian.toFixed(1)} | ` +
    `${(kilnMedian / ortMedian).toFixed(2)}x |`);
}
