// The cosine of each output kiln run wrote in REFERENCE_DIR against the file of the same name in
// CANDIDATE_DIR (float32 or float16 TensorProto .pb), as `kiln compare` computes it: one line
// "NAME COSINE" per output. Exits 1 when a file is missing or the shapes differ.
// Usage: node cosines.mjs REFERENCE_DIR CANDIDATE_DIR
import fs from 'node:fs';
import path from 'node:path';
import { decodeFloatTensor } from './models.mjs';

const [referenceDir, candidateDir] = process.argv.slice(2);
const names = fs.readdirSync(referenceDir).filter((f) => f.endsWith('.pb')).sort();
let status = names.length ? 0 : 1;
if (!names.length) console.log(`no outputs in ${referenceDir}`);
for (const name of names) {
  const file = path.join(candidateDir, name);
  if (!fs.existsSync(file)) { console.log(`${name} missing in ${candidateDir}`); status = 1; continue; }
  const e = decodeFloatTensor(fs.readFileSync(path.join(referenceDir, name)));
  const a = decodeFloatTensor(fs.readFileSync(file));
  if (e.dims.join(',') !== a.dims.join(',')) {
    console.log(`${name} shape [${a.dims}] vs [${e.dims}]`);
    status = 1;
    continue;
  }
  let dot = 0, ee = 0, aa = 0;
  for (let i = 0; i < e.data.length; i++) { dot += e.data[i] * a.data[i]; ee += e.data[i] ** 2; aa += a.data[i] ** 2; }
  const cosine = ee === 0 && aa === 0 ? 1 : ee === 0 || aa === 0 ? 0 : dot / Math.sqrt(ee * aa);
  console.log(`${name} ${cosine}`);
}
process.exit(status);
