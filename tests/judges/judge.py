#!/usr/bin/env python3
"""Runs the outside judges (../shared/judges) on the artifacts kiln's tests wrote.

  judge.py om JUDGES ARTIFACTS EXPECTED [--also ARTIFACTS2 EXPECTED2 ...] --allow-doc docs/om_backend.md [--write]
  judge.py ms JUDGES ARTIFACTS EXPECTED [--jobs N] [--timeout S] [--skip-without-artifacts] [--write]

ARTIFACTS holds one folder per case, as `kiln conformance --keep-artifacts` leaves them: model.om or
model.ms, input_<k>.bin, expected_<k>.bin and io.tsv. EXPECTED lists `case GRADE` lines: the grade the
case must reach (om: PASS > WARN > FAIL; ms: MATCH > RUN > LOAD > FAIL). A case below its grade is a
regression and fails the test; better results are reported so the list can be raised (--write).
Exit 77 (a ctest skip) with the reason when the judge folder is absent, or (--skip-without-artifacts)
when no test wrote artifacts.

om: each --also folder is judged with the first and settled against its own list; a file whose bytes
another file of any folder already has is judged once (the judge reads nothing but the file, so the
same bytes get the same verdict: 1,930 conformance .om files hold 1,090 distinct contents).

An ms case matches element by element (1e-5 + 1e-4 * |expected|) unless its folder holds gate.txt,
`mre M cosine C`: then each output matches when its mean relative error (sum |a - e| / sum |e|,
as MindSpore Lite's benchmark defines it) is at most M and its cosine similarity at least C, or
when it is within the element-wise tolerance (the real models, whose reference is another
runtime with its own summation order).

Stdlib only: the comparison is small next to loading and running each model.
"""
import argparse
import concurrent.futures
import hashlib
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

OM_GRADES = ["FAIL", "WARN", "PASS"]
MS_GRADES = ["FAIL", "LOAD", "RUN", "MATCH"]

# MindSpore TypeId (formats/ms.md table 2.2) -> struct format and kiln's dtype name.
# kiln's dtype names are those of io.tsv (dtypeName: f32, i64, ...).
MS_TYPES = {30: ("?", "bool"), 32: ("b", "i8"), 33: ("h", "i16"), 34: ("i", "i32"),
            35: ("q", "i64"), 37: ("B", "u8"), 38: ("H", "u16"), 39: ("I", "u32"),
            40: ("Q", "u64"), 42: ("e", "f16"), 43: ("f", "f32"), 44: ("d", "f64")}
KILN_TYPES = {name: fmt for fmt, name in MS_TYPES.values()}
ATOL, RTOL = 1e-5, 1e-4  # |actual - expected| <= ATOL + RTOL * |expected|


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


def read_expected(path):
    grades = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    name, grade = line.split()
                    grades[name] = grade
    return grades


def cases_with(artifacts, model_name):
    """Case names (paths under ARTIFACTS such as node/test_abs) of the folders holding model_name."""
    found = []
    for folder, _, files in os.walk(artifacts):
        if model_name in files:
            found.append(os.path.relpath(folder, artifacts))
    return sorted(found)


def settle(kind, grades_order, results, expected_path, write, header):
    """Compares `results` ({case: (grade, reason)}) with the expected list; prints and returns rc."""
    expected = read_expected(expected_path)
    rank = {g: i for i, g in enumerate(grades_order)}
    regressions, better = [], 0
    for case, (grade, reason) in sorted(results.items()):
        want = expected.get(case)
        if want is not None and rank[grade] < rank[want]:
            regressions.append(f"REGRESSION {case}: {grade} (expected {want}): {reason}")
        elif want is None or rank[grade] > rank[want]:
            better += 1
    missing = [c for c in expected if c not in results]
    counts = {g: sum(1 for g2, _ in results.values() if g2 == g) for g in grades_order}
    for case, (grade, reason) in sorted(results.items()):
        if grade != grades_order[-1]:
            print(f"{grade} {case}: {reason}")
    for line in regressions:
        print(line)
    for case in missing:
        print(f"MISSING {case}: listed in {os.path.basename(expected_path)} but no artifact was written")
    print(f"{kind} judge: {len(results)} artifacts: " +
          ", ".join(f"{counts[g]} {g}" for g in reversed(grades_order)) +
          f"; {len(regressions)} regressed, {len(missing)} missing, {better} better than listed")
    if write:
        if os.path.exists(expected_path):  # an existing list keeps its own header
            with open(expected_path) as f:
                kept = "".join(line for line in f if line.startswith("#"))
            header = kept or header
        with open(expected_path, "w") as f:
            f.write(header)
            for case, (grade, _) in sorted(results.items()):
                f.write(f"{case} {grade}\n")
        return 0
    return 1 if regressions or missing else 0


