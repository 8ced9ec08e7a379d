// AIPP insertion: checks an AippConfig against the model and replaces each targeted input by a
// UINT8 NHWC image input followed by ONNX ops that compute what the AIPP hardware computes.
//
//   before:  x: f32[N,C,H,W] ──▶ consumers
//   after:   x: u8[N,Hs,Ws,Cin] ─▶ Gather (channel swap) ─▶ Slice (crop) ─▶ CSC ─▶ Sub/Sub/Mul
//            (normalization) ─▶ Pad ─▶ Transpose (NHWC→NCHW) ─▶ Cast ──▶ consumers
//
// CSC is integer arithmetic: MatMul in int32 of the 3×3 matrix with the (biased) pixel, a floor
// division by 256 written as (s − Mod(s, 256)) / 256 (ONNX Mod with fmod=0 takes the divisor's
// sign, so this is the arithmetic shift >> 8 also for negative sums), then clipped to [0,255].
// What the facts do not say and kiln chose (docs/formats/om.md §6.2/§6.4):
//  - which bias applies: YUV inputs (YUV420SP_U8) use out = (M·(in − input_bias)) >> 8, RGB
//    inputs (RGB888_U8, XRGB8888_U8) use out = ((M·in) >> 8) + output_bias, as the documented
//    YUV→RGB and RGB→YUV formulas write them; both results saturate to uint8 [0,255];
//  - normalization runs in float32 (the hardware produces fp16), then casts to the input dtype;
//  - XRGB8888_U8 bytes are X,R,G,B (ax_swap_switch: R,G,B,A); the X/A byte is dropped, so the
//    model sees three channels; rbuv_swap_switch reverses the colour order (BGR input);
//  - YUV420SP_U8 is NV12 (NV21 with rbuv_swap_switch): an image input u8[N, Hs·3/2, Ws, 1]
//    whose first Hs rows are Y and the next Hs/2 rows interleaved U,V (V,U), each chroma sample
//    covering 2×2 pixels.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "kiln/backends/aipp.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kiln/frontend/opset_upgrade.h"

namespace kiln {
namespace {

// The opset the preprocessing ops are written for.
constexpr int64_t kAippOpset = 11;

Status invalid(const AippConfig& config, const AippOp& op, size_t index, const std::string& reason,
               const std::string& hint) {
  return Status(ErrorCode::AippConfigInvalid,
                fmt::format("{}:{}: aipp_op {}: AIPP configuration is invalid. Reason: {}",
                            config.path, op.line, index, reason),
                hint)
      .withPeerCode("E10052");
}

// ATC's E10001 "Value V for parameter P is invalid. Reason: R".
Status invalidParameter(const std::string& value, const std::string& parameter,
                        const std::string& reason, const std::string& hint) {
  return Status(ErrorCode::AippConfigInvalid,
                fmt::format("Value {} for parameter {} is invalid. Reason: {}", value, parameter,
                            reason),
                hint)
      .withPeerCode("E10001");
}

bool isYuvFamily(int format) {
  return format == static_cast<int>(AippInputFormat::Yuv420spU8) ||
         format == static_cast<int>(AippInputFormat::Yuv400U8);
}

// Channels of the image buffer per pixel row element, and what AIPP hands to the model.
int64_t bufferChannels(int format) {
  switch (static_cast<AippInputFormat>(format)) {
  case AippInputFormat::Xrgb8888U8:
    return 4;
  case AippInputFormat::Rgb888U8:
    return 3;
  default:
    return 1; // YUV420SP_U8 (one byte per sample in the NV12 buffer), YUV400_U8
  }
}
int64_t modelChannels(int format) {
  return format == static_cast<int>(AippInputFormat::Yuv400U8) ? 1 : 3;
}

struct Target {
  Value* input = nullptr;
  size_t inputIndex = 0;
  std::vector<size_t> ops; // indices into config.ops
};

// Geometry of one op once the model input is known.
struct Plan {
  int64_t srcW = 0, srcH = 0;
  int64_t cropX = 0, cropY = 0, cropW = 0, cropH = 0;
  int64_t top = 0, bottom = 0, left = 0, right = 0;
};

// Appends nodes before the model's first original node, so the preprocessing runs first.
class Builder {
 public:
  Builder(Graph& graph, Node* anchor, std::string prefix)
      : g_(graph), anchor_(anchor), prefix_(std::move(prefix)) {}

