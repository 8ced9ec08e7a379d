// .om rules for NonMaxSuppression → NonMaxSuppressionV7 and the rows it really selected.
#include "../om_context.h"

namespace kiln::om {
namespace {

// NonMaxSuppressionV7 answers a fixed [max_boxes_size, 3] int32 table whose unused rows are
// (-1, -1, -1); ONNX answers the selected [K, 3] int64 rows. So: max_boxes_size is the most NMS
// can select (batches × classes × boxes), and the rows whose batch index is >= 0 are gathered
// (NonZero + GatherV2) after a Cast to int64.
KILN_OM_LOWERING(
    "NonMaxSuppression",
    [](const Node& n, const OpContext&) -> std::string {
      const Value* boxes = n.input(0);
      const Value* scores = n.input(1);
      if (!staticShape(boxes) || !staticShape(scores) || rankOf(boxes) != 3 ||
          rankOf(scores) != 3)
        return "NonMaxSuppression of boxes / scores without static 3-D shapes";
      if (boxes->dtype() != DType::Float32 && boxes->dtype() != DType::Float16)
        return "NonMaxSuppression on boxes that are not float32 / float16";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      auto scoreDims = n.input(1)->shape().staticDims(); // [batches, classes, boxes]
      const int64_t most = scoreDims[0] * scoreDims[1] * scoreDims[2];
      Port limit;
      if (hasInput(n, 2)) {
        OpDef* c = l.op("Cast", "max_output_size");
        l.input(c, l.in(2));
        (*c->mutable_attr())["dst_type"] = attrI(geProtoToCxxDType(ge::proto::DT_INT32));
        limit = l.output(c, DType::Int32, n.input(2)->shape(), "");
      }
      OpDef* nms = l.op("NonMaxSuppressionV7", "nms");
      l.input(nms, l.in(0));
      l.input(nms, l.in(1));
      l.input(nms, limit);
      l.input(nms, hasInput(n, 3) ? l.in(3) : Port{});
      l.input(nms, hasInput(n, 4) ? l.in(4) : Port{});
      auto& a = *nms->mutable_attr();
      a["center_point_box"] = attrI(nodeInt(n, "center_point_box", 0));
      a["max_boxes_size"] = attrI(most);
      Port table = l.output(nms, DType::Int32, Shape::fromStatic({most, 3}), "");
      OpDef* wide = l.op("Cast", "int64");
      l.input(wide, table);
      (*wide->mutable_attr())["dst_type"] = attrI(geProtoToCxxDType(ge::proto::DT_INT64));
      table = l.output(wide, DType::Int64, table.shape, "");
      OpDef* col = l.op("GatherV2", "batch_column");
      l.input(col, table);
      l.input(col, l.constant("column", Tensor::fromValues<int64_t>(DType::Int64, {}, {0})));
      l.input(col, l.constInts("column_axis", {1}));
      (*col->mutable_attr())["batch_dims"] = attrI(0);
      Port batch = l.output(col, DType::Int64, Shape::fromStatic({most}), "");
      OpDef* used = l.op("GreaterEqual", "used");
      l.input(used, batch);
      l.input(used, l.constant("zero", Tensor::fromValues<int64_t>(DType::Int64, {}, {0})));
      Port mask = l.output(used, DType::Bool, batch.shape, "");
      OpDef* nz = l.op("NonZero", "rows");
      l.input(nz, mask);
      Port rows = l.output(nz, DType::Int64, Shape({Dim::known(1), Dim()}), "");
      OpDef* flat = l.op("Reshape", "rows_1d");
      l.input(flat, rows);
      l.input(flat, l.constInts("rows_shape", {-1}));
      rows = l.output(flat, DType::Int64, Shape({Dim()}), "");
      OpDef* o = l.op("GatherV2");
      l.input(o, table);
      l.input(o, rows);
      l.input(o, l.constInts("rows_axis", {0}));
      (*o->mutable_attr())["batch_dims"] = attrI(0);
      l.outputs(o);
    });
// Back to ONNX: NonMaxSuppression, then the rows padded with -1 up to max_boxes_size and narrowed
// to int32, which is what NonMaxSuppressionV7 answers.
KILN_OM_RAISING("NonMaxSuppressionV7", [](Raiser& r, const OpDef& op) -> Status {
  if (r.in(op, 5)) return r.unsupported(op, "index_id input");
  const std::string base = op.name();
  Value* most = r.in(op, 2);
  if (most) {
    most = r.helper(base + "_max_int64", "Cast", {most});
    most->producer()->setAttribute("to", Attribute::ofInt(dtypeToOnnx(DType::Int64)));
  }
  Node* nms = r.graph().appendNode("NonMaxSuppression",
                                   {r.in(op, 0), r.in(op, 1), most, r.in(op, 3), r.in(op, 4)},
                                   {r.graph().uniqueName(base + "_selected")});
  nms->setName(nms->output(0)->name());
  nms->setAttribute("center_point_box", Attribute::ofInt(getI(op, "center_point_box", 0)));
  Value* selected = nms->output(0);
  Value* shape = r.helper(base + "_shape", "Shape", {selected});
  Value* count = r.helper(base + "_count", "Gather", {shape, r.constInts(base + "_first", {0})});
  Value* missing = r.helper(base + "_missing", "Sub",
                            {r.constInts(base + "_most", {getI(op, "max_boxes_size", 0)}), count});
  Value* zero = r.constInts(base + "_zero", {0});
  Value* pads = r.helper(base + "_pads", "Concat", {zero, zero, missing, zero});
  pads->producer()->setAttribute("axis", Attribute::ofInt(0));
  Value* padded =
      r.helper(base + "_padded", "Pad",
               {selected, pads,
                r.constTensor(base + "_minus_one",
                              Tensor::fromValues<int64_t>(DType::Int64, {}, {-1}))});
  r.emit(op, "Cast", {padded}, 1)->setAttribute("to", Attribute::ofInt(dtypeToOnnx(DType::Int32)));
  return Status::ok();
});

} // namespace
} // namespace kiln::om