def om_cases(artifacts, any_om):
    """Case names and their .om paths under one ARTIFACTS folder."""
    if any_om:  # every .om under ARTIFACTS, named by its path (real models, samples)
        cases = sorted(os.path.relpath(os.path.join(d, f), artifacts)
                       for d, _, fs in os.walk(artifacts) for f in fs if f.endswith(".om"))
        return [(c, os.path.join(artifacts, c)) for c in cases]
    # one case folder per conformance case, holding model.om
    return [(c, os.path.join(artifacts, c, "model.om")) for c in cases_with(artifacts, "model.om")]


def judge_om(args):
    check = os.path.join(args.judges, "om", "check.sh")
    if not os.path.isfile(check):
        skip(f"{check} is absent (the om judge lives in ../shared/judges beside the checkout; CI has it)")
    allow = ""
    with open(args.allow_doc) as f:
        for line in f:
            if line.startswith("judge allow-list:"):
                allow = line.split(":", 1)[1].strip().replace(" ", "")
    sets = [(args.artifacts, args.expected)] + [tuple(pair) for pair in args.also or []]
    per_set = []
    for artifacts, _ in sets:
        cases = om_cases(artifacts, args.any_om)
        if not cases:
            print(f"no .om artifacts under {artifacts}: run the test that writes them first")
            return 1
        per_set.append(cases)
    # One file per distinct content: a case whose bytes another case has takes that file's verdict.
    first_of = {}  # sha256 -> the path judged for it
    judged_path = {}  # every path -> the path judged for it
    for cases in per_set:
        for _, path in cases:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            judged_path[path] = first_of.setdefault(digest, path)
    files = list(first_of.values())
    print(f"om judge: {len(judged_path)} .om files in {len(sets)} folder(s), {len(files)} distinct"
          " contents judged")
    verdicts = {}
    # check.sh takes many files per call, and each call pays ~0.6 s of CPU to load the operator IR
    # registry: few large batches (a batch's paths stay far below the kernel's argument limit).
    batch = 1024
    for start in range(0, len(files), batch):
        chunk = files[start:start + batch]
        cmd = ["bash", check] + (["--allow-unregistered", allow] if allow else []) + chunk
        run = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        if run.returncode == 2:
            print(run.stdout + run.stderr)
            print(f"om judge setup error (exit 2): {' '.join(cmd[:4])} ...")
            return 1
        wanted = set(chunk)
        for line in run.stdout.splitlines():
            m = re.match(r"^(PASS|WARN|FAIL|ERROR) (.*?\.om): ?(.*)$", line)
            if m and m.group(2) in wanted:
                grade = "FAIL" if m.group(1) == "ERROR" else m.group(1)
                verdicts[m.group(2)] = (grade, m.group(3))
        for path in chunk:
            verdicts.setdefault(path, ("FAIL", "check.sh printed no verdict"))
    header = ("# The om judge's grade per artifact (tests/judges/judge.py om; regenerate with"
              " --write).\n")
    rc = 0
    for (artifacts, expected), cases in zip(sets, per_set):
        if len(sets) > 1:
            print(f"== {artifacts} against {os.path.basename(expected)}")
        results = {case: verdicts[judged_path[path]] for case, path in cases}
        rc = max(rc, settle("om", OM_GRADES, results, expected, args.write, header))
    return rc


def read_io(path):
    io = {"input": [], "output": []}
    with open(path) as f:
        for line in f:
            role, index, name, dtype, dims = line.rstrip("\n").split("\t")
            io[role].append((name, dtype, [int(d) for d in dims.split(",")] if dims else []))
    return io


