# Writes the transformer test models (bert_encoder, decoder_step, decoder_step_ops, new_ops .onnxtxt)
# of tests/cli/transformer.sh: python3 gen_transformer_models.py tests/cli/models
import math, re

class Flat:
    def __init__(s): s.k = 0
def _split_args(t):
    out, depth, cur = [], 0, ''
    for ch in t:
        if ch in '(<[{': depth += 1
        if ch in ')>]}': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip()); cur = ''
        else:
            cur += ch
    out.append(cur.strip())
    return out
def _flatten(expr, emit, counter):
    expr = expr.strip()
    m = re.match(r'^([A-Za-z]\w*)\s*(<.*?>)?\s*\((.*)\)$', expr, re.S)
    if not m or expr.startswith('Constant'):
        return expr
    op, attrs, args = m.group(1), m.group(2) or '', m.group(3)
    if args.strip() == '':
        names = []
    else:
        names = [_flatten(a, emit, counter) if a else '' for a in _split_args(args)]
    counter[0] += 1
    t = f"t{counter[0]}"
    emit(f"{t} = {op} {attrs} ({', '.join(names)})")
    return t
class G:
    def __init__(s): s.lines=[]; s.n=0
    def add(s, line):
        lhs, rhs = line.split(" = ", 1)
        if not hasattr(s, "ctr"): s.ctr = [0]
        m = re.match(r'^([A-Za-z]\w*)\s*(<.*?>)?\s*\((.*)\)$', rhs.strip(), re.S)
        if m and not rhs.startswith("Constant"):
            op, attrs, args = m.group(1), m.group(2) or "", m.group(3)
            names = [_flatten(a, lambda l: s.lines.append("  " + l), s.ctr) if a else "" for a in _split_args(args)] if args.strip() else []
            s.lines.append(f"  {lhs} = {op} {attrs} ({', '.join(names)})")
        else:
            s.lines.append("  " + line)
    def weight(s, name, shape, amp=None):
        s.n += 1; i = s.n
        n = 1
        for d in shape: n *= d
        if amp is None: amp = 1.0/math.sqrt(shape[0])
        s.add(f"{name}_n = Constant <value_float = {float(n)}> ()")
        s.add(f"{name}_r = Range (zero_f, {name}_n, one_f)")
        s.add(f"{name}_f = Constant <value_float = {0.71 + 0.137*i:.4f}> ()")
        s.add(f"{name}_p = Constant <value_float = {0.5*i:.2f}> ()")
        s.add(f"{name}_a = Constant <value_float = {amp*1.7:.6f}> ()")
        s.add(f"{name}_s = Sin (Add (Mul ({name}_r, {name}_f), {name}_p))")
        s.add(f"{name}_shape = Constant <value_ints = [{', '.join(map(str,shape))}]> ()")
        s.add(f"{name} = Reshape (Mul ({name}_s, {name}_a), {name}_shape)")
        return name
    def common(s):
        s.add("zero_f = Constant <value_float = 0.0> ()")
        s.add("one_f = Constant <value_float = 1.0> ()")

