"""GluonCV model-zoo networks exported by MXNet 1.9.1, imported with ``SymbolBlock.imports``.

Two modes, each run by its own interpreter:

``--export`` (``/work/mxnet-env/bin/python``: MXNet 1.9.1 + GluonCV 0.10.5)
    Builds every network of :data:`MODELS` with ``pretrained=False`` and seeded random weights;
    BatchNorm running statistics are set from the statistics of each layer's input on the saved
    input (perturbed), and gamma/beta drawn at random, so inference outputs exercise them.
    Hybridizes, runs once, ``export()``s to ``<root>/<name>/<name>-symbol.json`` and
    ``<name>-0000.params``, and saves the input and MXNet's outputs in ``io.npz`` and a
    ``meta.json`` (input names and shapes, operators used, or MXNet's own error).
    The networks of :data:`STRUCTURAL` also get ``<name>-structural.params`` (``save_parameters``).

``--check`` (the project's ``python3``)
    Imports each exported network with ``SymbolBlock.imports``, runs it eagerly and hybridized
    on the saved input, compares with MXNet's outputs and prints one row per network; the table
    is written to ``benchmarks/results/gluoncv-import.txt``.

Each network runs in a child process (a crash or a runaway compile costs one row, not the run).
``--only NAME [NAME ...]`` restricts either mode to some networks.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ROOT = os.environ.get("GLUONCV_MODELS", "/work/gluoncv_models")
MXNET_PYTHON = "/work/mxnet-env/bin/python"
RESULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "gluoncv-import.txt")
RTOL, ATOL = 1e-3, 1e-4  # atol is relative to the output's largest magnitude
DIVERGED = 1e-3  # --diverge: an internal output whose max error exceeds this fraction of its scale


@dataclass(frozen=True)
class Spec:
    family: str
    name: str
    shapes: tuple = ((1, 3, 224, 224),)
    kwargs: dict = field(default_factory=dict)


def _cls(name: str, size: int = 224, **kw: Any) -> Spec:
    return Spec("classification", name, ((1, 3, size, size),), kw)


NO_BASE = {"pretrained_base": False}

MODELS: list[Spec] = [
    _cls("resnet18_v1"), _cls("resnet50_v1"), _cls("resnet18_v2"), _cls("resnet50_v2"),
    _cls("resnet18_v1b"), _cls("resnet50_v1b"), _cls("resnet50_v1c"), _cls("resnet50_v1d"),
    _cls("resnet50_v1e"), _cls("resnet50_v1s"), _cls("resnet50_v1b_gn"), _cls("resnet18_v1b_0.89"),
    _cls("resnext50_32x4d"), _cls("se_resnext50_32x4d"), _cls("se_resnet18_v1"), _cls("se_resnet18_v2"),
    _cls("senet_154"), _cls("resnest14"), _cls("resnest50"),
    _cls("mobilenet1.0"), _cls("mobilenet0.25"), _cls("mobilenetv2_1.0"),
    _cls("mobilenetv3_small"), _cls("mobilenetv3_large"),
    _cls("squeezenet1.0"), _cls("squeezenet1.1"), _cls("densenet121"),
    _cls("vgg11"), _cls("vgg16_bn"), _cls("alexnet"), _cls("googlenet"),
    _cls("inceptionv3", 299), _cls("xception", 299), _cls("darknet53"),
    _cls("residualattentionnet56"), _cls("hrnet_w18_small_v1_c"),
    _cls("shufflenet_v1"), _cls("shufflenet_v2"), _cls("nasnet_4_1056"), _cls("dla34"),
    _cls("cifar_resnet20_v1", 32), _cls("cifar_resnet20_v2", 32), _cls("cifar_wideresnet16_10", 32),
    _cls("cifar_resnext29_32x4d", 32), _cls("cifar_residualattentionnet56", 32),
    Spec("detection", "ssd_512_resnet50_v1_voc", ((1, 3, 512, 512),), NO_BASE),
    Spec("detection", "ssd_300_vgg16_atrous_voc", ((1, 3, 300, 300),), NO_BASE),
    Spec("detection", "ssd_512_mobilenet1.0_voc", ((1, 3, 512, 512),), NO_BASE),
    Spec("detection", "yolo3_darknet53_voc", ((1, 3, 320, 320),), NO_BASE),
    Spec("detection", "yolo3_mobilenet1.0_voc", ((1, 3, 320, 320),), NO_BASE),
    Spec("detection", "faster_rcnn_resnet50_v1b_voc", ((1, 3, 320, 320),), NO_BASE),
    Spec("detection", "mask_rcnn_resnet18_v1b_coco", ((1, 3, 320, 320),), NO_BASE),
    Spec("detection", "center_net_resnet18_v1b_voc", ((1, 3, 256, 256),), NO_BASE),
    Spec("detection", "center_net_mobilenetv3_small_duc_voc", ((1, 3, 256, 256),), NO_BASE),
    Spec("segmentation", "fcn_resnet50_voc", ((1, 3, 256, 256),), NO_BASE),
    Spec("segmentation", "fcn_resnet50_ade", ((1, 3, 256, 256),), NO_BASE),
    Spec("segmentation", "psp_resnet50_ade", ((1, 3, 256, 256),), dict(NO_BASE, crop_size=256)),
    Spec("segmentation", "deeplab_resnet50_ade", ((1, 3, 256, 256),), dict(NO_BASE, crop_size=256)),
    Spec("segmentation", "deeplab_resnest50_ade", ((1, 3, 256, 256),), dict(NO_BASE, crop_size=256)),
    Spec("segmentation", "danet_resnet50_citys", ((1, 3, 256, 256),), NO_BASE),
    Spec("segmentation", "icnet_resnet50_citys", ((1, 3, 256, 256),), dict(NO_BASE, crop_size=256)),
    Spec("segmentation", "fastscnn_citys", ((1, 3, 256, 256),), dict(NO_BASE, crop_size=256)),
    Spec("segmentation", "deeplab_v3b_plus_wideresnet_citys", ((1, 3, 256, 256),), dict(NO_BASE, crop_size=256)),
    Spec("pose", "simple_pose_resnet18_v1b", ((1, 3, 256, 192),), NO_BASE),
    Spec("pose", "mobile_pose_mobilenetv3_small", ((1, 3, 256, 192),), NO_BASE),
    Spec("pose", "mobile_pose_resnet18_v1b", ((1, 3, 256, 192),), NO_BASE),
    Spec("pose", "alpha_pose_resnet101_v1b_coco", ((1, 3, 256, 192),), NO_BASE),
    Spec("video", "i3d_resnet50_v1_kinetics400", ((1, 3, 8, 112, 112),), NO_BASE),
    Spec("video", "i3d_nl5_resnet50_v1_kinetics400", ((1, 3, 8, 112, 112),), NO_BASE),
    Spec("video", "slowfast_4x16_resnet50_kinetics400", ((1, 3, 36, 112, 112),), NO_BASE),
    Spec("video", "r2plus1d_resnet18_kinetics400", ((1, 3, 8, 112, 112),), NO_BASE),
    Spec("video", "c3d_kinetics400", ((1, 3, 16, 112, 112),), {}),
    Spec("video", "p3d_resnet50_kinetics400", ((1, 3, 16, 112, 112),), NO_BASE),
    Spec("video", "resnet18_v1b_kinetics400", ((1, 3, 224, 224),), NO_BASE),
    Spec("video", "inceptionv1_kinetics400", ((1, 3, 224, 224),), NO_BASE),
    Spec("other", "monodepth2_resnet18_kitti_mono_640x192", ((1, 3, 192, 640),), NO_BASE),
    Spec("other", "siamrpn_alexnet_v2_otb15", ((1, 3, 127, 127), (1, 3, 287, 287)), {}),
]

# Networks whose structural parameter files (save_parameters) the GluonCV source-file yardstick loads.
STRUCTURAL = {"resnet50_v1b", "mobilenetv3_small", "mobilenetv3_large", "se_resnext50_32x4d", "resnest50",
              "yolo3_mobilenet1.0_voc", "yolo3_darknet53_voc", "ssd_300_vgg16_atrous_voc",
              "ssd_512_resnet50_v1_voc", "fcn_resnet50_voc"}

SPECS = {spec.name: spec for spec in MODELS}


def data_names(spec: Spec) -> list[str]:
    return ["data"] if len(spec.shapes) == 1 else [f"data{i}" for i in range(len(spec.shapes))]


# ---------------------------------------------------------------- MXNet side (--export)

def _flatten(out: Any) -> list:
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in _flatten(item)]
    return [out]


def _calibrate_batchnorm(net: Any, inputs: list, rng: np.random.Generator) -> int:
    """Set every BatchNorm's running statistics from its input's statistics on ``inputs`` (perturbed),
    and draw gamma/beta, so that inference outputs depend on all four. Returns the count of layers."""
    import mxnet as mx
    handles, count = [], [0]

    def hook(block: Any, args: Any) -> None:
        x = args[0].asnumpy().astype(np.float64)
        axis = block._kwargs.get("axis", 1) % x.ndim
        axes = tuple(i for i in range(x.ndim) if i != axis)
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        c = mean.shape[0]
        # A floor from the whole tensor: over a 1x1 map (SE and split-attention branches at batch 1)
        # the channel variance is 0 and the mean the value itself, and x - mean would be rounding noise.
        var = np.maximum(var, 0.1 * x.var() + 1e-6)
        block.running_mean.set_data(mx.nd.array(mean + 0.3 * np.sqrt(var) * rng.standard_normal(c)))
        block.running_var.set_data(mx.nd.array(var * rng.uniform(0.7, 1.3, c)))
        block.gamma.set_data(mx.nd.array(rng.uniform(0.5, 1.5, c)))
        block.beta.set_data(mx.nd.array(0.2 * rng.standard_normal(c)))
        count[0] += 1

    def visit(block: Any) -> None:
        if all(hasattr(block, p) for p in ("running_mean", "running_var", "gamma", "beta")):
            handles.append(block.register_forward_pre_hook(hook))
        for child in block._children.values():
            visit(child)

    visit(net)
    net(*inputs)
    for handle in handles:
        handle.detach()
    return count[0]


def _vector_safe_xavier(mx: Any) -> None:
    """GluonCV gives some BatchNorm gamma/beta an explicit Xavier initializer, which MXNet refuses
    for vectors; those start at 1/0 here (then :func:`_calibrate_batchnorm` draws them)."""
    xavier_weight = mx.init.Xavier._init_weight
    if getattr(xavier_weight, "vector_safe", False):
        return

    def init_weight(self: Any, name: Any, arr: Any) -> None:
        if len(arr.shape) < 2:
            arr[:] = 1.0 if str(name).endswith("gamma") else 0.0
        else:
            xavier_weight(self, name, arr)
    init_weight.vector_safe = True
    mx.init.Xavier._init_weight = init_weight


def export_one(spec: Spec) -> dict:
    import mxnet as mx
    from gluoncv import model_zoo
    _vector_safe_xavier(mx)
    folder = os.path.join(ROOT, spec.name)
    os.makedirs(folder, exist_ok=True)
    mx.random.seed(0)
    np.random.seed(0)
    rng = np.random.default_rng(0)
    meta: dict[str, Any] = {"family": spec.family, "name": spec.name, "input_names": data_names(spec),
                            "input_shapes": [list(s) for s in spec.shapes], "kwargs": spec.kwargs}
    stage = "build"
    try:
        net = model_zoo.get_model(spec.name, pretrained=False, **spec.kwargs)
        stage = "initialize"
        net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2))
        xs_np = [rng.standard_normal(s).astype(np.float32) for s in spec.shapes]
        xs = [mx.nd.array(x) for x in xs_np]
        stage = "eager forward"
        net(*xs)
        stage = "BatchNorm calibration"
        meta["batchnorm_layers"] = _calibrate_batchnorm(net, xs, rng)
        stage = "hybridized forward"
        net.hybridize()
        outs = [o.asnumpy() for o in _flatten(net(*xs))]
        stage = "export"
        prefix = os.path.join(folder, spec.name)
        net.export(prefix, epoch=0)
        if spec.name in STRUCTURAL:
            net.save_parameters(prefix + "-structural.params")
    except Exception as exc:  # MXNet itself cannot run or export this network
        meta["status"] = "mxnet-error"
        meta["error"] = f"{stage}: {_error_line(exc)}"
        _write_meta(folder, meta)
        return meta
    np.savez(os.path.join(folder, "io.npz"), **{n: x for n, x in zip(meta["input_names"], xs_np)},
             **{f"out{i}": o for i, o in enumerate(outs)})
    with open(prefix + "-symbol.json") as f:
        nodes = json.load(f)["nodes"]
    ops: dict[str, int] = {}
    for node in nodes:
        if node["op"] != "null":
            ops[node["op"]] = ops.get(node["op"], 0) + 1
    meta.update(status="exported", outputs=[list(o.shape) for o in outs],
                output_dtypes=[str(o.dtype) for o in outs], ops=dict(sorted(ops.items())))
    _write_meta(folder, meta)
    return meta


def _error_line(exc: BaseException) -> str:
    """The line that says what went wrong: MXNet's errors start with a C++ traceback and end with it."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        lines = [line for line in lines if not line.startswith(("Traceback", "File ", "[bt]"))][-1:] or lines
    return f"{type(exc).__name__}: {lines[0][:400] if lines else ''}"


