// Graph mutation helpers: keep producers, use lists and name maps consistent.
#include "kiln/ir/graph.h"

#include <algorithm>
#include <unordered_set>

#include "kiln/support/status.h"

namespace kiln {

bool Value::isGraphInput() const {
  const auto& in = owner_->inputs();
  return std::find(in.begin(), in.end(), this) != in.end();
}

bool Value::isGraphOutput() const {
  const auto& out = owner_->outputs();
  return std::find(out.begin(), out.end(), this) != out.end();
}

void Value::removeUse(const Use& use) {
  auto it = std::find(uses_.begin(), uses_.end(), use);
  KILN_CHECK(it != uses_.end(), "use of '{}' not found", name_);
  uses_.erase(it);
}

void Node::setInput(size_t i, Value* value) {
  KILN_CHECK(i < inputs_.size(), "input index {} out of range", i);
  if (inputs_[i]) inputs_[i]->removeUse({this, i});
  inputs_[i] = value;
  if (value) value->uses_.push_back({this, i});
}

void Node::addInput(Value* value) {
  inputs_.push_back(value);
  if (value) value->uses_.push_back({this, inputs_.size() - 1});
}

void Node::removeInput(size_t i) {
  KILN_CHECK(i < inputs_.size(), "input index {} out of range", i);
  for (size_t k = i; k < inputs_.size(); ++k)
    if (inputs_[k]) inputs_[k]->removeUse({this, k});
  inputs_.erase(inputs_.begin() + static_cast<std::ptrdiff_t>(i));
  for (size_t k = i; k < inputs_.size(); ++k)
    if (inputs_[k]) inputs_[k]->uses_.push_back({this, k});
}

const Attribute* Node::attribute(const std::string& name) const {
  for (const auto& [key, value] : attributes_)
    if (key == name) return &value;
  return nullptr;
}

void Node::setAttribute(const std::string& name, Attribute value) {
  for (auto& [key, existing] : attributes_)
    if (key == name) {
      existing = std::move(value);
      return;
    }
  attributes_.emplace_back(name, std::move(value));
}

bool Node::removeAttribute(const std::string& name) {
  auto it = std::find_if(attributes_.begin(), attributes_.end(),
                         [&](const auto& a) { return a.first == name; });
  if (it == attributes_.end()) return false;
  attributes_.erase(it);
  return true;
}

std::vector<Graph*> Node::subgraphs() const {
  std::vector<Graph*> out;
  for (const auto& [key, value] : attributes_)
    for (Graph* g : value.subgraphs())
      out.push_back(g);
  return out;
}

void Node::mergeLocations(const Node& other) {
  for (const Location& loc : other.locations_)
    if (std::find(locations_.begin(), locations_.end(), loc) == locations_.end())
      locations_.push_back(loc);
}

Graph::~Graph() {
  // Uses of outer-scope values by this graph's nodes must not dangle in the (still living) outer
  // graph.
  for (auto& node : nodes_)
    for (size_t i = 0; i < node->inputs_.size(); ++i) {
      Value* v = node->inputs_[i];
      if (v && v->owner_ != this) v->removeUse({node.get(), i});
    }
}

Value* Graph::addValue(const std::string& name) {
  if (valuesByName_.count(name)) return nullptr;
  values_.push_back(std::unique_ptr<Value>(new Value(this, name)));
  Value* value = values_.back().get();
  value->slot_ = std::prev(values_.end());
  valuesByName_.emplace(name, value);
  return value;
}

Value* Graph::findLocalValue(const std::string& name) const {
  auto it = valuesByName_.find(name);
  return it == valuesByName_.end() ? nullptr : it->second;
}

Value* Graph::lookupValue(const std::string& name) const {
  for (const Graph* g = this; g; g = g->parent_)
    if (Value* v = g->findLocalValue(name)) return v;
  return nullptr;
}

std::string Graph::uniqueName(const std::string& base) {
  if (!lookupValue(base)) return base;
  for (;;) {
    std::string candidate = base + "_" + std::to_string(++nameCounter_);
    if (!lookupValue(candidate)) return candidate;
  }
}

void Graph::renameValue(Value* value, const std::string& name) {
  KILN_CHECK(value->owner_ == this && !valuesByName_.count(name), "cannot rename '{}' to '{}'",
             value->name_, name);
  valuesByName_.erase(value->name_);
  value->name_ = name;
  valuesByName_.emplace(name, value);
}

void Graph::eraseValue(Value* value) {
  KILN_CHECK(value->owner_ == this && value->uses_.empty() && !value->producer_,
             "erasing live value '{}'", value->name_);
  KILN_CHECK(!value->isGraphInput() && !value->isGraphOutput(), "erasing graph I/O '{}'",
             value->name_);
  if (value->isInitializer()) removeInitializer(value);
  if (value->annotated_)
    annotated_.erase(std::remove(annotated_.begin(), annotated_.end(), value), annotated_.end());
  valuesByName_.erase(value->name_);
  values_.erase(value->slot_);
}

Value* Graph::addInitializer(const std::string& name, Tensor tensor) {
  Value* value = addValue(name);
  if (!value) return nullptr;
  value->setType(ValueType::tensor(tensor.dtype(), Shape::fromStatic(tensor.dims())));
  value->setInitializer(std::move(tensor));
  initializers_.push_back(value);
  return value;
}

void Graph::removeInitializer(Value* value) {
  initializers_.erase(std::remove(initializers_.begin(), initializers_.end(), value),
                      initializers_.end());
  value->initializer_.reset();
}

Graph::NodeList::iterator Graph::findNode(Node* node) {
  KILN_CHECK(node->owner_ == this, "node '{}' is not in graph '{}'", node->name_, name_);
  return node->slot_;
}

Node* Graph::appendNode(const std::string& opType, const std::vector<Value*>& inputs,
                        const std::vector<std::string>& outputNames) {
  return insertNodeBefore(nullptr, opType, inputs, outputNames);
}

Node* Graph::insertNodeBefore(Node* anchor, const std::string& opType,
                              const std::vector<Value*>& inputs,
                              const std::vector<std::string>& outputNames) {
  std::unique_ptr<Node> node(new Node(this, opType));
  Node* raw = node.get();
  for (Value* in : inputs)
    raw->addInput(in);
  for (const std::string& name : outputNames) {
    if (name.empty()) { // omitted optional output
      raw->outputs_.push_back(nullptr);
      continue;
    }
    Value* out = addValue(name);
    KILN_CHECK(out != nullptr, "output name '{}' already defined", name);
    out->producer_ = raw;
    out->producerIndex_ = raw->outputs_.size();
    raw->outputs_.push_back(out);
  }
  raw->slot_ = nodes_.insert(anchor ? findNode(anchor) : nodes_.end(), std::move(node));
  return raw;
}

void Graph::eraseNode(Node* node) {
  auto it = findNode(node);
  for (Value* out : node->outputs_)
    if (out)
      KILN_CHECK(!out->hasUses() && !out->isGraphOutput(),
                 "erasing node '{}' whose output '{}' is live", node->name_, out->name_);
  for (size_t i = 0; i < node->inputs_.size(); ++i)
    if (node->inputs_[i]) node->inputs_[i]->removeUse({node, i});
  node->inputs_.clear();
  std::vector<Value*> outputs;
  for (Value* out : node->outputs_)
    if (out) {
      out->producer_ = nullptr;
      outputs.push_back(out);
    }
  nodes_.erase(it); // destroys subgraphs, which unhook their own outer uses
  for (Value* out : outputs)
    eraseValue(out);
}

void Graph::replaceNodeWithConstants(Node* node, std::vector<Tensor> values) {
  auto it = findNode(node);
  KILN_CHECK(values.size() == node->outputs_.size(), "one value per output of '{}'", node->name_);
  for (size_t i = 0; i < node->inputs_.size(); ++i)
    if (node->inputs_[i]) node->inputs_[i]->removeUse({node, i});
  node->inputs_.clear();
  std::vector<Value*> unnamed;
  for (size_t i = 0; i < values.size(); ++i) {
    Value* out = node->outputs_[i];
    if (!out) continue;
    out->producer_ = nullptr;
    out->setType(ValueType::tensor(values[i].dtype(), Shape::fromStatic(values[i].dims())));
    out->setInitializer(std::move(values[i]));
    initializers_.push_back(out);
    if (out->annotated_) {
      annotated_.erase(std::remove(annotated_.begin(), annotated_.end(), out), annotated_.end());
      out->annotated_ = false;
    }
  }
  nodes_.erase(it);
}

void Graph::replaceAllUsesWith(Value* from, Value* to) {
  std::vector<Use> uses = from->uses_;
  for (const Use& use : uses)
    use.user->setInput(use.inputIndex, to);
  for (Value*& out : outputs_)
    if (out == from) out = to;
}

void Graph::reorderNodes(const std::vector<Node*>& order) {
  KILN_CHECK(order.size() == nodes_.size(), "reorder must list every node");
  std::unordered_set<Node*> placed;
  // Splicing keeps every node's slot valid.
  for (Node* n : order) {
    KILN_CHECK(n && n->owner_ == this && placed.insert(n).second,
               "reorder lists a node twice or a foreign node");
    nodes_.splice(nodes_.end(), nodes_, n->slot_);
  }
}

int64_t Model::opsetVersion(const std::string& domain) const {
  auto canonical = [](const std::string& d) { return d == "ai.onnx" ? std::string() : d; };
  for (const OpsetImport& op : opsets)
    if (canonical(op.domain) == canonical(domain)) return op.version;
  return 0;
}

} // namespace kiln
