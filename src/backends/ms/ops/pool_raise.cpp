// .ms raising rules (reader, .ms → IR): MaxPoolFusion, AvgPoolFusion → NCHW pools.
#include <string>
#include <vector>

#include "backends/ms/ms_raise_context.h"

namespace kiln::ms {

namespace {

template <typename Pool> Status raisePool(RaisingContext& ctx, const Pool* p, bool isMax) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* nchw = ctx.toNchw(x);
  Value* y;
  if (p->global()) {
    y = ctx.emit(isMax ? "GlobalMaxPool" : "GlobalAveragePool", {nchw});
  } else {
    auto kernel = ctx.longs(p->kernel_size()), strides = ctx.longs(p->strides());
    if (kernel.size() < 2) return ctx.nodeUnsupported("kernel_size needs [h, w]");
    if (strides.size() < 2) strides = {1, 1};
    Node::AttributeList attrs{{"kernel_shape", Attribute::ofInts({kernel[0], kernel[1]})},
                              {"strides", Attribute::ofInts({strides[0], strides[1]})}};
    auto pads = ctx.longs(p->pad());
    if (p->pad_mode() == msfb::PadMode_SAME)
      attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
    else if (p->pad_mode() == msfb::PadMode_PAD && pads.size() >= 4)
      attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
    if (p->round_mode() == msfb::RoundMode_CEIL)
      attrs.push_back({"ceil_mode", Attribute::ofInt(1)});
    y = ctx.emit(isMax ? "MaxPool" : "AveragePool", {nchw}, std::move(attrs));
  }
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(ctx.toNhwc(y), p->activation_type()));
  return ctx.bind(0, y);
}

Status raiseMaxPoolFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  return raisePool(ctx, p.value_as_MaxPoolFusion(), true);
}

Status raiseAvgPoolFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  return raisePool(ctx, p.value_as_AvgPoolFusion(), false);
}

} // namespace

KILN_MS_RAISING(MaxPoolFusion, raiseMaxPoolFusion);
KILN_MS_RAISING(AvgPoolFusion, raiseAvgPoolFusion);

} // namespace kiln::ms