def bert(H=64, NH=4, F=128, name="bert_encoder"):
    g = G(); g.common()
    HD, S = H // NH, 8
    g.add("m1 = Sub (one_f, mask)")
    g.add("neg = Constant <value_float = -10000.0> ()")
    g.add("madd2 = Mul (m1, neg)")
    g.add("mshape = Constant <value_ints = [1, 1, 1, 8]> ()")
    g.add("madd = Reshape (madd2, mshape)")
    g.add(f"heads_shape = Constant <value_ints = [1, {S}, {NH}, {HD}]> ()")
    g.add(f"flat_shape = Constant <value_ints = [1, {S}, {H}]> ()")
    g.add(f"scale = Constant <value_float = {1/math.sqrt(HD)}> ()")
    g.add("half = Constant <value_float = 0.5> ()")
    g.add(f"rsqrt2 = Constant <value_float = {1/math.sqrt(2)}> ()")
    x = "x"
    for l in range(2):
        p = f"l{l}_"
        for w in "qkvo":
            g.weight(p+"W"+w, [H, H]); g.weight(p+"b"+w, [H], amp=0.1)
        g.add(f"{p}q = Add (MatMul ({x}, {p}Wq), {p}bq)")
        g.add(f"{p}k = Add (MatMul ({x}, {p}Wk), {p}bk)")
        g.add(f"{p}v = Add (MatMul ({x}, {p}Wv), {p}bv)")
        g.add(f"{p}qh = Transpose <perm = [0, 2, 1, 3]> (Reshape ({p}q, heads_shape))")
        g.add(f"{p}kt = Transpose <perm = [0, 2, 3, 1]> (Reshape ({p}k, heads_shape))")
        g.add(f"{p}vh = Transpose <perm = [0, 2, 1, 3]> (Reshape ({p}v, heads_shape))")
        g.add(f"{p}sc = Add (Mul (MatMul ({p}qh, {p}kt), scale), madd)")
        g.add(f"{p}pr = Softmax <axis = -1> ({p}sc)")
        g.add(f"{p}ctx = Reshape (Transpose <perm = [0, 2, 1, 3]> (MatMul ({p}pr, {p}vh)), flat_shape)")
        g.add(f"{p}att = Add (MatMul ({p}ctx, {p}Wo), {p}bo)")
        g.weight(p+"g1", [H], amp=0.3); g.weight(p+"be1", [H], amp=0.1)
        g.add(f"{p}x1 = LayerNormalization <axis = -1, epsilon = 1e-12> (Add ({x}, {p}att), {p}g1, {p}be1)")
        g.weight(p+"W1", [H, F]); g.weight(p+"b1", [F], amp=0.1)
        g.weight(p+"W2", [F, H]); g.weight(p+"b2", [H], amp=0.1)
        g.add(f"{p}h = Add (MatMul ({p}x1, {p}W1), {p}b1)")
        g.add(f"{p}gelu = Mul (Mul ({p}h, half), Add (one_f, Erf (Mul ({p}h, rsqrt2))))")
        g.add(f"{p}ff = Add (MatMul ({p}gelu, {p}W2), {p}b2)")
        g.weight(p+"g2", [H], amp=0.3); g.weight(p+"be2", [H], amp=0.1)
        out = "y" if l == 1 else f"{p}x2"
        g.add(f"{out} = LayerNormalization <axis = -1, epsilon = 1e-12> (Add ({p}x1, {p}ff), {p}g2, {p}be2)")
        x = out
    ff = "" if name == "bert_encoder" else f", feed-forward {F}"
    hdr = ('<ir_version: 8, opset_import: ["" : 17]>\n'
           f'{name} (float[1,{S},{H}] x, float[1,{S}] mask) => (float[1,{S},{H}] y) {{\n')
    return doc_hdr(f"// A BERT-like encoder (2 layers, hidden {H}, {NH} heads{ff}, sequence 8) from standard ONNX ops:\n"
            "// attention from MatMul/Reshape/Transpose/Softmax with an additive padding mask,\n"
            "// LayerNormalization, an Erf-based GELU. Weights are made in the graph (Sin of a Range) and\n"
            "// folded into initializers on conversion.\n", hdr) + "\n".join(g.lines) + "\n}\n"

def doc_hdr(doc, hdr):
    text = " ".join(l[3:] for l in doc.strip().split("\n"))
    return hdr.replace(">\n", f', doc_string: "{text}">\n', 1)

