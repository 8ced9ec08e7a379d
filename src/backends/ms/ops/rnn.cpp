// .ms rules of the rnn family: LSTM and GRU to the MindSpore Lite LSTM (87) and GRU (172) ops in
// their ONNX-converted form, and back. What those ops cannot express (reverse direction, layout 1,
// clip, other activations, peepholes, sequence_lens, GRU linear_before_reset, run-time weights)
// and ONNX RNN (no .ms op) are refused here and unrolled into standard ops by the conversion
// pipeline (passes/expand_rnn.cpp).
//
// Format facts (the runtime's non-MindIR LSTM kernel and GRU kernel, nnacl lstm/gru infer):
//   LSTM inputs  X [T, N, I], W [D, 4H, I], R [D, 4H, H], B [D, 8H] (W biases then R biases),
//                h0 [D, N, H], c0 [D, N, H]; gates in ONNX order i, o, f, c; activations
//                sigmoid / tanh / tanh; outputs Y [T, D, N, H], Y_h, Y_c [D, N, H]. Attributes:
//                bidirectional, has_bias, input_size, hidden_size, num_layers 1, num_directions.
//   GRU  inputs  X, W [D, 3H, I], R [D, 3H, H], B [D, 6H], h0 [D, N, H] (and an optional
//                sequence length the runtime takes only when equal over the batch); gates z, r, h;
//                h~ = tanh(x W_h + Wb_h + (r ⊙ H) R_h + Rb_h) (ONNX linear_before_reset 0);
//                outputs Y [T, D, N, H], Y_h [D, N, H]. Attribute: bidirectional.
#include <string>
#include <vector>

#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "kiln/passes/expand_rnn.h"
#include "ops/rnn.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

bool isConstant(const Value* v) { return v && v->isInitializer() && !v->isGraphInput(); }

// Why the .ms op cannot take the node ("" when it can); `cell` is LSTM or GRU.
std::string nativeReason(const Node& n) {
  auto a = ops::rnnAttrs(n);
  if (!a) return a.status().message();
  const std::string op = n.opType();
  std::string why;
  if (a->reverse)
    why = "direction 'reverse' (the .ms " + op + " runs forward or bidirectional)";
  else if (a->layout != 0)
    why = "layout 1 (the .ms " + op + " takes [seq, batch, input])";
  else if (a->clip)
    why = "clip (the .ms " + op + " does not clip)";
  else if (!a->defaultActivations())
    why = "activations other than the defaults";
  else if (a->inputForget)
    why = "input_forget 1";
  else if (a->linearBeforeReset)
    why = "linear_before_reset 1 (the .ms GRU applies the reset gate before R_h)";
  else if (n.input(4))
    why = "sequence_lens";
  else if (a->cell == ops::RnnCell::Lstm && n.input(7))
    why = "peepholes (P)";
  else if (!isConstant(n.input(1)) || !isConstant(n.input(2)) ||
           (n.input(3) && !isConstant(n.input(3))))
    why = "W, R and B computed at run time (the .ms " + op + " packs constant weights)";
  else if (n.input(0) && n.input(0)->dtype() != DType::Float32 &&
           n.input(0)->dtype() != DType::Float16)
    why = "X of dtype " + std::string(dtypeName(n.input(0)->dtype()));
  if (why.empty()) {
    const Value* x = n.input(0);
    const bool staticBatch = x && x->shape().hasRank() && x->shape().rank() == 3 &&
                             x->shape()[1].isStatic();
    const bool statesGiven = n.input(5) && (a->cell != ops::RnnCell::Lstm || n.input(6));
    const auto& wd = n.input(1)->initializer().dims();
    if (wd.size() != 3 || wd[0] != a->dirs || (a->hidden > 0 && wd[1] != a->gates * a->hidden))
      why = "W of an unexpected shape";
    else if (!statesGiven && !staticBatch)
      why = "no initial state over a batch that is not static";
  }
  return why;
}

std::string checkRnn(const Node& n, const lowering::OpContext&) {
  std::string why = nativeReason(n);
  if (why.empty()) return {};
  const std::string blocker = rnnUnrollBlocker(n);
  if (blocker.empty()) return why + "; the conversion pipeline unrolls it into standard ops";
  return why + "; it cannot be unrolled either: " + blocker;
}

Expected<uint32_t> constInput(LoweringContext& ctx, const Value* v) {
  auto c = ctx.constOf(v);
  if (!c) return bad("'{}' is not a constant", v->name());
  return ctx.constTensor(c->quantized ? dequantize(*c) : c->tensor, c->name);
}

