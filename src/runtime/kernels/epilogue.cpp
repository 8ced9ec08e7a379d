// Elementwise chains run on blocks of a convolution's output (epilogue.h).
#include "epilogue.h"

#include <algorithm>

#include "half_steps.h"

#include "kiln/runtime/half_block.h"
#include "kiln/runtime/memory.h"
#include "kiln/runtime/tensor_util.h"
#include "nn_util.h"
#include "thread_pool.h"

namespace kiln::rt {

bool Epilogue::bind(const std::vector<int64_t>& outDims, bool half, uint16_t* narrowBase,
                    KeptOperands* kept) {
  if (outDims.size() < 2) return false; // no steps: only a ConvInteger's Cast was fused
  half_ = half;
  narrowBase_ = half ? narrowBase : nullptr;
  widened_.clear();
  widened_.reserve(2 * steps_.size()); // pointers into it are kept below
  batch_ = outDims[0];
  channels_ = outDims[1];
  plane_ = 1;
  for (size_t d = 2; d < outDims.size(); ++d)
    plane_ *= outDims[d];
  // Which steps compute in float16: all of a half chain's; in a float32 chain those between a
  // ToHalf and the next ToFloat (whose result must be float32 again by the chain's end).
  stepHalf_.assign(steps_.size(), half);
  bool inHalf = half;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Kind k = steps_[i].kind;
    if (k == Kind::ToHalf || k == Kind::ToFloat) {
      if (half || (k == Kind::ToHalf) == inHalf || steps_[i].a.slot < 0) return false;
      inHalf = k == Kind::ToHalf;
      stepHalf_[i] = inHalf; // its result is float16 (the chain's, when it is last)
      continue;
    }
    stepHalf_[i] = inHalf;
  }
  if (kept && kept->slots.size() != 2 * steps_.size()) kept->slots.assign(2 * steps_.size(), {});
  auto classify = [&](const Operand& o, Bound& b, bool halfOperand, size_t slot) {
    if (!o.tensor) return o.slot >= 0;
    const Tensor* src = o.tensor;
    KeptOperands::Slot* keep = kept && src->buffer() ? &kept->slots[slot] : nullptr;
    if (halfOperand && src->dtype() != DType::Float16) return false;
    if (halfOperand && keep && keep->from == src->buffer().get() &&
        keep->floats.dims() == src->dims()) {
      src = &keep->floats; // the copy an earlier bind took from the widening cache
    } else if (halfOperand) {
      if (auto cached = cachedWidening(*src)) {
        widened_.emplace_back(DType::Float32, src->dims(), std::move(cached));
        if (keep) *keep = {src->buffer().get(), widened_.back()};
      } else {
        // An activation operand: widened by the conversion instruction alone, as the
        // convolution's input (the chain's output is narrowed by floatsToHalves).
        OutTensor wide(DType::Float32, src->dims());
        const auto* from = reinterpret_cast<const uint16_t*>(src->data());
        const auto count = static_cast<int64_t>(src->elementCount());
        vec::widenHalvesAll(from, wide.data<float>(), count);
        widened_.push_back(std::move(wide).finish());
      }
      src = &widened_.back();
    }
    const Tensor& t = *src;
    if (t.dtype() != DType::Float32 || t.dims().size() > outDims.size()) return false;
    b.data = reinterpret_cast<const float*>(t.data());
    if (t.elementCount() == 1) {
      b.shape = Shape::Scalar;
      return true;
    }
    if (t.dims() == outDims) {
      b.shape = Shape::Full;
      return true;
    }
    // Right-aligned against [N, C, spatial...]: C on the channel axis, 1 everywhere else.
    const size_t shift = outDims.size() - t.dims().size();
    if (shift > 1) return false;
    for (size_t d = 0; d < t.dims().size(); ++d)
      if (t.dims()[d] != (d + shift == 1 ? channels_ : 1)) return false;
    b.shape = Shape::PerChannel;
    return true;
  };
  picksAHalf_.assign(steps_.size(), false);
  auto isHalfValue = [](float v) { return halfToFloat(floatToHalf(v)) == v; };
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (!stepHalf_[i]) continue;
    const Step& st = steps_[i];
    picksAHalf_[i] =
        (st.kind == Kind::Unary &&
         (st.unOp == vec::UnOp::Relu ||
          (st.unOp == vec::UnOp::Clip && isHalfValue(st.p0) && isHalfValue(st.p1)))) ||
        (st.kind == Kind::Binary && (st.binOp == vec::BinOp::Max || st.binOp == vec::BinOp::Min));
  }
  boundA_.assign(steps_.size(), Bound{});
  boundB_.assign(steps_.size(), Bound{});
  factors_.assign(steps_.size(), {});
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& st = steps_[i];
    if (!classify(st.a, boundA_[i], stepHalf_[i], 2 * i)) return false;
    if (st.kind == Kind::Binary && !classify(st.b, boundB_[i], stepHalf_[i], 2 * i + 1))
      return false;
    if (st.kind != Kind::BatchNorm) continue;
    // BatchNorm joins float32 chains only (a float16 one stays with the nodes' own kernels).
    if (stepHalf_[i] || st.a.slot < 0) return false;
    const float* in[4];
    for (int k = 0; k < 4; ++k) {
      const Tensor* t = st.norm[k];
      if (!t || t->dtype() != DType::Float32 ||
          static_cast<int64_t>(t->elementCount()) != channels_)
        return false;
      in[k] = reinterpret_cast<const float*>(t->data());
    }
    // The factors exactly as the BatchNormalization kernel makes them (nn_util.h).
    std::vector<float>& f = factors_[i];
    f.resize(static_cast<size_t>(2 * channels_));
    for (int64_t c = 0; c < channels_; ++c) {
      const float mul = nn::batchNormMul<float>(in[0][c], in[3][c], st.epsilon);
      f[static_cast<size_t>(c)] = mul;
      f[static_cast<size_t>(channels_ + c)] = nn::batchNormAdd<float>(in[1][c], in[2][c], mul);
    }
  }
  findHardSwishes();
  return true;
}

