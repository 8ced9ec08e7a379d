// Attention kernels: Attention (opsets 23 and 24: multi-head, grouped-query and multi-query
// attention with a KV cache) and RotaryEmbedding (opset 23). Both follow the operator specs: every
// score and sum in double, the result in the input's dtype.
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/ranges.h>

#include "nn_util.h"

namespace kiln::rt {
namespace {

using nn::Staged;
using nn::StagedOut;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A 3-D [batch, seq, heads * head] or 4-D [batch, heads, seq, head] tensor seen as 4-D
// [batch, heads, seq, head], staged as double.
struct Heads {
  int64_t batch = 0, heads = 0, seq = 0, head = 0;
  bool packed = false; // 3-D input
  std::vector<double> v;
  double at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return v[static_cast<size_t>(((b * heads + h) * seq + s) * head + d)];
  }
};

Expected<Heads> stageHeads(const KernelContext& ctx, const Tensor& t, int64_t heads,
                           const char* what) {
  Heads out;
  const auto& d = t.dims();
  Staged<double> src(t);
  if (d.size() == 4) {
    out.batch = d[0], out.heads = d[1], out.seq = d[2], out.head = d[3];
    out.v.assign(src.data(), src.data() + t.elementCount());
    return out;
  }
  if (d.size() != 3) return ctx.fail("{} must be 3-D or 4-D, got rank {}", what, d.size());
  if (heads <= 0 || d[2] % heads != 0)
    return ctx.fail("{} hidden size {} is not a multiple of the head count {}", what, d[2], heads);
  out.packed = true;
  out.batch = d[0], out.heads = heads, out.seq = d[1], out.head = d[2] / heads;
  out.v.resize(t.elementCount());
  for (int64_t b = 0; b < out.batch; ++b)
    for (int64_t s = 0; s < out.seq; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < out.head; ++e)
          out.v[static_cast<size_t>(((b * heads + h) * out.seq + s) * out.head + e)] =
              src[static_cast<uint64_t>((b * out.seq + s) * d[2] + h * out.head + e)];
  return out;
}

// [batch, heads, seq, head] doubles as a tensor of `dtype`.
Tensor tensorOf(DType dtype, std::vector<int64_t> dims, const std::vector<double>& v) {
  Tensor out;
  nn::dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    StagedOut<T> t(dtype, std::move(dims));
    for (size_t i = 0; i < v.size(); ++i)
      t.data()[i] = static_cast<T>(v[i]);
    out = std::move(t).finish();
  });
  return out;
}