def _write_meta(folder: str, meta: dict) -> None:
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def internals_one(spec: Spec) -> dict:
    """Every operator output of the exported graph, computed by MXNet: ``<name>-internals-symbol.json``
    (the exported graph with all operator outputs as heads) and ``internals.npz`` (their values)."""
    import mxnet as mx
    folder = os.path.join(ROOT, spec.name)
    prefix = os.path.join(folder, spec.name)
    names = data_names(spec)
    sym = mx.sym.load(prefix + "-symbol.json")
    internals = sym.get_internals()
    params = set(sym.list_arguments()) | set(sym.list_auxiliary_states())
    heads = [internals[i] for i, out in enumerate(internals.list_outputs())
             if out not in params and out not in names]
    group = mx.sym.Group(heads)
    group.save(prefix + "-internals-symbol.json")
    block = mx.gluon.SymbolBlock(group, [mx.sym.var(n) for n in names])
    block.load_parameters(prefix + "-0000.params", allow_missing=False, ignore_extra=True)
    io = np.load(os.path.join(folder, "io.npz"))
    outs = block(*[mx.nd.array(io[n]) for n in names])
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    np.savez(os.path.join(folder, "internals.npz"), **{f"out{i}": o.asnumpy() for i, o in enumerate(outs)})
    return {"name": spec.name, "status": "internals", "heads": group.list_outputs()}


