// Recurrent kernels: RNN, GRU and LSTM (all directions, layouts, activations, clip,
// sequence_lens, initial states). Input projections for all steps are one BLAS GEMM per
// direction; each step adds one recurrent GEMM over the batch.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "nn_util.h"

namespace kiln::rt {
namespace {

using nn::Staged;
using nn::StagedOut;

enum class CellKind { Rnn, Gru, Lstm };

enum class ActKind {
  Sigmoid,
  Tanh,
  Relu,
  Affine,
  LeakyRelu,
  ThresholdedRelu,
  ScaledTanh,
  HardSigmoid,
  Elu,
  Softsign,
  Softplus
};

struct Act {
  ActKind kind = ActKind::Sigmoid;
  double alpha = 0, beta = 0;
};

template <typename T> void applyAct(const Act& a, T* v, int64_t n) {
  const T alpha = static_cast<T>(a.alpha), beta = static_cast<T>(a.beta);
  switch (a.kind) {
  case ActKind::Sigmoid:
    for (int64_t i = 0; i < n; ++i)
      v[i] = T{1} / (T{1} + std::exp(-v[i]));
    break;
  case ActKind::Tanh:
    for (int64_t i = 0; i < n; ++i)
      v[i] = std::tanh(v[i]);
    break;
  case ActKind::Relu:
    for (int64_t i = 0; i < n; ++i)
      v[i] = std::max(v[i], T{0});
    break;
  case ActKind::Affine:
    for (int64_t i = 0; i < n; ++i)
      v[i] = alpha * v[i] + beta;
    break;
  case ActKind::LeakyRelu:
    for (int64_t i = 0; i < n; ++i)
      v[i] = v[i] >= T{0} ? v[i] : alpha * v[i];
    break;
  case ActKind::ThresholdedRelu:
    for (int64_t i = 0; i < n; ++i)
      v[i] = v[i] > alpha ? v[i] : T{0};
    break;
  case ActKind::ScaledTanh:
    for (int64_t i = 0; i < n; ++i)
      v[i] = alpha * std::tanh(beta * v[i]);
    break;
  case ActKind::HardSigmoid:
    for (int64_t i = 0; i < n; ++i)
      v[i] = std::clamp(alpha * v[i] + beta, T{0}, T{1});
    break;
  case ActKind::Elu:
    for (int64_t i = 0; i < n; ++i)
      v[i] = v[i] >= T{0} ? v[i] : alpha * (std::exp(v[i]) - T{1});
    break;
  case ActKind::Softsign:
    for (int64_t i = 0; i < n; ++i)
      v[i] = v[i] / (T{1} + std::fabs(v[i]));
    break;
  case ActKind::Softplus:
    for (int64_t i = 0; i < n; ++i)
      v[i] = std::log1p(std::exp(v[i]));
    break;
  }
}

// Parses the activations attribute; alpha/beta values are consumed in order by the functions
// that take them, the others fall back to each function's own defaults.
Status parseActivations(const KernelContext& ctx, CellKind kind, int64_t dirs,
                        std::vector<Act>& acts) {
  const size_t perDir = kind == CellKind::Rnn ? 1 : kind == CellKind::Gru ? 2 : 3;
  std::vector<std::string> names;
  if (const Attribute* a = ctx.attr("activations"); a && a->kind() == AttrKind::Strings)
    names = a->asStrings();
  if (names.empty()) {
    if (kind == CellKind::Rnn)
      names = {"Tanh"};
    else if (kind == CellKind::Gru)
      names = {"Sigmoid", "Tanh"};
    else
      names = {"Sigmoid", "Tanh", "Tanh"};
  }
  if (names.size() == perDir && dirs == 2) {
    std::vector<std::string> forward = names;
    names.insert(names.end(), forward.begin(), forward.end());
  }
  if (names.size() != perDir * static_cast<size_t>(dirs))
    return ctx.fail("{} activations given, expected {}", names.size(), perDir * dirs);
  std::vector<float> alphas = ctx.attrFloats("activation_alpha");
  std::vector<float> betas = ctx.attrFloats("activation_beta");
  size_t ai = 0, bi = 0;
  auto takeAlpha = [&](double fallback) {
    return ai < alphas.size() ? static_cast<double>(alphas[ai++]) : fallback;
  };
  auto takeBeta = [&](double fallback) {
    return bi < betas.size() ? static_cast<double>(betas[bi++]) : fallback;
  };
  for (const std::string& raw : names) {
    std::string n;
    for (char ch : raw)
      n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    Act act;
    if (n == "sigmoid")
      act.kind = ActKind::Sigmoid;
    else if (n == "tanh")
      act.kind = ActKind::Tanh;
    else if (n == "relu")
      act.kind = ActKind::Relu;
    else if (n == "affine") {
      act.kind = ActKind::Affine;
      act.alpha = takeAlpha(1.0);
      act.beta = takeBeta(0.0);
    } else if (n == "leakyrelu") {
      act.kind = ActKind::LeakyRelu;
      act.alpha = takeAlpha(0.01);
    } else if (n == "thresholdedrelu") {
      act.kind = ActKind::ThresholdedRelu;
      act.alpha = takeAlpha(1.0);
    } else if (n == "scaledtanh") {
      act.kind = ActKind::ScaledTanh;
      act.alpha = takeAlpha(1.0);
      act.beta = takeBeta(1.0);
    } else if (n == "hardsigmoid") {
      act.kind = ActKind::HardSigmoid;
      act.alpha = takeAlpha(0.2);
      act.beta = takeBeta(0.5);
    } else if (n == "elu") {
      act.kind = ActKind::Elu;
      act.alpha = takeAlpha(1.0);
    } else if (n == "softsign")
      act.kind = ActKind::Softsign;
    else if (n == "softplus")
      act.kind = ActKind::Softplus;
    else
      return ctx.unsupported("activation '{}'", raw);
    acts.push_back(act);
  }
  return Status::ok();
}

struct RnnConfig {
  CellKind kind = CellKind::Rnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  bool batchFirst = false, reverseOnly = false, linearBeforeReset = false, inputForget = false;
  double clip = 0; // 0: no clipping
  std::vector<int64_t> lens;
  std::vector<Act> acts;
};

// Swaps the two leading axes of a [a, b, rest] array.
template <typename T> std::vector<T> swapLeading(const T* src, int64_t a, int64_t b, int64_t rest) {
  std::vector<T> out(static_cast<size_t>(a * b * rest));
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      std::copy(src + (i * b + j) * rest, src + (i * b + j + 1) * rest,
                out.begin() + (j * a + i) * rest);
  return out;
}

template <typename T> void clipValues(T* v, int64_t n, double clip) {
  if (clip <= 0) return;
  const T c = static_cast<T>(clip);
  for (int64_t i = 0; i < n; ++i)
    v[i] = std::clamp(v[i], -c, c);
}

// Time-major buffers the recurrence reads and writes.
template <typename T> struct RnnBuffers {
  const T* x = nullptr;    // [seq, batch, input]
  const T* w = nullptr;    // [dirs, gates*hidden, input]
  const T* r = nullptr;    // [dirs, gates*hidden, hidden]
  const T* bias = nullptr; // [dirs, 2*gates*hidden] or null
  const T* h0 = nullptr;   // [dirs, batch, hidden] or null
  const T* c0 = nullptr;   // [dirs, batch, hidden] or null
  const T* peep = nullptr; // [dirs, 3*hidden] or null
  std::vector<T> y;        // [seq, dirs, batch, hidden]
  std::vector<T> yh, yc;   // [dirs, batch, hidden]
};

template <typename T>
void runDirection(int threads, const RnnConfig& c, RnnBuffers<T>& io, int64_t dir) {
  const int64_t H = c.hidden, G = c.gates * H, B = c.batch;
  const bool reverse = c.reverseOnly || dir == 1;
  const T* w = io.w + dir * G * c.input;
  const T* r = io.r + dir * G * H;
  const T* wb = io.bias ? io.bias + dir * 2 * G : nullptr;
  const T* rb = wb ? wb + G : nullptr;
  const size_t actBase = static_cast<size_t>(dir) * (c.kind == CellKind::Rnn   ? 1
                                                     : c.kind == CellKind::Gru ? 2
                                                                               : 3);
  const Act& f = c.acts[actBase];
  const Act& g = c.acts[std::min(actBase + 1, c.acts.size() - 1)];
  const Act& h = c.acts[std::min(actBase + 2, c.acts.size() - 1)];

  // Input projection of every step at once, with the biases that are plain additions folded in.
  std::vector<T> xw(static_cast<size_t>(c.seq * B * G));
  nn::gemm(threads, false, true, c.seq * B, G, c.input, T{1}, io.x, c.input, w, c.input, T{0},
           xw.data(), G);
  if (wb) {
    std::vector<T> add(static_cast<size_t>(G));
    for (int64_t k = 0; k < G; ++k)
      add[static_cast<size_t>(k)] = wb[k] + rb[k];
    // GRU with linear_before_reset keeps Rbh inside the reset gate's product.
    if (c.kind == CellKind::Gru && c.linearBeforeReset)
      for (int64_t k = 2 * H; k < 3 * H; ++k)
        add[static_cast<size_t>(k)] = wb[k];
    for (int64_t row = 0; row < c.seq * B; ++row)
      for (int64_t k = 0; k < G; ++k)
        xw[static_cast<size_t>(row * G + k)] += add[static_cast<size_t>(k)];
  }

  std::vector<T> hs(static_cast<size_t>(B * H), T{0}), cs(static_cast<size_t>(B * H), T{0});
  if (io.h0) std::copy(io.h0 + dir * B * H, io.h0 + (dir + 1) * B * H, hs.begin());
  if (io.c0) std::copy(io.c0 + dir * B * H, io.c0 + (dir + 1) * B * H, cs.begin());
  std::vector<T> rec(static_cast<size_t>(B * G)), gates(static_cast<size_t>(G));
  std::vector<T> resetH(static_cast<size_t>(B * H)), hRec(static_cast<size_t>(B * H));
  std::vector<T> hNew(static_cast<size_t>(B * H)), tmp(static_cast<size_t>(H));
  const T* peep = io.peep ? io.peep + dir * 3 * H : nullptr;
  const int64_t recRows = c.kind == CellKind::Gru && !c.linearBeforeReset ? 2 * H : G;

  for (int64_t s = 0; s < c.seq; ++s) {
    nn::gemm(threads, false, true, B, recRows, H, T{1}, hs.data(), H, r, H, T{0}, rec.data(), G);
    if (c.kind == CellKind::Gru && !c.linearBeforeReset) {
      // h~ needs (r ⊙ H_{t-1}) · Rh^T, so the reset gate comes first.
      for (int64_t b = 0; b < B; ++b) {
        if (s >= c.lens[static_cast<size_t>(b)]) continue;
        const int64_t t = reverse ? c.lens[static_cast<size_t>(b)] - 1 - s : s;
        const T* xg = xw.data() + (t * B + b) * G;
        T* rr = tmp.data();
        for (int64_t k = 0; k < H; ++k)
          rr[k] = xg[H + k] + rec[static_cast<size_t>(b * G + H + k)];
        clipValues(rr, H, c.clip);
        applyAct(f, rr, H);
        for (int64_t k = 0; k < H; ++k)
          resetH[static_cast<size_t>(b * H + k)] = rr[k] * hs[static_cast<size_t>(b * H + k)];
      }
      nn::gemm(threads, false, true, B, H, H, T{1}, resetH.data(), H, r + 2 * H * H, H, T{0},
               hRec.data(), H);
    }
    for (int64_t b = 0; b < B; ++b) {
      T* hb = hNew.data() + b * H;
      const T* hp = hs.data() + b * H;
      T* cb = cs.data() + b * H;
      if (s >= c.lens[static_cast<size_t>(b)]) {
        std::copy(hp, hp + H, hb);
        continue;
      }
      const int64_t t = reverse ? c.lens[static_cast<size_t>(b)] - 1 - s : s;
      const T* xg = xw.data() + (t * B + b) * G;
      const T* rg = rec.data() + b * G;
      for (int64_t k = 0; k < recRows; ++k)
        gates[static_cast<size_t>(k)] = xg[k] + rg[k];
      T* gp = gates.data();
      if (c.kind == CellKind::Rnn) {
        clipValues(gp, H, c.clip);
        applyAct(f, gp, H);
        std::copy(gp, gp + H, hb);
      } else if (c.kind == CellKind::Gru) {
        T* z = gp;
        T* rr = gp + H;
        T* hh = gp + 2 * H;
        clipValues(gp, 2 * H, c.clip);
        applyAct(f, gp, 2 * H);
        if (c.linearBeforeReset) {
          for (int64_t k = 0; k < H; ++k)
            hh[k] = xg[2 * H + k] + rr[k] * (rg[2 * H + k] + (rb ? rb[2 * H + k] : T{0}));
        } else {
          for (int64_t k = 0; k < H; ++k)
            hh[k] = xg[2 * H + k] + hRec[static_cast<size_t>(b * H + k)];
        }
        clipValues(hh, H, c.clip);
        applyAct(g, hh, H);
        for (int64_t k = 0; k < H; ++k)
          hb[k] = (T{1} - z[k]) * hh[k] + z[k] * hp[k];
      } else {
        T* gi = gp;
        T* go = gp + H;
        T* gf = gp + 2 * H;
        T* gc = gp + 3 * H;
        if (peep)
          for (int64_t k = 0; k < H; ++k) {
            gi[k] += peep[k] * cb[k];
            gf[k] += peep[2 * H + k] * cb[k];
          }
        clipValues(gi, H, c.clip);
        clipValues(gf, 2 * H, c.clip); // forget and cell gates are adjacent
        applyAct(f, gi, H);
        if (c.inputForget)
          for (int64_t k = 0; k < H; ++k)
            gf[k] = T{1} - gi[k];
        else
          applyAct(f, gf, H);
        applyAct(g, gc, H);
        for (int64_t k = 0; k < H; ++k)
          cb[k] = gf[k] * cb[k] + gi[k] * gc[k];
        if (peep)
          for (int64_t k = 0; k < H; ++k)
            go[k] += peep[H + k] * cb[k];
        clipValues(go, H, c.clip);
        applyAct(f, go, H);
        std::copy(cb, cb + H, tmp.data());
        applyAct(h, tmp.data(), H);
        for (int64_t k = 0; k < H; ++k)
          hb[k] = go[k] * tmp[static_cast<size_t>(k)];
      }
      std::copy(hb, hb + H, io.y.begin() + ((t * c.dirs + dir) * B + b) * H);
    }
    hs.swap(hNew);
  }
  std::copy(hs.begin(), hs.end(), io.yh.begin() + dir * B * H);
  std::copy(cs.begin(), cs.end(), io.yc.begin() + dir * B * H);
}

Status recurrentOp(KernelContext& ctx, CellKind kind) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  RnnConfig c;
  c.kind = kind;
  c.gates = kind == CellKind::Rnn ? 1 : kind == CellKind::Gru ? 3 : 4;
  c.batchFirst = ctx.attrInt("layout", 0) != 0;
  const std::string direction = ctx.attrString("direction", "forward");
  if (direction == "bidirectional")
    c.dirs = 2;
  else if (direction == "reverse")
    c.reverseOnly = true;
  else if (direction != "forward")
    return ctx.fail("unknown direction '{}'", direction);
  if (x.dims().size() != 3 || w.dims().size() != 3 || r.dims().size() != 3)
    return ctx.fail("X, W and R must have rank 3");
  c.seq = c.batchFirst ? x.dims()[1] : x.dims()[0];
  c.batch = c.batchFirst ? x.dims()[0] : x.dims()[1];
  c.input = x.dims()[2];
  c.hidden = ctx.attrInt("hidden_size", r.dims()[2]);
  const int64_t G = c.gates * c.hidden;
  if (w.dims() != std::vector<int64_t>{c.dirs, G, c.input})
    return ctx.fail("W must be [{}, {}, {}]", c.dirs, G, c.input);
  if (r.dims() != std::vector<int64_t>{c.dirs, G, c.hidden})
    return ctx.fail("R must be [{}, {}, {}]", c.dirs, G, c.hidden);
  if (ctx.hasInput(3) && ctx.input(3).elementCount() != static_cast<uint64_t>(c.dirs * 2 * G))
    return ctx.fail("B must have {} elements", c.dirs * 2 * G);
  c.clip = ctx.attrFloat("clip", 0.0f);
  c.linearBeforeReset = ctx.attrInt("linear_before_reset", 0) != 0;
  c.inputForget = ctx.attrInt("input_forget", 0) != 0;
  KILN_TRY(parseActivations(ctx, kind, c.dirs, c.acts));
  c.lens.assign(static_cast<size_t>(c.batch), c.seq);
  if (ctx.hasInput(4)) {
    std::vector<int64_t> lens = ctx.inputInts(4);
    if (static_cast<int64_t>(lens.size()) != c.batch)
      return ctx.fail("sequence_lens has {} values, batch is {}", lens.size(), c.batch);
    for (int64_t v : lens)
      if (v < 0 || v > c.seq) return ctx.fail("sequence length {} outside [0, {}]", v, c.seq);
    c.lens = lens;
  }
  const uint64_t stateCount = static_cast<uint64_t>(c.dirs * c.batch * c.hidden);
  for (size_t i : {size_t{5}, size_t{6}})
    if (ctx.hasInput(i) && (i == 5 || kind == CellKind::Lstm) &&
        ctx.input(i).elementCount() != stateCount)
      return ctx.fail("initial state input {} must have {} elements", i, stateCount);
  if (kind == CellKind::Lstm && ctx.hasInput(7) &&
      ctx.input(7).elementCount() != static_cast<uint64_t>(c.dirs * 3 * c.hidden))
    return ctx.fail("P must have {} elements", c.dirs * 3 * c.hidden);

  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x), wv(w), rv(r);
    std::optional<Staged<T>> bv, h0v, c0v, pv;
    if (ctx.hasInput(3)) bv.emplace(ctx.input(3));
    if (ctx.hasInput(5)) h0v.emplace(ctx.input(5));
    if (kind == CellKind::Lstm && ctx.hasInput(6)) c0v.emplace(ctx.input(6));
    if (kind == CellKind::Lstm && ctx.hasInput(7)) pv.emplace(ctx.input(7));
    const int64_t B = c.batch, H = c.hidden, D = c.dirs, S = c.seq;
    std::vector<T> xT, h0T, c0T;
    RnnBuffers<T> io;
    io.x = xv.data();
    if (c.batchFirst) {
      xT = swapLeading(xv.data(), B, S, c.input);
      io.x = xT.data();
    }
    io.w = wv.data();
    io.r = rv.data();
    io.bias = bv ? bv->data() : nullptr;
    io.h0 = h0v ? h0v->data() : nullptr;
    io.c0 = c0v ? c0v->data() : nullptr;
    if (c.batchFirst && io.h0) {
      h0T = swapLeading(io.h0, B, D, H);
      io.h0 = h0T.data();
    }
    if (c.batchFirst && io.c0) {
      c0T = swapLeading(io.c0, B, D, H);
      io.c0 = c0T.data();
    }
    io.peep = pv ? pv->data() : nullptr;
    io.y.assign(static_cast<size_t>(S * D * B * H), T{0});
    io.yh.assign(static_cast<size_t>(D * B * H), T{0});
    io.yc.assign(static_cast<size_t>(D * B * H), T{0});
    for (int64_t d = 0; d < D; ++d)
      runDirection(ctx.threads(), c, io, d);