Status attentionOp(KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype();
  if (!nn::isFloatLike(dtype)) return ctx.unsupported("dtype {}", dtypeName(dtype));
  const int64_t qHeadsAttr = ctx.attrInt("q_num_heads", 0);
  const int64_t kvHeadsAttr = ctx.attrInt("kv_num_heads", 0);
  KILN_ASSIGN_OR_RETURN(Heads q, stageHeads(ctx, ctx.input(0), qHeadsAttr, "Q"));
  KILN_ASSIGN_OR_RETURN(Heads k, stageHeads(ctx, ctx.input(1), kvHeadsAttr, "K"));
  KILN_ASSIGN_OR_RETURN(Heads v, stageHeads(ctx, ctx.input(2), kvHeadsAttr, "V"));
  if (k.batch != q.batch || v.batch != q.batch || k.heads != v.heads || k.seq != v.seq)
    return ctx.fail("Q, K and V disagree on batch, heads or sequence");
  if (k.head != q.head) return ctx.fail("Q head size {} differs from K's {}", q.head, k.head);
  if (k.heads <= 0 || q.heads % k.heads != 0)
    return ctx.fail("{} query heads are not a multiple of {} key/value heads", q.heads, k.heads);
  const int64_t B = q.batch, Hq = q.heads, Hkv = k.heads, Sq = q.seq, D = q.head, Dv = v.head;

  // The KV cache: present = concat(past, new) along the sequence.
  int64_t past = 0;
  if (ctx.hasInput(4) != ctx.hasInput(5)) return ctx.fail("past_key and past_value come together");
  std::vector<double> presentK, presentV;
  if (ctx.hasInput(4)) {
    const auto& pk = ctx.inputDims(4);
    const auto& pv = ctx.inputDims(5);
    if (pk.size() != 4 || pv.size() != 4 || pk[0] != B || pk[1] != Hkv || pk[3] != D ||
        pv[0] != B || pv[1] != Hkv || pv[3] != Dv || pv[2] != pk[2])
      return ctx.fail("past_key / past_value must be [batch, kv_heads, past, head]");
    past = pk[2];
  }
  const int64_t T = past + k.seq;
  presentK.resize(static_cast<size_t>(B * Hkv * T * D));
  presentV.resize(static_cast<size_t>(B * Hkv * T * Dv));
  {
    std::optional<Staged<double>> pk, pv;
    if (past) pk.emplace(ctx.input(4)), pv.emplace(ctx.input(5));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t e = 0; e < D; ++e)
            presentK[static_cast<size_t>(((b * Hkv + h) * T + t) * D + e)] =
                t < past ? (*pk)[static_cast<uint64_t>(((b * Hkv + h) * past + t) * D + e)]
                         : k.at(b, h, t - past, e);
          for (int64_t e = 0; e < Dv; ++e)
            presentV[static_cast<size_t>(((b * Hkv + h) * T + t) * Dv + e)] =
                t < past ? (*pv)[static_cast<uint64_t>(((b * Hkv + h) * past + t) * Dv + e)]
                         : v.at(b, h, t - past, e);
        }
  }

  // The additive bias over [batch, q_heads, Sq, T]: the mask (padded with -inf up to T), the
  // causal frontier j <= i + offset, and the padding of nonpad_kv_seqlen (opset 24).
  const bool hasMask = ctx.hasInput(3);
  std::vector<int64_t> md(4, 1), ms(4, 0);
  std::optional<Staged<double>> mask;
  bool boolMask = false;
  if (hasMask) {
    const Tensor& m = ctx.input(3);
    if (m.dims().size() > 4 || m.dims().empty()) return ctx.fail("attn_mask must be 2-D to 4-D");
    std::copy(m.dims().begin(), m.dims().end(), md.begin() + (4 - m.dims().size()));
    const int64_t full[4] = {B, Hq, Sq, T};
    for (size_t a = 0; a < 3; ++a)
      if (md[a] != 1 && md[a] != full[a])
        return ctx.fail("attn_mask [{}] does not broadcast to [{}, {}, {}, {}]",
                        fmt::join(m.dims(), ", "), B, Hq, Sq, T);
    if (md[3] > T) return ctx.fail("attn_mask is longer ({}) than the keys ({})", md[3], T);
    int64_t stride = 1;
    for (size_t a = 4; a-- > 0;) {
      ms[a] = md[a] == 1 ? 0 : stride;
      stride *= md[a];
    }
    boolMask = m.dtype() == DType::Bool;
    if (!boolMask) mask.emplace(m);
  }
  const bool causal = ctx.attrInt("is_causal", 0) != 0;
  std::vector<int64_t> nonpad;
  if (ctx.opset() >= 24 && ctx.hasInput(6)) {
    nonpad = ctx.inputInts(6);
    if (static_cast<int64_t>(nonpad.size()) != B)
      return ctx.fail("nonpad_kv_seqlen has {} entries for batch {}", nonpad.size(), B);
  }
  auto bias = [&](int64_t b, int64_t h, int64_t i, int64_t j) -> double {
    double out = 0;
    if (hasMask) {
      if (j >= md[3]) return kNegInf;
      const int64_t at = b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3];
      out = boolMask ? (ctx.inputData<uint8_t>(3)[at] ? 0.0 : kNegInf)
                     : (*mask)[static_cast<uint64_t>(at)];
    }
    if (causal) {
      const int64_t offset = past ? past : (!nonpad.empty() ? nonpad[b] - Sq : 0);
      if (j > i + offset) out += kNegInf;
    }
    if (!nonpad.empty() && j >= nonpad[b]) out += kNegInf;
    return out;
  };

  const double scale = ctx.hasAttr("scale") ? static_cast<double>(ctx.attrFloat("scale", 1.0f))
                                            : 1.0 / std::sqrt(static_cast<double>(D));
  const double softcap = ctx.attrFloat("softcap", 0.0f);
  // qk_matmul_output: 0 the scaled Q·Kᵀ, 1 after softcap, 2 after the mask (softcap comes
  // before the mask, so masked scores stay -inf), 3 after softmax.
  const int64_t mode = ctx.attrInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) return ctx.fail("qk_matmul_output_mode {} is not 0 to 3", mode);
  const int64_t rep = Hq / Hkv;
  std::vector<double> y(static_cast<size_t>(B * Hq * Sq * Dv)), qk;
  if (ctx.wantsOutput(3)) qk.resize(static_cast<size_t>(B * Hq * Sq * T));
  std::vector<double> row(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / rep; // each key/value head serves `rep` consecutive query heads
      for (int64_t i = 0; i < Sq; ++i) {
        double* qkRow =
            qk.empty() ? nullptr : &qk[static_cast<size_t>(((b * Hq + h) * Sq + i) * T)];
        double top = kNegInf, biasTop = kNegInf;
        for (int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (int64_t e = 0; e < D; ++e)
            s += q.at(b, h, i, e) * presentK[static_cast<size_t>(((b * Hkv + kh) * T + j) * D + e)];
          s *= scale;
          if (qkRow && mode == 0) qkRow[j] = s;
          if (softcap > 0) s = softcap * std::tanh(s / softcap);
          if (qkRow && mode == 1) qkRow[j] = s;
          const double added = bias(b, h, i, j);
          biasTop = std::max(biasTop, added);
          s += added;
          if (qkRow && mode == 2) qkRow[j] = s;
          row[static_cast<size_t>(j)] = s;
          top = std::max(top, s);
        }
        // A query row the bias masks entirely (every key -inf) attends to nothing: its
        // probabilities, and so its output, are 0 rather than the 0/0 of a plain softmax (the
        // operator spec's errata to opsets 23 and 24).
        const bool allMasked = biasTop == kNegInf;
        double sum = 0;
        for (double& s : row) {
          s = allMasked ? 0.0 : std::exp(s - top);
          sum += s;
        }
        for (int64_t j = 0; j < T; ++j) {
          if (!allMasked) row[static_cast<size_t>(j)] /= sum;
          if (qkRow && mode == 3) qkRow[j] = row[static_cast<size_t>(j)];
        }
        for (int64_t e = 0; e < Dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < T; ++j)
            acc += row[static_cast<size_t>(j)] *
                   presentV[static_cast<size_t>(((b * Hkv + kh) * T + j) * Dv + e)];
          y[static_cast<size_t>(((b * Hq + h) * Sq + i) * Dv + e)] = acc;
        }
      }
    }
  if (q.packed) {
    std::vector<double> packed(y.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < Sq; ++i)
          for (int64_t e = 0; e < Dv; ++e)
            packed[static_cast<size_t>((b * Sq + i) * Hq * Dv + h * Dv + e)] =
                y[static_cast<size_t>(((b * Hq + h) * Sq + i) * Dv + e)];
    ctx.setOutput(0, tensorOf(dtype, {B, Sq, Hq * Dv}, packed));
  } else {
    ctx.setOutput(0, tensorOf(dtype, {B, Hq, Sq, Dv}, y));
  }
  if (ctx.wantsOutput(1)) ctx.setOutput(1, tensorOf(dtype, {B, Hkv, T, D}, presentK));
  if (ctx.wantsOutput(2)) ctx.setOutput(2, tensorOf(dtype, {B, Hkv, T, Dv}, presentV));
  if (ctx.wantsOutput(3)) ctx.setOutput(3, tensorOf(dtype, {B, Hq, Sq, T}, qk));
  return Status::ok();
}

