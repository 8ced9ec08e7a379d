// .ms raising rules (reader, .ms → IR): Conv2DFusion → Conv, Conv2dTransposeFusion → ConvTranspose.
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_raise_context.h"

namespace kiln::ms {

namespace {

Status raiseConv2DFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::Conv2DFusion* c = p.value_as_Conv2DFusion();
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs input and weight");
  auto wd = ctx.dims(ctx.inIndex(1));
  if (wd.size() != 4) return ctx.nodeUnsupported("weight must be 4-D [C_out, KH, KW, C_in/group]");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  // KHWC → OIHW; a non-constant weight gets a Transpose.
  KILN_ASSIGN_OR_RETURN(Value * w, ctx.in(1, {std::nullopt, {0, 3, 1, 2}, 0}));
  std::vector<Value*> ins{ctx.toNchw(x), w};
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(2));
    ins.push_back(b);
  }
  auto stride = ctx.longs(c->stride()), dilation = ctx.longs(c->dilation());
  if (stride.size() < 2) stride = {1, 1};
  if (dilation.size() < 2) dilation = {1, 1};
  int64_t group = c->group() == 0 ? wd[0] : c->group();
  Node::AttributeList attrs{{"strides", Attribute::ofInts({stride[0], stride[1]})},
                            {"dilations", Attribute::ofInts({dilation[0], dilation[1]})},
                            {"group", Attribute::ofInt(group)},
                            {"kernel_shape", Attribute::ofInts({wd[1], wd[2]})}};
  auto pads = ctx.longs(c->pad_list());
  if (c->pad_mode() == msfb::PadMode_SAME)
    attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
  else if (pads.size() >= 4 && c->pad_mode() == msfb::PadMode_PAD)
    attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
  Value* y = ctx.emit("Conv", ins, std::move(attrs));
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(ctx.toNhwc(y), c->activation_type()));
  return ctx.bind(0, y);
}

Status raiseConv2dTransposeFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::Conv2dTransposeFusion* c = p.value_as_Conv2dTransposeFusion();
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs input and weight");
  auto wd = ctx.dims(ctx.inIndex(1));
  if (wd.size() != 4) return ctx.nodeUnsupported("weight must be 4-D [C_in, KH, KW, C_out/group]");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * w, ctx.in(1, {std::nullopt, {0, 3, 1, 2}, 3}));
  std::vector<Value*> ins{ctx.toNchw(x), w};
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(2));
    ins.push_back(b);
  }
  auto stride = ctx.longs(c->stride()), dilation = ctx.longs(c->dilation());
  if (stride.size() < 2) stride = {1, 1};
  if (dilation.size() < 2) dilation = {1, 1};
  int64_t group = c->group() == 0 ? 1 : c->group();
  Node::AttributeList attrs{{"strides", Attribute::ofInts({stride[0], stride[1]})},
                            {"dilations", Attribute::ofInts({dilation[0], dilation[1]})},
                            {"group", Attribute::ofInt(group)},
                            {"kernel_shape", Attribute::ofInts({wd[1], wd[2]})}};
  auto pads = ctx.longs(c->pad_list());
  if (c->pad_mode() == msfb::PadMode_SAME)
    attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
  else if (pads.size() >= 4 && c->pad_mode() == msfb::PadMode_PAD)
    attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
  auto outPad = ctx.longs(c->output_paddings());
  if (outPad.size() >= 2 && (outPad[0] || outPad[1]))
    attrs.push_back({"output_padding", Attribute::ofInts({outPad[0], outPad[1]})});
  Value* y = ctx.emit("ConvTranspose", ins, std::move(attrs));
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(ctx.toNhwc(y), c->activation_type()));
  return ctx.bind(0, y);
}

} // namespace

KILN_MS_RAISING(Conv2DFusion, raiseConv2DFusion);
KILN_MS_RAISING(Conv2dTransposeFusion, raiseConv2dTransposeFusion);

} // namespace kiln::ms