void Epilogue::findHardSwishes() {
  const size_t count = steps_.size();
  hardSwishAt_.assign(count, false);
  hardSwish_.assign(count, vec::HardSwishSteps{});
  hardSwishTakesInput_ = false;
  auto binary = [&](size_t i, vec::BinOp op) {
    return steps_[i].kind == Kind::Binary && steps_[i].binOp == op;
  };
  auto scalarB = [&](size_t i) {
    return steps_[i].b.slot < 0 && boundB_[i].data && boundB_[i].shape == Shape::Scalar;
  };
  for (size_t i = 0; i + 3 < count; ++i) {
    const int k = steps_[i].a.slot;
    const int s1 = static_cast<int>(i) + 1, s2 = s1 + 1, s3 = s2 + 1;
    const Step& clip = steps_[i + 1];
    const Step& mul = steps_[i + 2];
    if (!binary(i, vec::BinOp::Add) || k < 0 || !scalarB(i)) continue;
    if (clip.kind != Kind::Unary || clip.unOp != vec::UnOp::Clip || clip.a.slot != s1) continue;
    if (!binary(i + 2, vec::BinOp::Mul) ||
        !((mul.a.slot == k && mul.b.slot == s2) || (mul.a.slot == s2 && mul.b.slot == k)))
      continue;
    if (!binary(i + 3, vec::BinOp::Div) || steps_[i + 3].a.slot != s3 || !scalarB(i + 3)) continue;
    if (stepHalf_[i] != stepHalf_[i + 1] || stepHalf_[i] != stepHalf_[i + 2] ||
        stepHalf_[i] != stepHalf_[i + 3])
      continue;
    // The pass keeps the three inner results in registers: no later step may read them.
    bool innerRead = false;
    for (size_t j = i + 4; j < count; ++j)
      for (int slot : {steps_[j].a.slot, steps_[j].b.slot})
        innerRead = innerRead || (slot >= s1 && slot <= s3);
    if (innerRead) continue;
    hardSwishAt_[i] = true;
    // The pass can take the convolution's values as they come when nothing after it reads them
    // (it writes its result over them when it is last).
    if (i == 0 && k == 0) {
      bool inputRead = false;
      for (size_t j = 4; j < count; ++j)
        inputRead = inputRead || steps_[j].a.slot == 0 || steps_[j].b.slot == 0;
      hardSwishTakesInput_ = !inputRead;
    }
    const bool half = stepHalf_[i];
    vec::HardSwishSteps& h = hardSwish_[i];
    h.add = boundB_[i].data[0];
    h.lo = clip.p0;
    h.hi = clip.p1;
    h.div = boundB_[i + 3].data[0];
    h.productOfInput = mul.a.slot == k;
    h.roundAdd = half;
    h.roundClip = half && !picksAHalf_[i + 1];
    h.roundProduct = half;
    if (half) {
      // The quotient is rounded to float16 wherever it goes (narrowed, or rounded in place).
      vec::HardSwishSteps rounded = h;
      rounded.roundLast = true;
      h.divideByReciprocal = vec::hardSwishReciprocalExact(rounded);
    }
    i += 3;
  }
}