    auto emit = [&](size_t index, const std::vector<T>& data, std::vector<int64_t> dims) {
      if (!ctx.wantsOutput(index)) return;
      StagedOut<T> out(x.dtype(), std::move(dims));
      std::copy(data.begin(), data.end(), out.data());
      ctx.setOutput(index, std::move(out).finish());
    };
    if (c.batchFirst) {
      // [seq, dirs, batch, H] -> [batch, seq, dirs, H]
      std::vector<T> y(io.y.size());
      for (int64_t t = 0; t < S; ++t)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t b = 0; b < B; ++b)
            std::copy(io.y.begin() + ((t * D + d) * B + b) * H,
                      io.y.begin() + ((t * D + d) * B + b + 1) * H,
                      y.begin() + ((b * S + t) * D + d) * H);
      emit(0, y, {B, S, D, H});
      emit(1, swapLeading(io.yh.data(), D, B, H), {B, D, H});
      if (kind == CellKind::Lstm) emit(2, swapLeading(io.yc.data(), D, B, H), {B, D, H});
    } else {
      emit(0, io.y, {S, D, B, H});
      emit(1, io.yh, {D, B, H});
      if (kind == CellKind::Lstm) emit(2, io.yc, {D, B, H});
    }
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

Status rnnOp(KernelContext& ctx) { return recurrentOp(ctx, CellKind::Rnn); }
Status gruOp(KernelContext& ctx) { return recurrentOp(ctx, CellKind::Gru); }
Status lstmOp(KernelContext& ctx) { return recurrentOp(ctx, CellKind::Lstm); }

KILN_REGISTER_KERNEL("RNN", rnnOp);
KILN_REGISTER_KERNEL("GRU", gruOp);
KILN_REGISTER_KERNEL("LSTM", lstmOp);

} // namespace
} // namespace kiln::rt