// RotaryEmbedding: rotates the first rotary_embedding_dim features of each head by the angles
// of cos_cache / sin_cache (picked by position_ids when given), halves split or interleaved.
Status rotaryEmbeddingOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType dtype = x.dtype();
  if (!nn::isFloatLike(dtype)) return ctx.unsupported("dtype {}", dtypeName(dtype));
  const auto& xd = x.dims();
  const bool packed = xd.size() == 3;
  if (xd.size() != 3 && xd.size() != 4)
    return ctx.fail("input must be 3-D or 4-D, got rank {}", xd.size());
  const int64_t numHeads = ctx.attrInt("num_heads", 0);
  int64_t B = xd[0], H, S, D;
  if (packed) {
    if (numHeads <= 0 || xd[2] % numHeads != 0)
      return ctx.fail("a 3-D input needs num_heads dividing its hidden size {}", xd[2]);
    H = numHeads, S = xd[1], D = xd[2] / numHeads;
  } else {
    H = xd[1], S = xd[2], D = xd[3];
  }
  int64_t rot = ctx.attrInt("rotary_embedding_dim", 0);
  if (rot == 0) rot = D;
  if (rot > D || rot % 2 != 0)
    return ctx.fail("rotary_embedding_dim {} must be even and at most the head size {}", rot, D);
  const int64_t half = rot / 2;
  const bool interleaved = ctx.attrInt("interleaved", 0) != 0;
  const auto& cd = ctx.inputDims(1);
  if (ctx.inputDims(2) != cd) return ctx.fail("cos_cache and sin_cache differ in shape");
  std::vector<int64_t> positions;
  if (ctx.hasInput(3)) {
    positions = ctx.inputInts(3);
    if (cd.size() != 2 || static_cast<int64_t>(positions.size()) != B * S)
      return ctx.fail("with position_ids the caches are 2-D and position_ids [batch, seq]");
    for (int64_t p : positions)
      if (p < 0 || p >= cd[0]) return ctx.fail("position id {} outside [0, {})", p, cd[0]);
  } else if (cd.size() != 3 || cd[0] != B || cd[1] != S) {
    return ctx.fail("without position_ids the caches are [batch, seq, rotary_dim / 2]");
  }
  if (cd.back() != half)
    return ctx.fail("the caches hold {} angles per position, rotary_embedding_dim / 2 is {}",
                    cd.back(), half);
  Staged<double> xv(x), cosv(ctx.input(1)), sinv(ctx.input(2));
  std::vector<double> out(xv.data(), xv.data() + x.elementCount());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t row = positions.empty() ? b * S + s : positions[static_cast<size_t>(b * S + s)];
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = packed ? (b * S + s) * H * D + h * D : ((b * H + h) * S + s) * D;
        for (int64_t i = 0; i < half; ++i) {
          const double c = cosv[static_cast<uint64_t>(row * half + i)];
          const double sn = sinv[static_cast<uint64_t>(row * half + i)];
          const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          const double x1 = xv[static_cast<uint64_t>(base + i1)];
          const double x2 = xv[static_cast<uint64_t>(base + i2)];
          out[static_cast<size_t>(base + i1)] = c * x1 - sn * x2;
          out[static_cast<size_t>(base + i2)] = sn * x1 + c * x2;
        }
      }
    }
  ctx.setOutput(0, tensorOf(dtype, xd, out));
  return Status::ok();
}

KILN_REGISTER_KERNEL("Attention", attentionOp);
KILN_REGISTER_KERNEL("RotaryEmbedding", rotaryEmbeddingOp);

} // namespace
} // namespace kiln::rt
