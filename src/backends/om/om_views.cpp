// The Lowerer's [N, C, 1, L] views: 1-D Conv / pooling run as their 2-D GraphEngine op.
#include "om_context.h"

namespace kiln::om {

namespace {
Shape withUnitH(const Shape& s) {
  if (!s.hasRank() || s.rank() < 2) return s;
  std::vector<Dim> dims = s.dims();
  dims.insert(dims.begin() + 2, Dim::known(1));
  return Shape(std::move(dims));
}
} // namespace

Port Lowerer::unsqueezeH(const Port& p, const std::string& suffix) {
  OpDef* o = op("Unsqueeze", suffix);
  input(o, p);
  (*o->mutable_attr())["axes"] = attrInts({2});
  return output(o, p.dtype, withUnitH(p.shape), o->name(), "NCHW");
}

Port Lowerer::constView(size_t i, const std::vector<int64_t>& dims) {
  const Value* v = node->input(i);
  const Tensor& t = v->initializer();
  Port p = in(i);
  Shape shape = Shape::fromStatic(dims);
  if (v->uses().size() == 1 && !v->isGraphOutput()) {
    const std::string opName = p.src.substr(0, p.src.rfind(':'));
    for (OpDef& o : *graph_->mutable_op()) {
      if (o.name() != opName || (o.type() != "Const" && o.type() != "FileConstant")) continue;
      // fillDesc rewrites shape, origin_shape and size; name and weight offsets stay.
      auto redescribe = [&](TensorDescriptor* d) {
        d->mutable_shape()->clear_dim();
        fillDesc(d, p.dtype, shape, "ND"); // the stored type (onChip)
      };
      auto& attrs = *o.mutable_attr();
      if (auto it = attrs.find("value"); it != attrs.end())
        redescribe(it->second.mutable_t()->mutable_desc());
      if (o.type() == "FileConstant") attrs["shape"] = attrInts(dims);
      redescribe(o.mutable_output_desc(0));
      return Port{p.src, p.dtype, shape};
    }
  }
  return constant("view", Tensor(t.dtype(), dims, t.buffer()));
}

void Lowerer::squeezeHOutput(OpDef* producer) {
  const Value* y = node->output(0);
  Port p = output(producer, y->dtype(), withUnitH(y->shape()), producer->name() + "_nchw", "NCHW");
  OpDef* o = op("Squeeze", "squeeze");
  input(o, p, "NCHW");
  (*o->mutable_attr())["axis"] = attrInts({2});
  bind(y, output(o, y->dtype(), y->shape(), y->name()));
}

} // namespace kiln::om
