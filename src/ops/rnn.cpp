// What ONNX RNN, GRU and LSTM nodes mean (ops/rnn.h): attributes decoded with the schema's defaults.
#include "ops/rnn.h"

#include <cctype>

#include <fmt/format.h>

#include "ops/attributes.h"

namespace kiln::ops {
namespace {

Status badAttr(const Node& node, const std::string& what) {
  return Status(ErrorCode::BadAttribute,
                fmt::format("{} '{}': {}", node.opType(), node.name(), what),
                "fix the attribute in the exporter");
}

std::string lower(const std::string& s) {
  std::string out;
  for (char ch : s)
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

} // namespace

std::optional<RnnCell> rnnCellOf(const Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return std::nullopt;
  if (node.opType() == "RNN") return RnnCell::Rnn;
  if (node.opType() == "GRU") return RnnCell::Gru;
  if (node.opType() == "LSTM") return RnnCell::Lstm;
  return std::nullopt;
}

bool RnnAttrs::defaultActivations() const {
  static const std::vector<std::string> rnn = {"Tanh"}, gru = {"Sigmoid", "Tanh"},
                                        lstm = {"Sigmoid", "Tanh", "Tanh"};
  const auto& want = cell == RnnCell::Rnn ? rnn : cell == RnnCell::Gru ? gru : lstm;
  for (size_t i = 0; i < activations.size(); ++i)
    if (activations[i].name != want[i % want.size()]) return false;
  return true;
}

Expected<RnnAttrs> rnnAttrs(const Node& node) {
  RnnAttrs a;
  auto cell = rnnCellOf(node);
  if (!cell) return badAttr(node, "not an RNN, GRU or LSTM node");
  a.cell = *cell;
  a.gates = a.cell == RnnCell::Rnn ? 1 : a.cell == RnnCell::Gru ? 3 : 4;
  KILN_ASSIGN_OR_RETURN(a.hidden, intAttr(node, "hidden_size", -1));
  KILN_ASSIGN_OR_RETURN(a.direction, stringAttr(node, "direction", "forward"));
  if (a.direction == "bidirectional")
    a.dirs = 2;
  else if (a.direction == "reverse")
    a.reverse = true;
  else if (a.direction != "forward")
    return badAttr(node, fmt::format("direction '{}' (forward, reverse or bidirectional)",
                                     a.direction));
  KILN_ASSIGN_OR_RETURN(a.layout, intAttr(node, "layout", 0));
  if (node.attribute("clip")) {
    KILN_ASSIGN_OR_RETURN(float clip, floatAttr(node, "clip", 0));
    a.clip = clip;
  }
  if (a.cell == RnnCell::Lstm) {
    KILN_ASSIGN_OR_RETURN(int64_t v, intAttr(node, "input_forget", 0));
    a.inputForget = v != 0;
  }
  if (a.cell == RnnCell::Gru) {
    KILN_ASSIGN_OR_RETURN(int64_t v, intAttr(node, "linear_before_reset", 0));
    a.linearBeforeReset = v != 0;
  }

  std::vector<std::string> names;
  if (const Attribute* attr = node.attribute("activations")) {
    if (attr->kind() != AttrKind::Strings) return badAttr(node, "activations must be strings");
    names = attr->asStrings();
  }
  const size_t perDir = static_cast<size_t>(a.perDirection());
  if (names.empty()) {
    if (a.cell == RnnCell::Rnn)
      names = {"Tanh"};
    else if (a.cell == RnnCell::Gru)
      names = {"Sigmoid", "Tanh"};
    else
      names = {"Sigmoid", "Tanh", "Tanh"};
  }
  if (names.size() == perDir && a.dirs == 2) {
    std::vector<std::string> forward = names;
    names.insert(names.end(), forward.begin(), forward.end());
  }
  if (names.size() != perDir * static_cast<size_t>(a.dirs))
    return badAttr(node, fmt::format("{} activations given, expected {}", names.size(),
                                     perDir * static_cast<size_t>(a.dirs)));
  std::vector<float> alphas, betas;
  if (const Attribute* attr = node.attribute("activation_alpha");
      attr && attr->kind() == AttrKind::Floats)
    alphas = attr->asFloats();
  if (const Attribute* attr = node.attribute("activation_beta");
      attr && attr->kind() == AttrKind::Floats)
    betas = attr->asFloats();
  size_t ai = 0, bi = 0;
  auto alpha = [&](float fallback) { return ai < alphas.size() ? alphas[ai++] : fallback; };
  auto beta = [&](float fallback) { return bi < betas.size() ? betas[bi++] : fallback; };
  for (const std::string& raw : names) {
    const std::string n = lower(raw);
    RnnActivation act;
    if (n == "sigmoid")
      act.name = "Sigmoid";
    else if (n == "tanh")
      act.name = "Tanh";
    else if (n == "relu")
      act.name = "Relu";
    else if (n == "affine") {
      act.name = "Affine";
      act.alpha = alpha(1.0f);
      act.beta = beta(0.0f);
    } else if (n == "leakyrelu") {
      act.name = "LeakyRelu";
      act.alpha = alpha(0.01f);
    } else if (n == "thresholdedrelu") {
      act.name = "ThresholdedRelu";
      act.alpha = alpha(1.0f);
    } else if (n == "scaledtanh") {
      act.name = "ScaledTanh";
      act.alpha = alpha(1.0f);
      act.beta = beta(1.0f);
    } else if (n == "hardsigmoid") {
      act.name = "HardSigmoid";
      act.alpha = alpha(0.2f);
      act.beta = beta(0.5f);
    } else if (n == "elu") {
      act.name = "Elu";
      act.alpha = alpha(1.0f);
    } else if (n == "softsign")
      act.name = "Softsign";
    else if (n == "softplus")
      act.name = "Softplus";
    else
      return badAttr(node, fmt::format("activation '{}' is not one ONNX defines", raw));
    a.activations.push_back(act);
  }
  return a;
}

} // namespace kiln::ops
