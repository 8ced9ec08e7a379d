// The peer for conversion benchmarks: ONNX Runtime's offline graph optimization (session creation with
// optimizedModelFilePath writes the optimized model), the nearest "convert and save" step a peer
// ships on this machine. Usage: node ort_optimize.mjs NODE_MODULES MODEL.onnx OUT.onnx
import path from 'node:path';
import { createRequire } from 'node:module';

const [nodeModules, model, out] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(nodeModules), 'noop.js'));
const ort = require('onnxruntime-node');
await ort.InferenceSession.create(model, {
  graphOptimizationLevel: 'extended',
  optimizedModelFilePath: out,
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
});