# ---------------------------------------------------------------- hybrid side (--check)

def compare(got: list, want: list) -> tuple[bool, float, str]:
    """``(ok, worst error relative to the output's scale, detail)`` over all outputs."""
    if len(got) != len(want):
        return False, float("inf"), f"{len(got)} outputs, MXNet gave {len(want)}"
    worst, ok = 0.0, True
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape:
            return False, float("inf"), f"output {i} has shape {g.shape}, MXNet's {w.shape}"
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        finite = np.isfinite(w64)
        if not np.array_equal(np.isfinite(g64), finite) or not np.array_equal(g64[~finite], w64[~finite],
                                                                              equal_nan=True):
            bad = int(np.sum(np.isfinite(g64) != finite))
            return False, float("inf"), f"output {i}: non-finite values differ from MXNet's at {bad} positions"
        g64, w64 = g64[finite], w64[finite]
        if w64.size == 0:
            continue
        scale = max(float(np.max(np.abs(w64))), 1e-30)
        worst = max(worst, float(np.max(np.abs(g64 - w64))) / scale)
        ok &= bool(np.all(np.abs(g64 - w64) <= RTOL * np.abs(w64) + ATOL * scale))
    return ok, worst, ""


def compare_detections(got: list, want: list) -> tuple[bool, str]:
    """Detection outputs ``(ids, scores, boxes)`` compared as sets of kept boxes.

    With random weights many scores differ by less than float noise, so NMS may list equal-scored
    boxes in another order than MXNet; each of MXNet's kept rows (id >= 0) must have a row of ours
    with the same id, and score and box within the tolerances, and the counts must agree."""
    if len(got) != 3 or len(want) != 3:
        return False, "not an (ids, scores, boxes) triple"
    ids, scores, boxes = (np.asarray(a, np.float64).reshape(-1, np.asarray(a).shape[-1]) for a in got)
    rids, rscores, rboxes = (np.asarray(a, np.float64).reshape(-1, a.shape[-1]) for a in want)
    kept, rkept = np.flatnonzero(ids[:, 0] >= 0), np.flatnonzero(rids[:, 0] >= 0)
    if len(kept) != len(rkept):
        return False, f"{len(kept)} boxes kept, MXNet kept {len(rkept)}"
    box_tol = ATOL * max(float(np.max(np.abs(rboxes[rkept]))) if len(rkept) else 1.0, 1e-30)
    free = set(kept.tolist())
    for r in rkept:
        close = [i for i in free if ids[i, 0] == rids[r, 0]
                 and abs(scores[i, 0] - rscores[r, 0]) <= RTOL * abs(rscores[r, 0]) + 1e-6
                 and np.all(np.abs(boxes[i] - rboxes[r]) <= RTOL * np.abs(rboxes[r]) + box_tol)]
        if not close:
            return False, f"MXNet's box {r} (id {rids[r, 0]:g}, score {rscores[r, 0]:.6f}) has no counterpart"
        free.discard(min(close, key=lambda i: abs(scores[i, 0] - rscores[r, 0])))
    return True, f"same {len(rkept)} boxes, {int(np.sum(kept != rkept))} listed in another order"