def values(path, fmt, count):
    size = struct.calcsize(fmt)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != size * count:
        return None
    return struct.unpack(f"<{count}{fmt}", data)


def close(a, e):
    if isinstance(e, float) or isinstance(a, float):
        if math.isnan(e) or math.isnan(a):
            return math.isnan(e) and math.isnan(a)
        if math.isinf(e) or math.isinf(a):
            return a == e
        return abs(a - e) <= ATOL + RTOL * abs(e)
    return a == e


def read_gate(folder):
    """(max mean relative error, min cosine) from gate.txt, or None for the element-wise rule."""
    path = os.path.join(folder, "gate.txt")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        words = f.read().split()
    fields = dict(zip(words[::2], (float(w) for w in words[1::2])))
    return fields["mre"], fields["cosine"]


def gate_verdict(actual, expected, gate):
    """None when `actual` passes the aggregate gate, else what failed. Outputs within the
    element-wise tolerance pass too: a tiny output (a probability near 0) has a large relative
    error from differences far below ATOL."""
    if all(close(a, e) for a, e in zip(actual, expected)):
        return None
    err = ref = dot = aa = ee = 0.0
    for a, e in zip(actual, expected):
        if math.isnan(a) != math.isnan(e):
            return "NaN where the reference has a number (or the other way)"
        if math.isnan(a):
            continue
        err += abs(a - e)
        ref += abs(e)
        dot += a * e
        aa += a * a
        ee += e * e
    mre = err / max(ref, 1e-30)
    cosine = dot / math.sqrt(aa * ee) if aa > 0 and ee > 0 else (1.0 if aa == ee else 0.0)
    if mre <= gate[0] and cosine >= gate[1]:
        return None
    return f"mre {100 * mre:.4f}% (<= {100 * gate[0]:g}%), cosine {cosine:.7f} (>= {gate[1]:g})"