// LSTM: inputs X, W [D, 4H, I], R [D, 4H, H], B [D, 8H], h0 [D, N, H], c0 [D, N, H]; outputs Y
// [T, D, N, H], Y_h, Y_c [D, N, H].
Status lowerRecurrent(LoweringContext& ctx, const Node& n) {
  if (std::string why = nativeReason(n); !why.empty()) return bad("{}", why);
  KILN_ASSIGN_OR_RETURN(const ops::RnnAttrs a, ops::rnnAttrs(n));
  const bool lstm = a.cell == ops::RnnCell::Lstm;
  const auto& wd = n.input(1)->initializer().dims();
  const int64_t D = a.dirs, G = a.gates, H = wd[1] / G, I = wd[2];
  KILN_ASSIGN_OR_RETURN(uint32_t x, ctx.input(n.input(0), Layout::Onnx));
  KILN_ASSIGN_OR_RETURN(uint32_t w, constInput(ctx, n.input(1)));
  KILN_ASSIGN_OR_RETURN(uint32_t r, constInput(ctx, n.input(2)));
  uint32_t b;
  if (n.input(3)) {
    KILN_ASSIGN_OR_RETURN(b, constInput(ctx, n.input(3)));
  } else {
    b = ctx.floatConst(std::vector<float>(size_t(D * 2 * G * H), 0.0f),
                       n.output(0) ? n.output(0)->name() + "_bias" : "rnn_bias",
                       {int32_t(D), int32_t(2 * G * H)});
  }
  std::vector<uint32_t> ins = {x, w, r, b};
  for (size_t i : lstm ? std::vector<size_t>{5, 6} : std::vector<size_t>{5}) {
    if (n.input(i)) {
      KILN_ASSIGN_OR_RETURN(uint32_t s, ctx.input(n.input(i), Layout::Onnx));
      ins.push_back(s);
      continue;
    }
    const int64_t batch = n.input(0)->shape()[1].value();
    ins.push_back(ctx.floatConst(std::vector<float>(size_t(D * batch * H), 0.0f),
                                 fmt::format("{}_state{}", n.name().empty() ? "rnn" : n.name(), i),
                                 {int32_t(D), int32_t(batch), int32_t(H)}));
  }
  std::vector<uint32_t> outs;
  for (size_t i = 0; i < (lstm ? 3u : 2u); ++i) {
    const Value* v = n.output(i);
    if (v) {
      KILN_ASSIGN_OR_RETURN(uint32_t id, ctx.output(v, Layout::Onnx));
      outs.push_back(id);
      continue;
    }
    // An omitted output still gets the tensor the op writes.
    MsTensor t;
    t.name = fmt::format("{}_unused{}", n.name().empty() ? "rnn" : n.name(), i);
    outs.push_back(ctx.addTensor(std::move(t)));
  }
  if (lstm) {
    ctx.emit(
        fb::PrimitiveType_LSTM,
        [=](FBB& fbb) {
          return fb::CreateLSTM(fbb, D == 2, true, I, H, 1, D, 0.0f, 0.0f, 0.0f, 0).Union();
        },
        ins, outs);
  } else {
    ctx.emit(
        fb::PrimitiveType_GRU, [=](FBB& fbb) { return fb::CreateGRU(fbb, D == 2).Union(); }, ins,
        outs);
  }
  return Status::ok();
}

// ONNX RNN: MindSpore Lite has no plain RNN op; the conversion pipeline unrolls it.
std::string checkPlainRnn(const Node& n, const lowering::OpContext&) {
  const std::string why = "MindSpore Lite has no RNN op";
  const std::string blocker = rnnUnrollBlocker(n);
  if (blocker.empty()) return why + "; the conversion pipeline unrolls it into standard ops";
  return why + ", and it cannot be unrolled: " + blocker;
}

Status lowerPlainRnn(LoweringContext&, const Node& n) {
  return bad("{}", checkPlainRnn(n, lowering::OpContext{}));
}

KILN_MS_LOWERING("RNN", checkPlainRnn, lowerPlainRnn);
KILN_MS_LOWERING("LSTM", checkRnn, lowerRecurrent);
KILN_MS_LOWERING("GRU", checkRnn, lowerRecurrent);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

namespace kiln::ms {

namespace {

// The ONNX-converted form: X, W, R, B, initial states (ONNX layout and gate order).
Status raiseRecurrent(RaisingContext& ctx, bool lstm, bool bidirectional) {
  const size_t want = lstm ? 6 : 5;
  if (ctx.inputCount() != want)
    return ctx.nodeUnsupported(fmt::format("{} inputs (kiln reads the {}-input ONNX form)",
                                           ctx.inputCount(), want));
  if (ctx.outputCount() < (lstm ? 3u : 2u))
    return ctx.nodeUnsupported(fmt::format("{} outputs", ctx.outputCount()));
  const int64_t gates = lstm ? 4 : 3;
  auto wd = ctx.dims(ctx.inIndex(1));
  if (wd.size() != 3 || wd[1] % gates != 0)
    return ctx.nodeUnsupported("W is not [directions, gates * hidden, input]");
  std::vector<Value*> ins;
  for (size_t i = 0; i < want; ++i) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.in(i));
    ins.push_back(v);
  }
  ins.insert(ins.begin() + 4, nullptr); // no sequence_lens
  Node* node = ctx.emitNode(
      lstm ? "LSTM" : "GRU", ins, lstm ? 3 : 2,
      {{"hidden_size", Attribute::ofInt(wd[1] / gates)},
       {"direction", Attribute::ofString(bidirectional ? "bidirectional" : "forward")}});
  for (size_t i = 0; i < (lstm ? 3u : 2u); ++i)
    KILN_TRY(ctx.bind(i, node->output(i)));
  return Status::ok();
}

Status raiseLSTM(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::LSTM* l = p.value_as_LSTM();
  if (l->proj_size() != 0 || l->zoneout_cell() != 0 || l->zoneout_hidden() != 0)
    return ctx.nodeUnsupported("projection or zoneout (no ONNX LSTM equivalent)");
  if (l->num_layers() > 1) return ctx.nodeUnsupported("more than one layer");
  return raiseRecurrent(ctx, true, l->bidirectional());
}

Status raiseGRU(RaisingContext& ctx, const msfb::Primitive& p) {
  return raiseRecurrent(ctx, false, p.value_as_GRU()->bidirectional());
}

} // namespace

KILN_MS_RAISING(LSTM, raiseLSTM);
KILN_MS_RAISING(GRU, raiseGRU);

} // namespace kiln::ms