def check_one(spec: Spec) -> dict:
    folder = os.path.join(ROOT, spec.name)
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    row = {"family": spec.family, "name": spec.name}
    if meta["status"] != "exported":
        return dict(row, status="mxnet-error", detail=meta["error"])
    from hybrid.export import SymbolBlock
    io = np.load(os.path.join(folder, "io.npz"))
    xs = [io[n] for n in meta["input_names"]]
    want = [io[f"out{i}"] for i in range(len(meta["outputs"]))]
    prefix = os.path.join(folder, spec.name)
    try:
        net = SymbolBlock.imports(prefix + "-symbol.json", meta["input_names"], prefix + "-0000.params")
    except Exception as exc:
        return dict(row, status="import-error", detail=_first_line(exc))
    results = {}
    for mode in ("eager", "hybridized"):
        start = time.perf_counter()
        try:
            if mode == "hybridized":
                net.hybridize()
            got = [np.asarray(o) for o in _flatten(net(*xs))]
        except Exception as exc:
            return dict(row, status=f"{mode}-error", detail=_first_line(exc))
        ok, err, detail = compare(got, want)
        if not ok and spec.family == "detection" and len(want) == 3 and not detail:
            ok, detail = compare_detections(got, want)
            detail = f"max err {err:.1e}, as sets: {detail}"
        results[mode] = (ok, err, detail, time.perf_counter() - start)
    ok = all(r[0] for r in results.values())
    detail = "; ".join(f"{m} {r[2] or f'max err {r[1]:.1e}'}" for m, r in results.items())
    return dict(row, status="match" if ok else "mismatch", detail=detail,
                seconds=round(sum(r[3] for r in results.values()), 1))


