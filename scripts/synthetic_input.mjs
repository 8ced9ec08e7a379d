// Deterministic synthetic inputs that look like the data the real models are made for (no randomness
// beyond a fixed LCG), written as TensorProto files. Usage: node scripts/synthetic_input.mjs KIND NAME DIMS OUT
//  page/line: a light background with a smooth brightness gradient and dark anti-aliased strokes laid
//    out like characters on text lines (one line for rec/cls, several for det), normalized as PP-OCR
//    does ((v / 255 - 0.5) / 0.5); DIMS = c,h,w;
//  mel: a smooth spectrogram-like pattern (two moving formant bands under a syllable envelope); DIMS = t,f.
import { encodeFloatTensor, writeFile } from '../tests/real_models/models.mjs';
const [kind, name, dims, out] = process.argv.slice(2);
const [a, b, c] = dims.split(',').map(Number);
function lcg(seed) { let s = seed >>> 0; return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296; }
if (kind === 'mel') {
  const d = new Float32Array(a * b);
  for (let t = 0; t < a; t++) for (let f = 0; f < b; f++) {
    const formant = Math.exp(-((f - 8 - 4 * Math.sin(t / 9)) ** 2) / 18) + 0.7 * Math.exp(-((f - 20 - 3 * Math.cos(t / 7)) ** 2) / 12);
    d[t * b + f] = -1.5 + 3 * (0.5 + 0.5 * Math.sin(Math.PI * t / a)) * formant - (f / b) * 0.5;
  }
  writeFile(out, encodeFloatTensor(name, [1, a, b, 1], d));
} else {
  const [ch, h, w] = [a, b, c], r = lcg(7), ink = new Float32Array(h * w), img = new Float32Array(ch * h * w);
  const lineH = Math.min(h, 48), lines = Math.max(1, Math.floor(h / (lineH * 1.5)));
  for (let l = 0; l < lines; l++) {
    const y0 = Math.floor((h - lines * lineH * 1.5) / 2 + l * lineH * 1.5 + lineH * 0.25), y1 = y0 + Math.floor(lineH * 0.6);
    let x = Math.floor(w * 0.05 + r() * 10);
    const xend = Math.floor(w * (0.6 + 0.35 * r())), t = 1 + Math.floor(lineH / 16);
    while (x < xend) {
      const cw = Math.floor(lineH * (0.35 + 0.4 * r())), n = 2 + Math.floor(r() * 4);
      for (let k = 0; k < n; k++) {
        if (r() < 0.5) { // vertical stroke
          const sx = x + Math.floor(r() * cw), s0 = y0 + Math.floor((r() * (y1 - y0)) / 2), s1 = s0 + Math.floor((y1 - y0) * (0.4 + 0.5 * r()));
          for (let yy = s0; yy < Math.min(s1, y1); yy++) for (let xx = sx; xx < Math.min(sx + t, w); xx++) ink[yy * w + xx] = 1;
        } else { // horizontal stroke
          const sy = y0 + Math.floor(r() * (y1 - y0)), s0 = x + Math.floor((r() * cw) / 2), s1 = s0 + Math.floor(cw * (0.4 + 0.6 * r()));
          for (let yy = sy; yy < Math.min(sy + t, h); yy++) for (let xx = s0; xx < Math.min(s1, x + cw, w); xx++) ink[yy * w + xx] = 1;
        }
      }
      x += cw + Math.floor(lineH * 0.1 + r() * lineH * 0.2);
    }
  }
  for (let k = 0; k < ch; k++) for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
    let s = 0, n = 0; // 3x3 box blur: anti-aliased strokes
    for (let dy = -1; dy <= 1; dy++) for (let dx = -1; dx <= 1; dx++) {
      const yy = y + dy, xx = x + dx;
      if (yy >= 0 && yy < h && xx >= 0 && xx < w) { s += ink[yy * w + xx]; n++; }
    }
    const bg = 200 + 30 * Math.sin((x / w) * 3 + (y / h) * 2), v = bg * (1 - s / n) + (30 + 10 * k) * (s / n);
    img[(k * h + y) * w + x] = (v / 255 - 0.5) / 0.5;
  }
  writeFile(out, encodeFloatTensor(name, [1, ch, h, w], img));
}