void Epilogue::apply(float* y, int64_t n, int64_t channel, int64_t offset, uint16_t* narrowTo,
                     const float* bias) const {
  constexpr int64_t kBlock = 1024; // the live step results stay in L1
  thread_local std::vector<float> scratch;
  const size_t count = steps_.size();
  if (!narrowTo && narrowBase_) narrowTo = narrowBase_ + offset;
  if (count == 0) {
    // Nothing to run: the convolution's values are only rounded (into the output when given),
    // the bias added in the same pass.
    if (bias) {
      int64_t done = 0;
      if (half_ || narrowTo)
        done = vec::binaryScalarRightHalf(vec::BinOp::Add, y, *bias, y, n, narrowTo);
      vec::binaryScalarRight(vec::BinOp::Add, y + done, *bias, y + done, n - done);
      if (narrowTo)
        floatsToHalves(y + done, narrowTo + done, static_cast<size_t>(n - done));
      else if (half_)
        roundThroughHalves(y + done, static_cast<size_t>(n - done));
      return;
    }
    if (narrowTo) {
      floatsToHalves(y, narrowTo, static_cast<size_t>(n));
    } else if (half_) {
      const int64_t done = vec::roundHalfInPlace(y, n);
      roundThroughHalves(y + done, static_cast<size_t>(n - done));
    }
    return;
  }
  if (scratch.size() < count * kBlock) scratch.resize(count * kBlock);
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t len = std::min(kBlock, n - b0);
    float* block = y + b0;
    auto slot = [&](int s) { return s == 0 ? block : scratch.data() + (s - 1) * kBlock; };
    // A half chain rounds each value it makes to float16 (the unfused nodes' float16 outputs):
    // the convolution's values and each step's result but those of steps that pick an operand;
    // the last step's result is narrowed into the output (or, handed over widened, rounded in
    // place: a NaN's payload as half_steps.h says). Both run in registers inside the
    // step's own loop (half_steps.h); what those loops leave goes through the float loop, then
    // roundThroughHalves or floatsToHalves.
    auto rounded = [&](float* dst, int64_t done) {
      if (done < len) roundThroughHalves(dst + done, static_cast<size_t>(len - done));
    };
    // The convolution's values over [from, len): the bias added and, in a half chain, the sum
    // rounded, in one pass.
    auto prepare = [&](int64_t from) {
      float* at = block + from;
      const int64_t m = len - from;
      if (bias) {
        const int64_t done =
            half_ ? vec::binaryScalarRightHalf(vec::BinOp::Add, at, *bias, at, m) : 0;
        vec::binaryScalarRight(vec::BinOp::Add, at + done, *bias, at + done, m - done);
        if (half_) rounded(block, from + done);
      } else if (half_) {
        rounded(block, from + vec::roundHalfInPlace(at, m));
      }
    };
    // A HardSwish first on the convolution's values (hardSwishTakesInput_) prepares them in its
    // own pass, in registers.
    const bool prepareInHardSwish = hardSwishTakesInput_ && (bias || half_);
    if (!prepareInHardSwish) prepare(0);
    int64_t narrowed = 0; // leading elements the last step wrote to narrowTo itself
    // Step i over elements [from, len) of the block.
    auto runStep = [&](size_t i, int64_t from) {
      const Step& st = steps_[i];
      const bool last = i + 1 == count;
      const int64_t m = len - from;
      // The last step writes the output in place (the loops allow exact aliasing).
      float* dst = (last ? block : slot(static_cast<int>(i) + 1)) + from;
      auto at = [&](int s) { return slot(s) + from; };
      // Without narrowTo (a half chain's output handed over widened) the last step rounds its
      // result in registers too.
      const bool round = stepHalf_[i] && (!last || !narrowTo) && !picksAHalf_[i];
      uint16_t* narrow = stepHalf_[i] && last && narrowTo ? narrowTo + b0 + from : nullptr;
      const bool inRegisters = round || narrow;
      auto roundRest = [&](int64_t done) {
        if (done < m) roundThroughHalves(dst + done, static_cast<size_t>(m - done));
      };
      int64_t done = 0; // leading elements computed (and rounded or narrowed) by a half loop
      if (st.kind == Kind::ToHalf || st.kind == Kind::ToFloat) {
        // The Casts of a float16 stretch: ToHalf rounds as floatsToHalves does (NaN payloads as
        // half_steps.h says), ToFloat widens the float16 value the Cast kernel would read, so a
        // NaN becomes the plain quiet NaN with its sign as the unfused nodes' float16 tensor has
        // it.
        const float* in = at(st.a.slot);
        if (in != dst) std::copy(in, in + m, dst);
        if (st.kind == Kind::ToHalf)
          roundRest(vec::roundHalfInPlace(dst, m));
        else
          roundThroughHalves(dst, static_cast<size_t>(m));
        return;
      } else if (st.kind == Kind::Unary) {
        const float* in = at(st.a.slot);
        if (inRegisters) done = vec::unaryHalf(st.unOp, in, dst, m, st.p0, st.p1, narrow);
        vec::unary(st.unOp, in + done, dst + done, m - done, st.p0, st.p1);
      } else if (st.kind == Kind::BatchNorm) {
        const float* f = factors_[i].data();
        vec::scaleShift(at(st.a.slot), f[channel], f[channels_ + channel], dst, m);
      } else {
        const Bound& ba = boundA_[i];
        const Bound& bb = boundB_[i];
        auto scalarOf = [&](const Bound& b) {
          return b.shape == Shape::Scalar ? b.data[0] : b.data[channel];
        };
        if ((st.a.slot >= 0 && st.b.slot >= 0) || (st.a.slot >= 0 && bb.shape == Shape::Full) ||
            (st.a.slot < 0 && ba.shape == Shape::Full)) {
          const float* a = st.a.slot >= 0 ? at(st.a.slot) : ba.data + offset + b0 + from;
          const float* b = st.b.slot >= 0 ? at(st.b.slot) : bb.data + offset + b0 + from;
          if (inRegisters) done = vec::binarySameHalf(st.binOp, a, b, dst, m, narrow);
          vec::binarySame(st.binOp, a + done, b + done, dst + done, m - done);
        } else if (st.a.slot >= 0) {
          const float* a = at(st.a.slot);
          const float s = scalarOf(bb);
          if (inRegisters) done = vec::binaryScalarRightHalf(st.binOp, a, s, dst, m, narrow);
          vec::binaryScalarRight(st.binOp, a + done, s, dst + done, m - done);
        } else {
          const float* b = at(st.b.slot);
          const float s = scalarOf(ba);
          if (inRegisters) done = vec::binaryScalarLeftHalf(st.binOp, s, b, dst, m, narrow);
          vec::binaryScalarLeft(st.binOp, s, b + done, dst + done, m - done);
        }
      }
      if (round) roundRest(done);
      if (narrow) narrowed = from + done;
    };
    for (size_t i = 0; i < count; ++i) {
      if (hardSwishAt_[i]) {
        // A decomposed HardSwish (hardSwishAt_): its four steps in one pass, each result rounded
        // (or the last narrowed) as its own step would; the four steps one by one for what the
        // pass leaves.
        const size_t end = i + 3;
        const bool last = end + 1 == count;
        const bool half = stepHalf_[i];
        vec::HardSwishSteps h = hardSwish_[i];
        h.narrow = half && last && narrowTo ? narrowTo + b0 : nullptr;
        h.roundLast = half && !h.narrow;
        const bool prepareHere = i == 0 && prepareInHardSwish;
        if (prepareHere) {
          h.addInputBias = bias != nullptr;
          h.inputBias = bias ? *bias : 0.0f;
          h.roundInput = half_;
        }
        float* dst = last ? block : slot(static_cast<int>(end) + 1);
        const int64_t done = vec::hardSwishSteps(h, slot(steps_[i].a.slot), dst, len);
        if (h.narrow) narrowed = done;
        if (done < len) {
          if (prepareHere) prepare(done);
          for (size_t j = i; j <= end; ++j)
            runStep(j, done);
        }
        i = end;
        continue;
      }
      runStep(i, 0);
    }
    // What the last step left is rounded by the narrowing.
    if (narrowTo)
      floatsToHalves(block + narrowed, narrowTo + b0 + narrowed,
                     static_cast<size_t>(len - narrowed));
  }
}

bool Epilogue::channelAgnostic() const {
  if (boundA_.size() != steps_.size()) return false;
  // A half chain writes each block's result in place or at the block's own flat offset of
  // narrowBase_, so in whatever layout the block was in. A float16 stretch of a float32 chain
  // narrows into its own buffers, laid out as the output.
  if (!half_ && std::find(stepHalf_.begin(), stepHalf_.end(), true) != stepHalf_.end())
    return false;
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].kind == Kind::BatchNorm) return false;
    for (const Bound* b : {&boundA_[i], &boundB_[i]})
      if (b->data && b->shape != Shape::Scalar) return false;
  }
  return true;
}

void Epilogue::applyAll(int threads, float* y) const {
  const int64_t planes = batch_ * channels_;
  // Each step reads and writes the block once, in cache.
  const double work = static_cast<double>(planes * plane_) *
                      static_cast<double>(steps_.size() + 1) * pool::kNsPerCachedStep;
  pool::parallelFor(pool::threadsFor(threads, work), planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      apply(y + p * plane_, plane_, p % channels_, p * plane_);
  });
}

} // namespace kiln::rt
