// Steps of a float16 elementwise chain with the rounding to float16 done in registers: one pass per
// step instead of the float loop (vec_loops.h) and a second pass through roundThroughHalves.
#pragma once

#include <cstdint>

#include "vec_loops.h"

namespace kiln::rt::vec {

// The loops of vec_loops.h (same operations in the same order, compiled without contraction), each
// result rounded to the nearest float16 value before it is stored. Every non-NaN result is the
// float loop's result rounded as roundThroughHalves rounds it. A NaN keeps the payload the
// conversion instructions leave, where roundThroughHalves makes it the plain quiet NaN with its
// sign: the chain's steps never look at a payload (arithmetic carries the NaN operand's sign,
// the selects pass or drop it whole), and its last result is narrowed by floatsToHalves, which
// writes every NaN as the plain float16 NaN with its sign, so the chain's float16 output is the
// same. For steps inside a float16 chain only. Each returns how many leading elements it did
// (a multiple of the vector width, or 0 without the instructions); the caller does the rest.
// With `narrow`, the results go there as float16 instead (NaN as floatsToHalves writes it) and
// `out` is not written: a chain's last step.
int64_t binarySameHalf(BinOp op, const float* a, const float* b, float* out, int64_t n,
                       uint16_t* narrow = nullptr);
int64_t binaryScalarRightHalf(BinOp op, const float* a, float s, float* out, int64_t n,
                              uint16_t* narrow = nullptr);
int64_t binaryScalarLeftHalf(BinOp op, float s, const float* b, float* out, int64_t n,
                             uint16_t* narrow = nullptr);
// binaryScalarRightHalf (x op s), or binaryScalarLeftHalf with `scalarLeft` (s op x), on float16
// x widened in registers by the conversion instruction (as widenHalves), over `runs` runs of
// `inner` values, run r (x, out and narrow from r * inner) with s = scales[r]: one pass for a
// float16 node of its own instead of widen, loop, narrow, and one call for all the channels of a
// per-channel operand. Without `narrow` each result is rounded and widened back as floatsToHalves
// then halvesToFloats make it (a NaN the plain quiet NaN with its sign): the node's float16 output
// handed over widened, the same bits as widening it. Returns how many leading values of each run
// it did (the same for every run); the caller does the rest of each.
int64_t binaryScalarHalves(BinOp op, const uint16_t* x, const float* scales, int64_t runs,
                           int64_t inner, bool scalarLeft, float* out, uint16_t* narrow = nullptr);
int64_t unaryHalf(UnOp op, const float* in, float* out, int64_t n, float p0, float p1,
                  uint16_t* narrow = nullptr);
// v[i] rounded to the nearest float16 value in place, NaN payloads as above.
int64_t roundHalfInPlace(float* v, int64_t n);
// dst[i] = src[i] widened by the conversion instruction: halvesToFloats's values but for a
// signalling NaN, which comes out quiet. For float16 inputs that only feed arithmetic whose
// float16 result is narrowed by floatsToHalves (a Conv's input), where no payload is seen.
int64_t widenHalves(const uint16_t* src, float* dst, int64_t n);
// Every element: widenHalves, then halvesToFloats for what its vector loop leaves.
void widenHalvesAll(const uint16_t* src, float* dst, int64_t n);
// widenHalvesAll cut into ranges over the pool when n is large enough to be worth it. Every range
// but the last is a multiple of kParallelGrain (a multiple of every vector width), so each element
// takes the path it takes in one pass and the values do not depend on the thread count.
void widenHalvesOnPool(int threads, const uint16_t* src, float* dst, int64_t n);

// A decomposed HardSwish's four steps in one pass over x (made as the flags below say): t = x +
// add; t = t < lo ? lo : t; t = hi < t ? hi : t; t = x * t (t * x without productOfInput); out = t
// / div, each as the float loop computes it, each result rounded to float16 where its flag says,
// the last narrowed into `narrow` instead when given (`out` then not written). productOfInput: the
// Mul step's first operand is x (else the clipped value). Works for float32 chains too (no flags).
// Returns how many leading elements it did, as the loops above.
struct HardSwishSteps {
  float add = 0, lo = 0, hi = 0, div = 1;
  bool productOfInput = true;
  bool roundAdd = false, roundClip = false, roundProduct = false, roundLast = false;
  // Multiply by 1 / div (rounded to float) instead of dividing: set only where
  // hardSwishReciprocalExact says so.
  bool divideByReciprocal = false;
  // x is first made from what `x` points at: inputBias added (addInputBias), then rounded to
  // float16 (roundInput), as a Conv's epilogue would in a pass of its own before the steps.
  bool addInputBias = false, roundInput = false;
  float inputBias = 0;
  uint16_t* narrow = nullptr;
};
int64_t hardSwishSteps(const HardSwishSteps& h, const float* x, float* out, int64_t n);
// Whether h's steps, for every float16 x, give the same float16 result multiplying by 1 / div as
// dividing by div. A division costs several multiplications, and it is most of the float16 pass
// (PP-OCR cls's fp16 .om). It can only hold when the dividend and the quotient are rounded to
// float16 (roundProduct, and roundLast or narrow): a float16 dividend over 6 is never near
// enough a float16 rounding boundary for the reciprocal's error to cross it, where float32
// quotients would differ in their last bit. It is checked over all 65536 inputs rather than
// argued per divisor, once per parameter set (cached), so a divisor for which it fails (0.3)
// keeps the division.
bool hardSwishReciprocalExact(const HardSwishSteps& h);

} // namespace kiln::rt::vec