def rope_caches(g, S, past, half):
    # angles[s, i] = (past + s) * 10000^(-i/half); caches [1, S, half]
    g.add(f"pos_start = Constant <value_float = {float(past)}> ()")
    g.add(f"pos_end = Constant <value_float = {float(past+S)}> ()")
    g.add("pos = Range (pos_start, pos_end, one_f)")
    g.add(f"pos_shape = Constant <value_ints = [1, {S}, 1]> ()")
    g.add(f"half_n = Constant <value_float = {float(half)}> ()")
    g.add("fi = Range (zero_f, half_n, one_f)")
    g.add(f"lbase = Constant <value_float = {-math.log(10000.0)/half}> ()")
    g.add("inv_freq = Exp (Mul (fi, lbase))")
    g.add("ang = Mul (Reshape (pos, pos_shape), inv_freq)")
    g.add("cos_c = Cos (ang)")
    g.add("sin_c = Sin (ang)")

def decoder(direct):
    g = G(); g.common()
    H, NH, HD, S, P, F = 64, 4, 16, 2, 6, 128
    T = P + S
    rope_caches(g, S, P, HD//2)
    g.weight("w_rms1", [H], amp=0.5)
    g.add("h = RMSNormalization <axis = -1, epsilon = 1e-6> (x, w_rms1)")
    for w in "qkvo":
        g.weight("W"+w, [H, H])
    g.add("q = RotaryEmbedding <num_heads = 4> (MatMul (h, Wq), cos_c, sin_c)")
    g.add("k = RotaryEmbedding <num_heads = 4> (MatMul (h, Wk), cos_c, sin_c)")
    g.add("v = MatMul (h, Wv)")
    g.add(f"flat_shape = Constant <value_ints = [1, {S}, {H}]> ()")
    if direct:
        g.add("ctx, present_key, present_value = Attention <is_causal = 1, q_num_heads = 4, kv_num_heads = 4> (q, k, v, , past_key, past_value)")
    else:
        g.add(f"heads_shape = Constant <value_ints = [1, {S}, {NH}, {HD}]> ()")
        g.add("qh = Transpose <perm = [0, 2, 1, 3]> (Reshape (q, heads_shape))")
        g.add("kh = Transpose <perm = [0, 2, 1, 3]> (Reshape (k, heads_shape))")
        g.add("vh = Transpose <perm = [0, 2, 1, 3]> (Reshape (v, heads_shape))")
        g.add("present_key = Concat <axis = 2> (past_key, kh)")
        g.add("present_value = Concat <axis = 2> (past_value, vh)")
        rows = []
        for i in range(S):
            rows += ["0.0" if j <= P + i else "-10000.0" for j in range(T)]
        g.add(f"causal = Constant <value = float[{S},{T}] {{{', '.join(rows)}}}> ()")
        g.add(f"scale = Constant <value_float = {1/math.sqrt(HD)}> ()")
        g.add("sc = Add (Mul (MatMul (qh, Transpose <perm = [0, 1, 3, 2]> (present_key)), scale), causal)")
        g.add("pr = Softmax <axis = -1> (sc)")
        g.add("ctx = Reshape (Transpose <perm = [0, 2, 1, 3]> (MatMul (pr, present_value)), flat_shape)")
    g.add("x1 = Add (x, MatMul (ctx, Wo))")
    g.weight("w_rms2", [H], amp=0.5)
    g.add("h2 = RMSNormalization <axis = -1, epsilon = 1e-6> (x1, w_rms2)")
    g.weight("W1", [H, F]); g.weight("W2", [F, H])
    g.add("u = MatMul (h2, W1)")
    if direct:
        g.add("act = Swish (u)")
    else:
        g.add("act = Mul (u, Sigmoid (u))")
    g.add("y = Add (x1, MatMul (act, W2))")
    opset = 24 if direct else 23
    name = "decoder_step_ops" if direct else "decoder_step"
    hdr = (f'<ir_version: 10, opset_import: ["" : {opset}]>\n'
           f'{name} (float[1,{S},{H}] x, float[1,{NH},{P},{HD}] past_key, float[1,{NH},{P},{HD}] past_value)\n'
           f'    => (float[1,{S},{H}] y, float[1,{NH},{T},{HD}] present_key, float[1,{NH},{T},{HD}] present_value) {{\n')
    if direct:
        doc = ("// One decoder step (2 new tokens after 6 cached) with the transformer ops used directly:\n"
               "// RMSNormalization, RotaryEmbedding, Attention (causal, KV cache in past_key/past_value,\n"
               "// present_key/present_value out) and a Swish MLP (opset 24).\n")
    else:
        doc = ("// One decoder step (2 new tokens after 6 cached): RMSNormalization and RotaryEmbedding, then\n"
               "// attention from standard ops: past_key/past_value concatenated with the new K/V (the\n"
               "// present_key/present_value outputs), an additive causal mask, Softmax; a SiLU MLP.\n")
    return doc_hdr(doc, hdr) + "\n".join(g.lines) + "\n}\n"

def misc():
    g = G(); g.common()
    g.weight("gscale", [8], amp=0.5); g.weight("gbias", [8], amp=0.2)
    g.add("gn = GroupNormalization <num_groups = 2, epsilon = 1e-5> (x, gscale, gbias)")
    g.add("sw = Swish <alpha = 1.5> (gn)")
    g.add("ge = Gelu (sw)")
    g.add("gt = Gelu <approximate = \"tanh\"> (ge)")
    g.add("y = Mish (gt)")
    g.weight("qg", [1, 4, 3, 8]); g.weight("kg", [1, 2, 5, 8]); g.weight("vg", [1, 2, 5, 8])
    g.add("mask = Constant <value = bool[3,5] {1,1,1,0,1, 1,0,1,1,1, 1,1,1,1,1}> ()")
    g.add("z, , , qk = Attention <qk_matmul_output_mode = 3, scale = 0.3, softcap = 2.0> (Mul (qg, x_scale), kg, vg, mask)")
    g.add("x_scale = ReduceMean <keepdims = 0> (x)")
    g.add("cosr = Cos (Reshape (Range (zero_f, twelve, one_f), rshape))")
    g.add("sinr = Sin (Reshape (Range (zero_f, twelve, one_f), rshape))")
    g.add("twelve = Constant <value_float = 12.0> ()")
    g.add("rshape = Constant <value_ints = [6, 2]> ()")
    g.add("r = RotaryEmbedding <interleaved = 1, rotary_embedding_dim = 4> (x4, cosr, sinr, pos)")
    g.add("pos = Constant <value = int64[1,3] {5, 0, 2}> ()")
    hdr = ('<ir_version: 10, opset_import: ["" : 24]>\n'
           'new_ops (float[2,8,3,3] x, float[1,2,3,6] x4) => (float[2,8,3,3] y, float[1,4,3,8] z, float[1,4,3,5] qk, float[1,2,3,6] r) {\n')
    doc = ("// The transformer ops newer than opset 17 used directly, each with a non-default attribute:\n"
           "# GroupNormalization (per-channel scale, opset 21+), Swish, Gelu (exact and tanh), Mish,\n"
           "# grouped-query Attention with a bool mask, scale, softcap and the softmax output, and\n"
           "# interleaved partial RotaryEmbedding with position_ids.\n")
    return doc_hdr(doc, hdr) + "\n".join(g.lines) + "\n}\n"

import sys
d = sys.argv[1]
open(f"{d}/bert_encoder.onnxtxt","w").write(bert())
# BERT-base's width ratio (feed-forward 4x hidden) at hidden 256: its MatMul weights dominate the
# file as in real encoders (converter_lite DYNAMIC_QUANT, tests/cli/dynamic_quant.sh).
open(f"{d}/bert_encoder_256.onnxtxt","w").write(bert(H=256, NH=4, F=1024, name="bert_encoder_256"))
open(f"{d}/decoder_step.onnxtxt","w").write(decoder(False))
open(f"{d}/decoder_step_ops.onnxtxt","w").write(decoder(True))
open(f"{d}/new_ops.onnxtxt","w").write(misc())
