// What ONNX RNN, GRU and LSTM nodes mean, decoded once for the unrolling pass and both backends:
// the cell, directions, layout, clip, gate options and the activation list with its alphas/betas.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln::ops {

enum class RnnCell { Rnn, Gru, Lstm };

// One activation of the `activations` list, its name in ONNX spelling (Sigmoid, Tanh, Relu,
// Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus) with the
// alpha/beta it takes (each function's own default when the lists run out).
struct RnnActivation {
  std::string name;
  float alpha = 0;
  float beta = 0;
};

struct RnnAttrs {
  RnnCell cell = RnnCell::Rnn;
  int64_t gates = 1;              // 1 (RNN), 3 (GRU, z r h), 4 (LSTM, i o f c)
  int64_t hidden = -1;            // hidden_size, -1 when absent
  std::string direction = "forward";
  int64_t dirs = 1;               // 2 for bidirectional
  bool reverse = false;           // direction == "reverse"
  int64_t layout = 0;             // 1: batch-major X/Y/states
  std::optional<float> clip;      // absent: no clipping
  bool inputForget = false;       // LSTM: f = 1 - i
  bool linearBeforeReset = false; // GRU
  // perDirection() entries per direction, forward's first.
  std::vector<RnnActivation> activations;

  int64_t perDirection() const { return cell == RnnCell::Rnn ? 1 : cell == RnnCell::Gru ? 2 : 3; }
  // The cell's default activations (Tanh; Sigmoid, Tanh; Sigmoid, Tanh, Tanh) in every direction.
  bool defaultActivations() const;
};

// The op's cell kind; nullopt for ops other than RNN, GRU and LSTM.
std::optional<RnnCell> rnnCellOf(const Node& node);

// Decodes `node`'s attributes (K2013-style errors for a bad direction, activation or count).
Expected<RnnAttrs> rnnAttrs(const Node& node);

} // namespace kiln::ops