def diverge_one(spec: Spec) -> dict:
    """The first operator output (in graph order) that differs from MXNet's by more than :data:`DIVERGED`
    of its scale (float noise grows through a deep graph), with its node's op, attributes and inputs."""
    folder = os.path.join(ROOT, spec.name)
    prefix = os.path.join(folder, spec.name)
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    from hybrid.export import SymbolBlock
    with open(prefix + "-internals-symbol.json") as f:
        doc = json.load(f)
    io, ref = np.load(os.path.join(folder, "io.npz")), np.load(os.path.join(folder, "internals.npz"))
    net = SymbolBlock.imports(prefix + "-internals-symbol.json", meta["input_names"], prefix + "-0000.params")
    got = _flatten(net(*[io[n] for n in meta["input_names"]]))
    nodes = doc["nodes"]
    for i, ((node_id, k, _), g) in enumerate(zip(doc["heads"], got)):
        ok, err, detail = compare([g], [ref[f"out{i}"]])
        if detail or err > DIVERGED:
            node = nodes[node_id]
            inputs = [f"{nodes[j]['name']}[{kk}]" for j, kk, *_ in node["inputs"]]
            return {"name": spec.name, "status": "diverges", "node": node["name"], "output": k, "op": node["op"],
                    "attrs": node.get("attrs", {}), "inputs": inputs,
                    "detail": detail or f"max err {err:.1e} relative to scale",
                    "shape": list(np.asarray(g).shape), "ref_shape": list(ref[f"out{i}"].shape)}
    return {"name": spec.name, "status": "no divergence", "heads": len(got)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line[:300]}"


# ---------------------------------------------------------------- drivers

