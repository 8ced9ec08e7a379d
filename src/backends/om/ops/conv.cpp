// .om rules for the convolutions: Conv → Conv2D (1-D over an [N,C,1,L] view) / Conv3D,
// ConvTranspose → Conv2DTranspose / Conv3DTranspose.
#include <optional>
#include <utility>

#include "../om_context.h"

namespace kiln::om {
namespace {

std::string spatialFormat(size_t spatial) { return spatial == 3 ? "NCDHW" : "NCHW"; }

// CANN's IR gives Conv2DTranspose / Conv3DTranspose no float32 data kernel (x and filter take
// float16, bfloat16, int8; y takes float32): float32 data goes in as float16 and comes out float32,
// the cube mode ATC picks for them under force_fp32 (formats/om.md §5.2).
Port cubeInput(Lowerer& l, const Port& p, const std::string& suffix, const std::string& layout) {
  if (p.dtype != DType::Float32) return p;
  OpDef* cast = l.op("Cast", suffix);
  l.input(cast, p, layout);
  (*cast->mutable_attr())["dst_type"] = attrI(geProtoToCxxDType(ge::proto::DT_FLOAT16));
  return l.output(cast, DType::Float16, p.shape, "", layout);
}

// Conv → Conv2D / Conv3D; 1-D Conv → Unsqueeze, Conv2D with a 1×k window, Squeeze.
KILN_OM_LOWERING(
    "Conv",
    [](const Node& n, const OpContext&) -> std::string {
      int64_t r = rankOf(n.input(0));
      const Value* w = n.input(1);
      if (r != 3 && r != 4 && r != 5)
        return fmt::format("Conv with a rank-{} input (1-D, 2-D and 3-D convolutions lower)", r);
      if (rankOf(w) != r) return "Conv whose weight rank differs from the input's";
      if (!w->shape().isStatic()) return "Conv with a dynamic weight shape";
      std::string autoPad = nodeString(n, "auto_pad", "NOTSET");
      if (autoPad != "NOTSET" && autoPad != "VALID" && !staticShape(n.input(0)))
        return "Conv auto_pad SAME_* with a dynamic input shape";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      size_t s = static_cast<size_t>(rankOf(n.input(0)) - 2);
      auto wdims = n.input(1)->shape().staticDims();
      std::vector<int64_t> kernel(wdims.begin() + 2, wdims.end());
      auto strides = nodeInts(n, "strides").value_or(std::vector<int64_t>(s, 1));
      auto dilations = nodeInts(n, "dilations").value_or(std::vector<int64_t>(s, 1));
      auto pads =
          explicitPads(n, kernel, strides, dilations).value_or(std::vector<int64_t>(2 * s, 0));
      const bool oneD = s == 1;
      Port x = l.in(0), w = l.in(1);
      if (oneD) {
        // The H axis of the view: kernel, stride and dilation 1, no padding.
        kernel = {1, kernel[0]};
        strides = {1, strides[0]};
        dilations = {1, dilations[0]};
        pads = {0, pads[0], 0, pads[1]};
        x = l.unsqueezeH(x, "view");
        w = n.input(1)->isInitializer() ? l.constView(1, {wdims[0], wdims[1], 1, wdims[2]})
                                        : l.unsqueezeH(w, "weight_view");
      }
      std::string format = spatialFormat(s);
      OpDef* o = l.op(s == 3 ? "Conv3D" : "Conv2D");
      l.input(o, x, format);
      l.input(o, w, format);
      if (hasInput(n, 2)) l.input(o, l.in(2));
      auto& a = *o->mutable_attr();
      a["strides"] = attrInts(withBatchChannel(strides));
      a["dilations"] = attrInts(withBatchChannel(dilations));
      a["pads"] = attrInts(interleavePads(pads));
      a["groups"] = attrI(nodeInt(n, "group", 1));
      a["data_format"] = attrS(format);
      a["offset_x"] = attrI(0);
      if (oneD)
        l.squeezeHOutput(o);
      else
        l.outputs(o, format);
    });
void convRaisingRules() {
  for (const char* type : {"Conv2D", "Conv3D"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          Node* node = nullptr;
          if (Value* x = r.in(op, 0); x && x->dtype() == DType::Int8 && op.type() == "Conv2D") {
            KILN_TRY(raiseInt8Conv2D(r, op, node));
          } else {
            std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
            if (Value* b = r.in(op, 2)) inputs.push_back(b);
            node = r.emit(op, "Conv", inputs);
          }
          auto strides = getInts(op, "strides"), dilations = getInts(op, "dilations");
          auto pads = getInts(op, "pads");
          if (strides.size() < 3 || dilations.size() != strides.size() ||
              pads.size() != 2 * (strides.size() - 2))
            return r.unsupported(op, "strides/dilations/pads do not match the data format");
          node->setAttribute("strides", Attribute::ofInts({strides.begin() + 2, strides.end()}));
          node->setAttribute("dilations",
                             Attribute::ofInts({dilations.begin() + 2, dilations.end()}));
          node->setAttribute("pads", Attribute::ofInts(deinterleavePads(pads)));
          node->setAttribute("group", Attribute::ofInt(getI(op, "groups", 1)));
          return Status::ok();
        },
        __FILE__);
}
const bool kConvRaisingRulesRegistered = (convRaisingRules(), true);

// ConvTranspose's explicit pads and output padding, resolving output_shape and auto_pad SAME_* as
// ONNX does (an output larger than the natural one: negative end padding, which is extra output
// padding). Empty when the begin padding would be negative.
std::optional<std::pair<std::vector<int64_t>, std::vector<int64_t>>> transposePads(const Node& n,
                                                                                   size_t s) {
  auto xd = n.input(0)->shape().staticDims(), wd = n.input(1)->shape().staticDims();
  auto strides = nodeInts(n, "strides").value_or(std::vector<int64_t>(s, 1));
  auto dilations = nodeInts(n, "dilations").value_or(std::vector<int64_t>(s, 1));
  auto pads = nodeInts(n, "pads").value_or(std::vector<int64_t>(2 * s, 0));
  auto outPad = nodeInts(n, "output_padding").value_or(std::vector<int64_t>(s, 0));
  auto outputShape = nodeInts(n, "output_shape").value_or(std::vector<int64_t>{});
  if (outputShape.size() > s) outputShape.erase(outputShape.begin(), outputShape.end() - s);
  const std::string autoPad = nodeString(n, "auto_pad", "NOTSET");
  if (strides.size() != s || dilations.size() != s || pads.size() != 2 * s || outPad.size() != s ||
      (!outputShape.empty() && outputShape.size() != s))
    return std::nullopt;
  if (autoPad == "VALID") pads.assign(2 * s, 0);
  if (!outputShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")
    for (size_t d = 0; d < s; ++d) {
      const int64_t in = xd[2 + d], kernel = (wd[2 + d] - 1) * dilations[d] + 1;
      const int64_t full = strides[d] * (in - 1) + outPad[d] + kernel;
      const int64_t out = outputShape.empty() ? in * strides[d] : outputShape[d];
      const int64_t total = full - out;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pads[d] = autoPad == "SAME_UPPER" ? half : total - half;
      pads[d + s] = total - pads[d];
    }
  for (size_t d = 0; d < s; ++d) {
    if (pads[d] < 0) return std::nullopt;
    if (pads[d + s] < 0) {
      outPad[d] -= pads[d + s];
      pads[d + s] = 0;
    }
  }
  return std::make_pair(pads, outPad);
}

// ConvTranspose → Conv2DTranspose / Conv3DTranspose (input_size, x, filter, bias); 1-D over an
// [N, C, 1, L] view.
KILN_OM_LOWERING(
    "ConvTranspose",
    [](const Node& n, const OpContext&) -> std::string {
      const int64_t r = rankOf(n.input(0));
      if (r != 3 && r != 4 && r != 5) return "ConvTranspose that is not 1-D, 2-D or 3-D";
      if (!staticShape(n.input(0)) || !staticShape(n.input(1)) || !staticShape(n.output(0)))
        return "ConvTranspose with dynamic shapes";
      if (!transposePads(n, static_cast<size_t>(r - 2)))
        return "ConvTranspose whose output_shape / auto_pad asks for negative begin padding";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      size_t s = static_cast<size_t>(rankOf(n.input(0)) - 2);
      auto strides = nodeInts(n, "strides").value_or(std::vector<int64_t>(s, 1));
      auto dilations = nodeInts(n, "dilations").value_or(std::vector<int64_t>(s, 1));
      auto [pads, outPad] = *transposePads(n, s);
      auto outDims = n.output(0)->shape().staticDims();
      auto wdims = n.input(1)->shape().staticDims();
      Port x = l.in(0), w = l.in(1);
      const bool oneD = s == 1;
      if (oneD) {
        strides = {1, strides[0]};
        dilations = {1, dilations[0]};
        pads = {0, pads[0], 0, pads[1]};
        outPad = {0, outPad[0]};
        outDims.insert(outDims.begin() + 2, 1);
        x = l.unsqueezeH(x, "view");
        w = n.input(1)->isInitializer() ? l.constView(1, {wdims[0], wdims[1], 1, wdims[2]})
                                        : l.unsqueezeH(w, "weight_view");
      }
      std::string format = spatialFormat(s);
      OpDef* o = l.op(s == 3 ? "Conv3DTranspose" : "Conv2DTranspose", oneD ? "transpose" : "");
      l.input(o, l.constInts("input_size", outDims));
      l.input(o, cubeInput(l, x, "x_fp16", format), format);
      l.input(o, cubeInput(l, w, "filter_fp16", format), format);
      if (hasInput(n, 2)) l.input(o, l.in(2));
      auto& a = *o->mutable_attr();
      a["strides"] = attrInts(withBatchChannel(strides));
      a["dilations"] = attrInts(withBatchChannel(dilations));
      a["pads"] = attrInts(interleavePads(pads));
      a["groups"] = attrI(nodeInt(n, "group", 1));
      a["data_format"] = attrS(format);
      // N and C take no output padding (0), unlike strides/dilations whose N/C entries are 1.
      std::vector<int64_t> outPadFull{0, 0};
      outPadFull.insert(outPadFull.end(), outPad.begin(), outPad.end());
      a["output_padding"] = attrInts(outPadFull);
      a["offset_x"] = attrI(0);
      if (oneD)
        l.squeezeHOutput(o);
      else
        l.outputs(o, format);
    });
void convTransposeRaisingRules() {
  for (const char* type : {"Conv2DTranspose", "Conv3DTranspose"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          std::vector<Value*> inputs{r.in(op, 1), r.in(op, 2)};
          if (Value* b = r.in(op, 3)) inputs.push_back(b);
          // float16 in, float32 out (cubeInput): the exact widening, then ONNX's one type.
          if (op.output_desc_size() > 0) {
            const ValueType outType = Raiser::descType(op.output_desc(0));
            for (Value*& v : inputs)
              if (v && v->dtype() != outType.dtype) {
                v = r.helper(op.name() + "_fp32", "Cast", {v});
                v->producer()->setAttribute("to", Attribute::ofInt(dtypeToOnnx(outType.dtype)));
              }
          }
          auto strides = getInts(op, "strides"), dilations = getInts(op, "dilations");
          auto pads = getInts(op, "pads"), outPad = getInts(op, "output_padding");
          if (strides.size() < 4 || dilations.size() != strides.size() ||
              pads.size() != 2 * (strides.size() - 2))
            return r.unsupported(op, "strides/dilations/pads do not match the data format");
          Node* node = r.emit(op, "ConvTranspose", inputs, 1);
          node->setAttribute("strides", Attribute::ofInts({strides.begin() + 2, strides.end()}));
          node->setAttribute("dilations",
                             Attribute::ofInts({dilations.begin() + 2, dilations.end()}));
          node->setAttribute("pads", Attribute::ofInts(deinterleavePads(pads)));
          node->setAttribute("group", Attribute::ofInt(getI(op, "groups", 1)));
          if (outPad.size() == strides.size())
            node->setAttribute("output_padding",
                               Attribute::ofInts({outPad.begin() + 2, outPad.end()}));
          return Status::ok();
        },
        __FILE__);
}
const bool kConvTransposeRaisingRulesRegistered = (convTransposeRaisingRules(), true);
} // namespace
} // namespace kiln::om