def judge_ms_case(args, case):
    folder = os.path.join(args.artifacts, case)
    gate = read_gate(folder)
    io = read_io(os.path.join(folder, "io.tsv"))
    inputs = [os.path.join(folder, f"input_{k}.bin") for k in range(len(io["input"]))]
    # The runtime's loader runs each model once in a forked "pre-inference" child before the real
    # run, only so that a crash there cannot take the host down: the same model on the same inputs,
    # twice the CPU. Without it a crash ends msrun on its signal, graded FAIL like the child's
    # crash (msrun exit 3) was.
    env = dict(os.environ, MSRUN_NO_PREINFER="1")
    with tempfile.TemporaryDirectory() as out:
        cmd = ["bash", os.path.join(args.judges, "mslite", "run-msrun.sh"),
               os.path.join(folder, "model.ms"), out] + inputs
        run = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env,
                             timeout=args.timeout)
        if run.returncode != 0 and io["input"]:
            # Dynamic dims (the runtime refuses the input sizes or meets a -1 dim): resize the
            # inputs first. A model that runs as written is judged so, as a user runs it (a
            # resize to the same sizes is not always a no-op in the runtime: isnet_fp16 crashes
            # in a Transpose after one).
            env["MSRUN_SHAPES"] = ":".join(",".join(str(d) for d in dims) or "1"
                                           for _, _, dims in io["input"])
            run = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env,
                                 timeout=args.timeout)
        widened = False
        if (run.returncode != 0 and "INPUT_SIZE" in run.stdout + run.stderr
                and any(dtype == "f16" for _, dtype, _ in io["input"])):
            # A runtime built without float16 kernels takes a model's float16 inputs as float32
            # (KernelExecUtil::SetKernelTensorDataType): feed them so, as its users must.
            widened = True
            for k, (_, dtype, dims) in enumerate(io["input"]):
                if dtype != "f16":
                    continue
                half = values(inputs[k], "e", math.prod(dims))
                inputs[k] = os.path.join(out, f"input_{k}_f32.bin")
                with open(inputs[k], "wb") as f:
                    f.write(struct.pack(f"<{len(half)}f", *half))
            cmd = cmd[:4] + inputs
            run = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env,
                                 timeout=args.timeout)
        # The runtime's first ERROR line names the failing op or kernel; the last says what failed.
        lines = [ln.strip() for ln in (run.stdout + run.stderr).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "ERROR" in ln]
        said = " | ".join(dict.fromkeys((errors[:1] + lines[-1:]))) [:400]
        if run.returncode != 0:
            grade = "LOAD" if run.returncode in (4, 5) else "FAIL"
            return case, (grade, f"msrun exit {run.returncode}: {said}")
        got = []
        with open(os.path.join(out, "outputs.txt")) as f:
            for line in f:
                k, name, dtype, dims = line.rstrip("\n").split("\t")
                got.append((int(k), name, int(dtype), [int(d) for d in dims.split()[1:]]))
        if len(got) != len(io["output"]):
            return case, ("RUN", f"{len(got)} outputs, expected {len(io['output'])}")
        for (k, name, typeid, dims), (ename, edtype, edims) in zip(got, io["output"]):
            fmt, dtype = MS_TYPES.get(typeid, (None, f"TypeId {typeid}"))
            if widened and (dtype, edtype) == ("f32", "f16"):
                dtype = "f16"  # computed in float32 by a runtime without float16 kernels
            if dtype != edtype:
                return case, ("RUN", f"output {k} '{name}' is {dtype}, expected {edtype}")
            if edtype not in KILN_TYPES:
                return case, ("RUN", f"output {k} '{name}': no comparison for {edtype}")
            count = math.prod(edims)
            if math.prod(dims) != count:  # [1] for a scalar is the same data
                return case, ("RUN", f"output {k} '{name}' has dims {dims}, expected {edims}")
            actual = values(os.path.join(out, f"{k}.bin"), fmt, count)
            expected = values(os.path.join(folder, f"expected_{k}.bin"), KILN_TYPES[edtype], count)
            if actual is None or expected is None:
                return case, ("RUN", f"output {k} '{name}': byte size differs from {count} elements")
            if gate and edtype in ("f32", "f16", "f64"):
                failed = gate_verdict(actual, expected, gate)
                if failed:
                    return case, ("RUN", f"output {k} '{name}': {failed}")
                continue
            for i, (a, e) in enumerate(zip(actual, expected)):
                if not close(a, e):
                    return case, ("RUN", f"output {k} '{name}' element {i}: {a} vs expected {e}")
    return case, ("MATCH", "")


def judge_ms(args):
    msrun = os.path.join(args.judges, "mslite", "run-msrun.sh")
    if not os.path.isfile(msrun):
        skip(f"{msrun} is absent (the MindSpore Lite runtime judge lives in ../shared/judges beside the"
             " checkout; CI has it)")
    cases = [c for c in cases_with(args.artifacts, "model.ms")
             if os.path.isfile(os.path.join(args.artifacts, c, "io.tsv"))]
    if not cases:
        if args.skip_without_artifacts:
            skip(f"no .ms artifacts with data under {args.artifacts} (the test that writes them did"
                 " not run or was skipped)")
        print(f"no .ms artifacts with data under {args.artifacts}: run the conformance_ms test first")
        return 1
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for case, verdict in pool.map(lambda c: judge_ms_case(args, c), cases):
            results[case] = verdict
    header = ("# The MindSpore Lite runtime's grade per conformance case passing via ms"
              " (tests/judges/judge.py ms; regenerate with --write).\n")
    return settle("ms", MS_GRADES, results, args.expected, args.write, header)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["om", "ms"])
    parser.add_argument("judges")
    parser.add_argument("artifacts")
    parser.add_argument("expected")
    parser.add_argument("--also", nargs=2, action="append", metavar=("ARTIFACTS", "EXPECTED"),
                        help="om: another folder and its list, judged in the same run")
    parser.add_argument("--allow-doc", default="")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per ms case")
    parser.add_argument("--skip-without-artifacts", action="store_true")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--any-om", action="store_true",
                        help="om: judge every .om under ARTIFACTS, not one model.om per case folder")
    args = parser.parse_args()
    return judge_om(args) if args.kind == "om" else judge_ms(args)


if __name__ == "__main__":
    sys.exit(main())