def _child(mode: str, name: str, python: str, timeout: float) -> dict:
    cmd = [python, os.path.abspath(__file__), f"--{mode}-one", name]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"family": SPECS[name].family, "name": name, "status": f"{mode}-timeout",
                "detail": f"no result within {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"family": SPECS[name].family, "name": name, "status": f"{mode}-crash",
            "detail": f"exit {proc.returncode}: {tail[:300]}"}


def _selected(only: list[str] | None) -> list[Spec]:
    if not only:
        return MODELS
    unknown = [n for n in only if n not in SPECS]
    if unknown:
        raise SystemExit(f"unknown networks {unknown}; known: {sorted(SPECS)}")
    return [SPECS[n] for n in only]


def run_export(only: list[str] | None, timeout: float) -> None:
    for spec in _selected(only):
        start = time.perf_counter()
        meta = _child("export", spec.name, MXNET_PYTHON, timeout)
        print(f"{spec.family:15s} {spec.name:38s} {meta['status']:12s} {time.perf_counter() - start:6.1f}s "
              f"{meta.get('error', meta.get('detail', ''))}", flush=True)


def run_check(only: list[str] | None, timeout: float, write: bool) -> None:
    rows = []
    header = f"{'family':15s} {'network':38s} {'status':13s} detail"
    print(header, flush=True)
    for spec in _selected(only):
        if not os.path.exists(os.path.join(ROOT, spec.name, "meta.json")):
            row = {"family": spec.family, "name": spec.name, "status": "not-exported", "detail": ""}
        else:
            row = _child("check", spec.name, sys.executable, timeout)
        rows.append(row)
        print(_format(row), flush=True)
    exported = [r for r in rows if r["status"] not in ("mxnet-error", "not-exported")]
    matched = sum(r["status"] == "match" for r in rows)
    summary = (f"{matched} of {len(exported)} exported networks match MXNet's outputs eager and hybridized "
               f"(rtol {RTOL:g}, atol {ATOL:g} x the output's largest magnitude); "
               f"{len(rows) - len(exported)} of {len(rows)} could not be exported by MXNet itself")
    print(summary)
    if write and not only:
        import jax
        with open(RESULT, "w") as f:
            f.write(f"# benchmarks/gluoncv_models.py --check  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                    f"jax {jax.__version__}, GluonCV 0.10.5 / MXNet 1.9.1 exports, random weights)\n")
            f.write(header + "\n")
            f.writelines(_format(r) + "\n" for r in rows)
            f.write(summary + "\n")


def _format(row: dict) -> str:
    secs = f" [{row['seconds']}s]" if "seconds" in row else ""
    return f"{row['family']:15s} {row['name']:38s} {row['status']:13s} {row.get('detail', '')}{secs}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--export", action="store_true", help="export with MXNet (run with the MXNet python)")
    mode.add_argument("--check", action="store_true", help="import with hybrid and compare")
    mode.add_argument("--export-one", metavar="NAME", help=argparse.SUPPRESS)
    mode.add_argument("--check-one", metavar="NAME", help=argparse.SUPPRESS)
    mode.add_argument("--internals-one", metavar="NAME", help=argparse.SUPPRESS)
    mode.add_argument("--diverge", metavar="NAME",
                      help="find the first node whose output differs from MXNet's (runs both interpreters)")
    mode.add_argument("--diverge-one", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="restrict to these networks")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per network")
    parser.add_argument("--no-write", action="store_true", help="do not write the results file")
    args = parser.parse_args()
    if args.export_one:
        print("RESULT " + json.dumps(export_one(SPECS[args.export_one])), flush=True)
    elif args.check_one:
        print("RESULT " + json.dumps(check_one(SPECS[args.check_one])), flush=True)
    elif args.internals_one:
        print("RESULT " + json.dumps(internals_one(SPECS[args.internals_one])), flush=True)
    elif args.diverge_one:
        print("RESULT " + json.dumps(diverge_one(SPECS[args.diverge_one])), flush=True)
    elif args.diverge:
        for mode_name, python in (("internals", MXNET_PYTHON), ("diverge", sys.executable)):
            result = _child(mode_name, args.diverge, python, args.timeout)
        print(json.dumps(result, indent=1))
    elif args.export:
        run_export(args.only, args.timeout)
    else:
        run_check(args.only, args.timeout, not args.no_write)


if __name__ == "__main__":
    main()