  Value* node(const std::string& op, const std::vector<Value*>& inputs, const std::string& label,
              DType dtype, std::vector<Dim> dims, Node** made = nullptr) {
    std::string outName = g_.uniqueName(prefix_ + "_" + label);
    Node* n = g_.insertNodeBefore(anchor_, op, inputs, {outName});
    n->setName(outName);
    n->addLocation({outName, op});
    n->output(0)->setType(ValueType::tensor(dtype, Shape(std::move(dims))));
    if (made) *made = n;
    return n->output(0);
  }
  template <typename T>
  Value* constant(const std::string& label, DType dtype, std::vector<int64_t> dims,
                  const std::vector<T>& values) {
    std::string name = g_.uniqueName(prefix_ + "_" + label);
    Value* v = g_.addInitializer(name, Tensor::fromValues(dtype, dims, values));
    v->setType(ValueType::tensor(dtype, Shape::fromStatic(dims)));
    return v;
  }
  Value* ints(const std::string& label, const std::vector<int64_t>& values) {
    return constant<int64_t>(label, DType::Int64, {static_cast<int64_t>(values.size())}, values);
  }

 private:
  Graph& g_;
  Node* anchor_;
  std::string prefix_;
};

std::vector<Dim> nhwc(const Dim& n, int64_t h, int64_t w, int64_t c) {
  return {n, Dim::known(h), Dim::known(w), Dim::known(c)};
}

// Builds the chain for one op; returns the value that replaces the original input.
Value* buildChain(Builder& b, Value* image, const AippOp& op, const Plan& plan, const Dim& batch,
                  DType outType, bool nchw) {
  const int format = op.inputFormat;
  int64_t h = plan.srcH, w = plan.srcW;
  Value* x = image;

  // Channel swap, and the YUV420SP planes to per-pixel Y,U,V.
  if (format == static_cast<int>(AippInputFormat::Yuv420spU8)) {
    Value* axes = b.ints("rows_axis", {1});
    Value* y = b.node("Slice", {x, b.ints("y_start", {0}), b.ints("y_end", {h}), axes}, "y_plane",
                      DType::UInt8, nhwc(batch, h, w, 1));
    Value* uv = b.node("Slice", {x, b.ints("uv_start", {h}), b.ints("uv_end", {h + h / 2}), axes},
                       "uv_plane", DType::UInt8, nhwc(batch, h / 2, w, 1));
    // [N,H/2,W,1] → [N,H/2,1,W/2,1,2] → repeat each sample over 2×2 pixels → [N,H,W,2].
    Value* split = b.node(
        "Reshape", {uv, b.ints("uv_split", {0, h / 2, 1, w / 2, 1, 2})}, "uv_pairs", DType::UInt8,
        {batch, Dim::known(h / 2), Dim::known(1), Dim::known(w / 2), Dim::known(1), Dim::known(2)});
    Value* wide = b.node(
        "Expand", {split, b.ints("uv_repeat", {1, 1, 2, 1, 2, 1})}, "uv_2x2", DType::UInt8,
        {batch, Dim::known(h / 2), Dim::known(2), Dim::known(w / 2), Dim::known(2), Dim::known(2)});
    Value* full = b.node("Reshape", {wide, b.ints("uv_full", {0, h, w, 2})}, "uv_upsampled",
                         DType::UInt8, nhwc(batch, h, w, 2));
    if (op.rbuvSwapSwitch) { // NV21: the chroma pairs are V,U
      Node* gather = nullptr;
      full = b.node("Gather", {full, b.ints("vu_to_uv", {1, 0})}, "uv_swap", DType::UInt8,
                    nhwc(batch, h, w, 2), &gather);
      gather->setAttribute("axis", Attribute::ofInt(3));
    }
    Node* concat = nullptr;
    x = b.node("Concat", {y, full}, "yuv", DType::UInt8, nhwc(batch, h, w, 3), &concat);
    concat->setAttribute("axis", Attribute::ofInt(3));
  } else if (format == static_cast<int>(AippInputFormat::Xrgb8888U8)) {
    std::vector<int64_t> colour =
        op.axSwapSwitch ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{1, 2, 3};
    if (op.rbuvSwapSwitch) std::reverse(colour.begin(), colour.end());
    Node* gather = nullptr;
    x = b.node("Gather", {x, b.ints("channels", colour)}, "channel_swap", DType::UInt8,
               nhwc(batch, h, w, 3), &gather);
    gather->setAttribute("axis", Attribute::ofInt(3));
  } else if (format == static_cast<int>(AippInputFormat::Rgb888U8) && op.rbuvSwapSwitch) {
    Node* gather = nullptr;
    x = b.node("Gather", {x, b.ints("channels", {2, 1, 0})}, "channel_swap", DType::UInt8,
               nhwc(batch, h, w, 3), &gather);
    gather->setAttribute("axis", Attribute::ofInt(3));
  }
  const int64_t c = modelChannels(format);

  if (op.crop) {
    x = b.node("Slice",
               {x, b.ints("crop_start", {plan.cropY, plan.cropX}),
                b.ints("crop_end", {plan.cropY + plan.cropH, plan.cropX + plan.cropW}),
                b.ints("crop_axes", {1, 2})},
               "crop", DType::UInt8, nhwc(batch, plan.cropH, plan.cropW, c));
    h = plan.cropH;
    w = plan.cropW;
  }

  const bool floatOut = outType != DType::UInt8;
  DType work = DType::UInt8;
  auto cast = [&](Value* v, DType to, const std::string& label) {
    Node* n = nullptr;
    Value* out = b.node("Cast", {v}, label, to, nhwc(batch, h, w, c), &n);
    n->setAttribute("to", Attribute::ofInt(dtypeToOnnx(to)));
    return out;
  };

  if (op.cscSwitch) {
    x = cast(x, DType::Int32, "csc_in");
    const bool yuvIn = isYuvFamily(format);
    if (yuvIn)
      x = b.node("Sub",
                 {x, b.constant<int32_t>("input_bias", DType::Int32, {3},
                                         {op.inputBias[0], op.inputBias[1], op.inputBias[2]})},
                 "csc_unbias", DType::Int32, nhwc(batch, h, w, 3));
    // Row vector pixel × Mᵀ gives out[r] = Σ_c M[r][c] · in[c].
    std::vector<int32_t> mt(9);
    for (int r = 0; r < 3; ++r)
      for (int col = 0; col < 3; ++col)
        mt[col * 3 + r] = op.matrix[r][col];
    Value* sum =
        b.node("MatMul", {x, b.constant<int32_t>("csc_matrix_t", DType::Int32, {3, 3}, mt)},
               "csc_sum", DType::Int32, nhwc(batch, h, w, 3));
    Value* k256 = b.constant<int32_t>("k256", DType::Int32, {}, {256});
    Value* rem = b.node("Mod", {sum, k256}, "csc_rem", DType::Int32, nhwc(batch, h, w, 3));
    Value* exact = b.node("Sub", {sum, rem}, "csc_floor", DType::Int32, nhwc(batch, h, w, 3));
    x = b.node("Div", {exact, k256}, "csc_shift", DType::Int32, nhwc(batch, h, w, 3));
    if (!yuvIn)
      x = b.node("Add",
                 {x, b.constant<int32_t>("output_bias", DType::Int32, {3},
                                         {op.outputBias[0], op.outputBias[1], op.outputBias[2]})},
                 "csc_bias", DType::Int32, nhwc(batch, h, w, 3));
    // Saturate to uint8 in float (Clip on int32 needs opset 12; float Clip works from 11).
    x = cast(x, DType::Float32, "csc_float");
    x = b.node("Clip",
               {x, b.constant<float>("u8_min", DType::Float32, {}, {0.0f}),
                b.constant<float>("u8_max", DType::Float32, {}, {255.0f})},
               "csc_saturate", DType::Float32, nhwc(batch, h, w, 3));
    work = DType::Float32;
    if (!floatOut) {
      x = cast(x, DType::UInt8, "csc_out");
      work = DType::UInt8;
    }
  }

  if (floatOut) {
    if (work != DType::Float32) x = cast(x, DType::Float32, "to_float");
    work = DType::Float32;
    std::vector<float> mean, minv, var;
    bool identity = true;
    for (int64_t i = 0; i < c; ++i) {
      mean.push_back(static_cast<float>(op.meanChn[i]));
      minv.push_back(op.minChn[i]);
      var.push_back(op.varReciChn[i]);
      identity = identity && op.meanChn[i] == 0 && op.minChn[i] == 0 && op.varReciChn[i] == 1;
    }
    if (!identity) {
      // out = (in − mean − min) × var_reci, two subtractions as the formula writes them.
      x = b.node("Sub", {x, b.constant<float>("mean", DType::Float32, {c}, mean)}, "sub_mean",
                 DType::Float32, nhwc(batch, h, w, c));
      x = b.node("Sub", {x, b.constant<float>("min", DType::Float32, {c}, minv)}, "sub_min",
                 DType::Float32, nhwc(batch, h, w, c));
      x = b.node("Mul", {x, b.constant<float>("var_reci", DType::Float32, {c}, var)},
                 "mul_var_reci", DType::Float32, nhwc(batch, h, w, c));
    }
  }

  if (op.padding) {
    Value* pads = b.ints("pads", {0, plan.top, plan.left, 0, 0, plan.bottom, plan.right, 0});
    Value* fill = work == DType::Float32
                      ? b.constant<float>("padding_value", DType::Float32, {}, {op.paddingValue})
                      : b.constant<uint8_t>("padding_value", DType::UInt8, {},
                                            {static_cast<uint8_t>(op.paddingValue)});
    h += plan.top + plan.bottom;
    w += plan.left + plan.right;
    Node* pad = nullptr;
    x = b.node("Pad", {x, pads, fill}, "pad", work, nhwc(batch, h, w, c), &pad);
    pad->setAttribute("mode", Attribute::ofString("constant"));
  }

  if (nchw) {
    Node* t = nullptr;
    x = b.node("Transpose", {x}, "to_nchw", work,
               {batch, Dim::known(c), Dim::known(h), Dim::known(w)}, &t);
    t->setAttribute("perm", Attribute::ofInts({0, 3, 1, 2}));
  }
  if (work != outType) {
    Node* n = nullptr;
    std::vector<Dim> dims =
        nchw ? std::vector<Dim>{batch, Dim::known(c), Dim::known(h), Dim::known(w)}
             : nhwc(batch, h, w, c);
    x = b.node("Cast", {x}, "to_input_dtype", outType, dims, &n);
    n->setAttribute("to", Attribute::ofInt(dtypeToOnnx(outType)));
  }
  return x;
}

} // namespace

Status insertAipp(Model& model, const AippConfig& config, const AippContext& context) {
  if (config.ops.empty() && config.multiShapeOps.empty()) return Status::ok();
  if (!config.multiShapeOps.empty())
    return Status(ErrorCode::AippConfigInvalid,
                  fmt::format("{}:{}: multi_shape_op (legacy multi-batch insertion) is not "
                              "supported by kiln",
                              config.path, config.multiShapeOps[0].line),
                  "drop the multi_shape_op block and use --dynamic_batch_size instead")
        .withPeerCode("E10052");
  if (context.dynamicDims)
    return invalidParameter(config.path, "--insert_op_conf",
                            "The dynamic dims function does not support AIPP",
                            "drop --dynamic_dims or --insert_op_conf");
  // The preprocessing ops are written in opset 11's form (Slice, Pad and Clip take inputs), so an
  // older model (PP-OCR's exports are opset 9) is first up-converted as a whole: its own ops keep
  // their meaning in the new opset and both halves share one opset.
  if (const int64_t opset = model.opsetVersion(""); opset < kAippOpset) {
    auto upgraded = upgradeOnnxOpset(model, kAippOpset);
    if (!upgraded)
      return Status(ErrorCode::AippConfigInvalid,
                    fmt::format("{}: AIPP preprocessing needs ONNX opset {} or later; the model "
                                "imports opset {}, and {}",
                                config.path, kAippOpset, opset, upgraded.status().message()),
                    fmt::format("re-export the model with ONNX opset {} or later", kAippOpset));
    spdlog::info("AIPP: the model was up-converted from opset {} to {}", opset, kAippOpset);
    model = upgraded.take();
  }
  Graph& graph = *model.graph;

  // Model inputs that are fed (initializer-backed inputs are defaults, not data inputs).
  std::vector<Value*> inputs;
  for (Value* v : graph.inputs())
    if (!v->isInitializer()) inputs.push_back(v);

  // Resolve each op's target input.
  std::map<Value*, Target> targets;
  std::vector<Value*> order;
  for (size_t i = 0; i < config.ops.size(); ++i) {
    const AippOp& op = config.ops[i];
    Value* input = nullptr;
    size_t index = 0;
    if (!op.relatedInputName.empty()) {
      for (size_t k = 0; k < inputs.size(); ++k)
        if (inputs[k]->name() == op.relatedInputName) {
          input = inputs[k];
          index = k;
        }
      if (!input)
        return invalid(
            config, op, i,
            fmt::format("related_input_name {} is not an input of the model", op.relatedInputName),
            "name one of the model's inputs");
    } else {
      if (op.relatedInputRank >= inputs.size())
        return invalid(config, op, i,
                       fmt::format("related_input_rank {} is out of range: the model has {} "
                                   "input(s), so the rank must be smaller than {}",
                                   op.relatedInputRank, inputs.size(), inputs.size()),
                       "use a 0-based index of a model input");
      index = op.relatedInputRank;
      input = inputs[index];
    }
    auto [it, fresh] = targets.try_emplace(input);
    if (fresh) order.push_back(input);
    it->second.input = input;
    it->second.inputIndex = index;
    it->second.ops.push_back(i);
  }

  nlohmann::json recordedInputs = nlohmann::json::object();
  for (Value* input : order) {
    Target& target = targets[input];
    const AippOp& first = config.ops[target.ops.front()];
    const size_t firstIndex = target.ops.front();
    const std::string& name = input->name();

    if (std::find(context.inputFp16Nodes.begin(), context.inputFp16Nodes.end(), name) !=
        context.inputFp16Nodes.end())
      return Status(ErrorCode::AippConfigInvalid,
                    fmt::format("Nodes (for example, {}) connected to AIPP must not be of type "
                                "FP16.",
                                name),
                    fmt::format("remove {} from --input_fp16_nodes or drop its aipp_op", name))
          .withPeerCode("E10034");

    // Several ops on one input split its consumers by input_edge_idx.
    if (target.ops.size() > 1) {
      for (size_t k : target.ops) {
        const AippOp& op = config.ops[k];
        if (op.inputEdgeIdx.empty())
          return invalid(config, op, k,
                         fmt::format("several aipp_op blocks apply to input {}; each must name "
                                     "its edges with input_edge_idx",
                                     name),
                         "give each aipp_op on this input an input_edge_idx, or keep one block");
        if (op.inputFormat != first.inputFormat)
          return invalid(config, op, k,
                         "The input_format of all aipp_ops after one Data should be the same",
                         "use one input_format for every aipp_op on this input");
        if (op.srcImageSizeW != first.srcImageSizeW)
          return invalid(config, op, k,
                         "The src_image_size_w of all aipp_ops after one Data should be the same",
                         "use one src_image_size_w for every aipp_op on this input");
        if (op.srcImageSizeH != first.srcImageSizeH)
          return invalid(config, op, k,
                         "The src_image_size_h of all aipp_ops after one Data should be the same",
                         "use one src_image_size_h for every aipp_op on this input");
        if (op.mode != first.mode)
          return invalid(config, op, k,
                         "The aipp_mode of all aipp_ops after one Data should be the same",
                         "use one aipp_mode for every aipp_op on this input");
      }
    }
    // Edges: each op's input_edge_idx (all edges when empty); together they must cover every
    // consumer exactly once, since the input itself becomes a uint8 image.
    const std::vector<Use> uses = input->uses();
    std::vector<int> owner(uses.size(), -1);
    for (size_t k : target.ops) {
      const AippOp& op = config.ops[k];
      if (op.inputEdgeIdx.empty()) {
        std::fill(owner.begin(), owner.end(), static_cast<int>(k));
        continue;
      }
      for (uint32_t e : op.inputEdgeIdx) {
        if (e >= uses.size())
          return invalid(config, op, k,
                         fmt::format("input_edge_idx {} is out of range: input {} has {} "
                                     "output edge(s)",
                                     e, name, uses.size()),
                         "use a 0-based index of the input's consumers");
        if (owner[e] >= 0)
          return invalid(config, op, k,
                         fmt::format("output edge {} of input {} gets AIPP twice", e, name),
                         "give each edge to one aipp_op");
        owner[e] = static_cast<int>(k);
      }
    }
    for (size_t e = 0; e < owner.size(); ++e)
      if (owner[e] < 0)
        return invalid(config, first, firstIndex,
                       fmt::format("output edge {} of input {} gets no AIPP; either all or none "
                                   "of an input's consumers get AIPP",
                                   e, name),
                       "list every edge in some aipp_op's input_edge_idx");

    // Layout and shape of the model input.
    std::string layout = context.inputFormat.empty() ? "NCHW" : context.inputFormat;
    const Shape& shape = input->shape();
    if (first.mode == AippMode::Dynamic) {
      if (!shape.hasRank() || shape.rank() < 3 || shape.rank() > 4)
        return invalidParameter(
            shape.hasRank() ? std::to_string(shape.rank()) : "unknown", name + " shape size",
            "Its shape size must be in the range[3,4] when dynamic AIPP is linked. The input may "
            "not be suitable for dynamic AIPP.",
            "attach dynamic AIPP to an image input of rank 3 or 4");
      if (layout != "NCHW" && layout != "NHWC")
        return invalidParameter(layout, name + " format",
                                "Only format NCHW and NHWC are supported when dynamic AIPP is "
                                "linked.",
                                "use --input_format=NCHW or NHWC");
      return invalid(config, first, firstIndex,
                     "dynamic AIPP (an extra model input holding the AIPP parameters, set at run "
                     "time) is not built by kiln",
                     "use aipp_mode: static with the image size and parameters in the file");
    }
    if (layout != "NCHW" && layout != "NHWC")
      return invalidParameter(layout, "--input_format",
                              "The format must be NCHW or NHWC when --insert_op_conf is set",
                              "use --input_format=NCHW (or NHWC)");
    const bool nchw = layout == "NCHW";
    if (!shape.hasRank() || shape.rank() != 4)
      return invalid(config, first, firstIndex,
                     fmt::format("input {} has shape {}; AIPP needs a 4-D {} image input", name,
                                 shape.toString(), layout),
                     "attach AIPP to the model's image input");
    const Dim batch = shape[0]; // copies: the input's type is replaced below
    const Dim& cDim = shape[nchw ? 1 : 3];
    const Dim& hDim = shape[nchw ? 2 : 1];
    const Dim& wDim = shape[nchw ? 3 : 2];
    if (context.dynamicImageSize)
      for (size_t k : target.ops) {
        const AippOp& op = config.ops[k];
        if (op.crop || op.padding)
          return invalid(config, op, k,
                         "When --dynamic_image_size is set, crop and padding cannot be set to "
                         "'true'",
                         "drop crop and padding, or --dynamic_image_size");
        if (op.srcImageSizeW != 0 || op.srcImageSizeH != 0)
          return invalid(config, op, k,
                         "When --dynamic_image_size is set, src_image_size_w and "
                         "src_image_size_h must be set to '0'",
                         "set src_image_size_w and src_image_size_h to 0");
      }
    if (!cDim.isStatic() || !hDim.isStatic() || !wDim.isStatic())
      return invalid(config, first, firstIndex,
                     fmt::format("input {} has shape {}; static AIPP needs static C, H and W "
                                 "(dynamic image sizes with AIPP are not built by kiln)",
                                 name, shape.toString()),
                     "fix the input shape with --input_shape");
    const DType outType = input->dtype();
    if (outType != DType::Float32 && outType != DType::Float16 && outType != DType::UInt8)
      return invalid(config, first, firstIndex,
                     fmt::format("input {} is {}; AIPP feeds float32, float16 or uint8 inputs",
                                 name, dtypeName(outType)),
                     "attach AIPP to a float image input");
    const int64_t modelC = cDim.value(), modelH = hDim.value(), modelW = wDim.value();

    // Per-op geometry.
    std::vector<Plan> plans;
    for (size_t k : target.ops) {
      const AippOp& op = config.ops[k];
      if (op.resize)
        return invalid(config, op, k, "resize is reserved and not supported",
                       "set resize: false (resize the images before AIPP)");
      if (op.inputFormat == static_cast<int>(AippInputFormat::Yuv400U8) && op.cscSwitch)
        return invalid(config, op, k,
                       "csc_switch cannot be used with YUV400_U8 (a one-channel image)",
                       "set csc_switch: false");
      if (modelChannels(op.inputFormat) != modelC)
        return invalid(config, op, k,
                       fmt::format("input_format {} gives {} channel(s) but input {} has {}",
                                   aippInputFormatName(op.inputFormat),
                                   modelChannels(op.inputFormat), name, modelC),
                       "choose an input_format whose channel count matches the model");
      Plan plan;
      if ((op.srcImageSizeW == 0 || op.srcImageSizeH == 0) && (op.crop || op.padding))
        return invalid(config, op, k,
                       "src_image_size_w and src_image_size_h must be set when crop or padding "
                       "is used",
                       "set the source image width and height");
      plan.srcW = op.srcImageSizeW ? op.srcImageSizeW : modelW;
      plan.srcH = op.srcImageSizeH ? op.srcImageSizeH : modelH;
      plan.top = op.topPaddingSize;
      plan.bottom = op.bottomPaddingSize;
      plan.left = op.leftPaddingSize;
      plan.right = op.rightPaddingSize;
      if (op.crop) {
        if ((op.cropSizeW == 0 || op.cropSizeH == 0) && op.padding)
          return invalid(config, op, k,
                         "crop_size_w and crop_size_h must be set when crop is used with "
                         "padding",
                         "set the crop window size");
        plan.cropX = op.loadStartPosW;
        plan.cropY = op.loadStartPosH;
        plan.cropW = op.cropSizeW ? op.cropSizeW : modelW;
        plan.cropH = op.cropSizeH ? op.cropSizeH : modelH;
        if (plan.cropX >= plan.srcW || plan.cropY >= plan.srcH ||
            plan.cropX + plan.cropW > plan.srcW || plan.cropY + plan.cropH > plan.srcH)
          return invalid(config, op, k,
                         fmt::format("the crop window {}x{} at ({},{}) does not fit the {}x{} "
                                     "source image",
                                     plan.cropW, plan.cropH, plan.cropX, plan.cropY, plan.srcW,
                                     plan.srcH),
                         "keep load_start_pos + crop_size within src_image_size");
      }
      const int64_t outW = (op.crop ? plan.cropW : plan.srcW) + plan.left + plan.right;
      const int64_t outH = (op.crop ? plan.cropH : plan.srcH) + plan.top + plan.bottom;
      if (outW != modelW || outH != modelH)
        return invalid(config, op, k,
                       fmt::format("the AIPP output is {}x{} (width x height, after crop and "
                                   "padding) but input {} is {}x{}",
                                   outW, outH, name, modelW, modelH),
                       "make crop size plus padding (or the source size) equal the model input");
      if (op.inputFormat == static_cast<int>(AippInputFormat::Yuv420spU8) &&
          (plan.srcW % 2 || plan.srcH % 2))
        return invalid(config, op, k,
                       fmt::format("a YUV420SP_U8 image must have even width and height (got "
                                   "{}x{})",
                                   plan.srcW, plan.srcH),
                       "use an even image size");
      plans.push_back(plan);
    }

    // Rewire: the input value itself becomes the uint8 NHWC image (keeping its name and position
    // among the graph inputs); each op's chain output takes over the consumers it owns.
    const int64_t bufC = bufferChannels(first.inputFormat);
    const int64_t bufH = first.inputFormat == static_cast<int>(AippInputFormat::Yuv420spU8)
                             ? plans[0].srcH * 3 / 2
                             : plans[0].srcH;
    const ValueType original = input->type();
    nlohmann::json dims = nlohmann::json::array(); // -1 for a dim that is not static (batch)
    for (const Dim& d : original.shape.dims())
      dims.push_back(d.isStatic() ? d.value() : -1);
    recordedInputs[name] = std::move(dims);
    input->setType(ValueType::tensor(
        DType::UInt8,
        Shape({batch, Dim::known(bufH), Dim::known(plans[0].srcW), Dim::known(bufC)})));
    Node* anchor = graph.nodes().empty() ? nullptr : graph.nodes().front().get();
    for (size_t j = 0; j < target.ops.size(); ++j) {
      size_t k = target.ops[j];
      Builder builder(graph, anchor, fmt::format("aipp{}", k));
      Value* out = buildChain(builder, input, config.ops[k], plans[j], batch, original.dtype, nchw);
      out->setType(original);
      for (size_t e = 0; e < uses.size(); ++e)
        if (owner[e] == static_cast<int>(k)) uses[e].user->setInput(uses[e].inputIndex, out);
      // A model that outputs its input directly outputs the preprocessed image (first op's).
      if (j == 0)
        for (size_t o = 0; o < graph.outputs().size(); ++o)
          if (graph.outputs()[o] == input) graph.setOutput(o, out);
    }
  }
  nlohmann::json record = {{"config", config.text},
                           {"file", std::filesystem::path(config.path).filename().string()},
                           {"layout", context.inputFormat.empty() ? "NCHW" : context.inputFormat},
                           {"inputs", std::move(recordedInputs)}};
  std::erase_if(model.metadata, [](const auto& kv) { return kv.first == kAippMetadataKey; });
  model.metadata.emplace_back(kAippMetadataKey, record.dump());
  return Status::ok();
}

} // namespace kiln
