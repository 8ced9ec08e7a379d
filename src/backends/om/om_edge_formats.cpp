// One format per tensor: the producer's output desc and every reader's input desc of an edge name
// the same layout, as in graphs GraphEngine builds (its format inference carries the inputs' NCHW
// through the graph). Lowering rules describe only what an op needs (NCHW for a Conv's data, ND
// elsewhere), so an edge from a 4-D NCHW input to a Flatten said NCHW on one end and ND on the
// other.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "om_context.h"

namespace kiln::om {
namespace {

using ge::proto::TensorDescriptor;

// The rank a plain named format describes; 0 for ND / unnamed (any rank).
int formatRank(const std::string& layout) {
  static const std::map<std::string, int> ranks = {{"NCHW", 4}, {"NHWC", 4},  {"HWCN", 4},
                                                   {"CHWN", 4}, {"NCDHW", 5}, {"NDHWC", 5}};
  auto it = ranks.find(layout);
  return it == ranks.end() ? 0 : it->second;
}

bool isHeavy(const std::string& layout) {
  return layout != "ND" && !layout.empty() && formatRank(layout) == 0;
}

void agreeInGraph(ge::proto::GraphDef& g) {
  // Every desc describing one produced tensor ("op:k"): the producer's, then its readers'.
  std::map<std::string, std::vector<TensorDescriptor*>> tensors;
  for (auto& op : *g.mutable_op())
    for (int k = 0; k < op.output_desc_size(); ++k)
      tensors[op.name() + ":" + std::to_string(k)].push_back(op.mutable_output_desc(k));
  for (auto& op : *g.mutable_op())
    for (int i = 0; i < op.input_size() && i < op.input_desc_size(); ++i) {
      auto it = tensors.find(op.input(i));
      if (it != tensors.end()) it->second.push_back(op.mutable_input_desc(i));
    }
  for (auto& [name, descs] : tensors) {
    if (descs.size() < 2) continue;
    const int rank = descs.front()->shape().dim_size();
    const bool rankKnown = !(rank == 1 && descs.front()->shape().dim(0) == -2);
    std::set<std::string> named;
    bool heavy = false;
    for (const TensorDescriptor* d : descs) {
      heavy |= isHeavy(d->layout());
      if (formatRank(d->layout()) > 0) named.insert(d->layout());
    }
    // Heavy formats meet plain ones only through TransData (om_heavy_formats.cpp); two different
    // named formats would need a transpose, which no rule writes.
    if (heavy || named.size() > 1) continue;
    std::string layout = "ND";
    if (named.size() == 1 && rankKnown && formatRank(*named.begin()) == rank)
      layout = *named.begin();
    for (TensorDescriptor* d : descs)
      if (d->layout() != layout) setDescLayout(d, layout);
  }
}

} // namespace

void agreeEdgeFormats(LoweredModel& model) {
  for (auto& g : *model.modelDef.mutable_graph())
    agreeInGraph(g);
}

} // namespace kiln::om
