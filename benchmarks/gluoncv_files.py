"""GluonCV's own model-zoo source files, run unchanged through ``hybrid.mxnet`` installed as ``mxnet``.

For each network of :data:`NETWORKS`: import GluonCV's model file from the GluonCV sources installed beside
MXNet 1.9.1, build the network with ``pretrained=False``, load the parameters MXNet saved for the same
network (``save_parameters``, structural names), run it eagerly and hybridized on the input MXNet ran, and
compare with MXNet's outputs. Prints one row per network (status, worst error relative to the output's
largest magnitude, or the first line of the error) and writes the table to
``benchmarks/results/gluoncv-files.txt``.

How GluonCV's files are loaded (:func:`load_gluoncv`): ``hybrid.mxnet.install()`` makes ``import mxnet``
resolve to hybrid's MXNet surface. The package ``gluoncv`` and its ``model_zoo`` and ``utils`` packages
are registered without running their ``__init__.py`` (which check MXNet's version and import every
model family, the datasets, plotting and download helpers); the model files, ``gluoncv.nn``,
``gluoncv.loss`` and ``gluoncv.utils.parallel`` are GluonCV's own, imported unchanged. ``gluoncv.data``
is a stub holding the datasets' class names and class counts, which the detection and segmentation
builders read, and ``gluoncv.model_zoo.get_model`` a stand-in dispatching to the builders of
:data:`NETWORKS` (GluonCV's registry imports every model family); nothing else is stubbed.

MXNet's files come from ``benchmarks/gluoncv_models.py --export`` (``<name>-structural.params`` and
``io.npz`` under ``$GLUONCV_MODELS``, default ``/work/gluoncv_models``, else ``/work/gluoncv_files``).

    python3 benchmarks/gluoncv_files.py [--only NAME ...] [--no-write]
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
import types
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GLUONCV = os.environ.get("GLUONCV_SOURCES", "/work/mxnet-env/lib/python3.11/site-packages/gluoncv")
EXPORT_ROOT = os.environ.get("GLUONCV_FILES", "/work/gluoncv_files")
ROOTS = [EXPORT_ROOT, os.environ.get("GLUONCV_MODELS", "/work/gluoncv_models")]
MXNET_PYTHON = "/work/mxnet-env/bin/python"
RESULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "gluoncv-files.txt")
RTOL, ATOL = 1e-3, 1e-4  # atol relative to the output's largest magnitude, as benchmarks/gluoncv_models.py

VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
               "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
               "tvmonitor")

# network -> input shape of the check
SHAPES = {"yolo3_mobilenet1.0_voc": (1, 3, 320, 320), "yolo3_darknet53_voc": (1, 3, 320, 320),
          "ssd_300_vgg16_atrous_voc": (1, 3, 300, 300), "ssd_512_resnet50_v1_voc": (1, 3, 512, 512),
          "fcn_resnet50_voc": (1, 3, 256, 256), "inceptionv3": (1, 3, 299, 299), "xception": (1, 3, 299, 299),
          "cifar_resnet20_v1": (1, 3, 32, 32), "simple_pose_resnet18_v1b": (1, 3, 256, 192),
          "center_net_resnet18_v1b_voc": (1, 3, 256, 256), "deeplab_resnet50_ade": (1, 3, 256, 256),
          "psp_resnet50_ade": (1, 3, 256, 256), "danet_resnet50_citys": (1, 3, 256, 256),
          "faster_rcnn_resnet50_v1b_voc": (1, 3, 320, 320)}

# network -> (GluonCV module, builder name, keyword arguments)
NETWORKS: dict[str, tuple[str, str, dict]] = {
    "resnet50_v1b": ("gluoncv.model_zoo.resnetv1b", "resnet50_v1b", {}),
    "mobilenetv3_small": ("gluoncv.model_zoo.mobilenetv3", "mobilenet_v3_small", {}),
    "mobilenetv3_large": ("gluoncv.model_zoo.mobilenetv3", "mobilenet_v3_large", {}),
    "se_resnext50_32x4d": ("gluoncv.model_zoo.resnext", "se_resnext50_32x4d", {}),
    "resnest50": ("gluoncv.model_zoo.resnest", "resnest50", {}),
    "yolo3_mobilenet1.0_voc": ("gluoncv.model_zoo.yolo.yolo3", "yolo3_mobilenet1_0_voc", {"pretrained_base": False}),
    "yolo3_darknet53_voc": ("gluoncv.model_zoo.yolo.yolo3", "yolo3_darknet53_voc", {"pretrained_base": False}),
    "ssd_300_vgg16_atrous_voc": ("gluoncv.model_zoo.ssd.presets", "ssd_300_vgg16_atrous_voc",
                                 {"pretrained_base": False}),
    "ssd_512_resnet50_v1_voc": ("gluoncv.model_zoo.ssd.presets", "ssd_512_resnet50_v1_voc", {"pretrained_base": False}),
    "fcn_resnet50_voc": ("gluoncv.model_zoo.fcn", "get_fcn_resnet50_voc", {"pretrained_base": False}),
    # beyond the list: the other model files, one network each
    "resnet18_v1": ("gluoncv.model_zoo.resnet", "resnet18_v1", {}),
    "resnet18_v2": ("gluoncv.model_zoo.resnet", "resnet18_v2", {}),
    "resnet50_v1": ("gluoncv.model_zoo.resnet", "resnet50_v1", {}),
    "se_resnet18_v1": ("gluoncv.model_zoo.se_resnet", "se_resnet18_v1", {}),
    "mobilenet1.0": ("gluoncv.model_zoo.mobilenet", "mobilenet1_0", {}),
    "mobilenetv2_1.0": ("gluoncv.model_zoo.mobilenet", "mobilenet_v2_1_0", {}),
    "densenet121": ("gluoncv.model_zoo.densenet", "densenet121", {}),
    "squeezenet1.1": ("gluoncv.model_zoo.squeezenet", "squeezenet1_1", {}),
    "vgg11": ("gluoncv.model_zoo.vgg", "vgg11", {}),
    "alexnet": ("gluoncv.model_zoo.alexnet", "alexnet", {}),
    "inceptionv3": ("gluoncv.model_zoo.inception", "inception_v3", {}),
    "googlenet": ("gluoncv.model_zoo.googlenet", "googlenet", {"pretrained_base": False}),
    "xception": ("gluoncv.model_zoo.xception", "get_xcetption", {}),
    "darknet53": ("gluoncv.model_zoo.yolo.darknet", "darknet53", {}),
    "cifar_resnet20_v1": ("gluoncv.model_zoo.cifarresnet", "cifar_resnet20_v1", {}),
    "simple_pose_resnet18_v1b": ("gluoncv.model_zoo.simple_pose.simple_pose_resnet", "simple_pose_resnet18_v1b",
                                 {"pretrained_base": False}),
    "center_net_resnet18_v1b_voc": ("gluoncv.model_zoo.center_net.center_net", "center_net_resnet18_v1b_voc",
                                    {"pretrained_base": False}),
    "deeplab_resnet50_ade": ("gluoncv.model_zoo.deeplabv3", "get_deeplab_resnet50_ade",
                             {"pretrained_base": False, "crop_size": 256}),
    "psp_resnet50_ade": ("gluoncv.model_zoo.pspnet", "get_psp_resnet50_ade", {"pretrained_base": False, "crop_size": 256}),
    "danet_resnet50_citys": ("gluoncv.model_zoo.danet", "get_danet_resnet50_citys", {"pretrained_base": False}),
    "faster_rcnn_resnet50_v1b_voc": ("gluoncv.model_zoo.rcnn.faster_rcnn.predefined_models",
                                     "faster_rcnn_resnet50_v1b_voc", {"pretrained_base": False}),
}
REQUIRED = list(NETWORKS)[:10]  # the families: ResNet v1b, MobileNet v3, SE-ResNeXt, ResNeSt, YOLOv3, SSD, FCN


def _data_stub() -> types.ModuleType:
    """``gluoncv.data`` reduced to what the builders read: VOC's class names and class count."""
    data = types.ModuleType("gluoncv.data", "Stub of gluoncv.data: dataset class names only.")

    class VOCDetection:
        CLASSES = VOC_CLASSES

    class VOCSegmentation:
        CLASSES = ("background",) + VOC_CLASSES
        NUM_CLASS = 21

    data.VOCDetection = VOCDetection
    data.VOCSegmentation = VOCSegmentation
    class ADE20KSegmentation:
        NUM_CLASS = 150
        CLASSES = tuple(f"class{i}" for i in range(150))  # names are not read by the networks

    class CitySegmentation:
        NUM_CLASS = 19
        CLASSES = classes = tuple(f"class{i}" for i in range(19))

    data.ADE20KSegmentation, data.CitySegmentation = ADE20KSegmentation, CitySegmentation
    data.datasets = {"pascal_voc": VOCSegmentation, "pascal_aug": VOCSegmentation, "ade20k": ADE20KSegmentation,
                     "citys": CitySegmentation}
    return data


def get_model(name: str, **kwargs: Any) -> Any:
    """Stand-in for ``gluoncv.model_zoo.get_model`` (GluonCV's registry imports every model family): the
    builders of :data:`NETWORKS` by name."""
    if name.lower() not in NETWORKS:
        raise ValueError(f"gluoncv.model_zoo.get_model stand-in: {name!r} is not among {sorted(NETWORKS)}")
    module_name, builder, _ = NETWORKS[name.lower()]
    return getattr(importlib.import_module(module_name), builder)(**kwargs)


def _bare_package(name: str, path: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = [path]
    module.__package__ = name
    sys.modules[name] = module
    return module


def load_gluoncv(root: str = GLUONCV) -> types.ModuleType:
    """Install ``hybrid.mxnet`` as ``mxnet`` and register the ``gluoncv`` package from ``root`` so that its
    model files import unchanged (see the module docstring for what is registered bare or stubbed)."""
    import hybrid.mxnet
    hybrid.mxnet.install()
    if "gluoncv" in sys.modules:
        return sys.modules["gluoncv"]
    if not os.path.isdir(os.path.join(root, "model_zoo")):
        raise FileNotFoundError(f"GluonCV sources not found at {root!r} (set GLUONCV_SOURCES)")
    package = _bare_package("gluoncv", root)
    package.model_zoo = _bare_package("gluoncv.model_zoo", os.path.join(root, "model_zoo"))
    package.model_zoo.get_model = get_model
    package.utils = _bare_package("gluoncv.utils", os.path.join(root, "utils"))
    package.data = sys.modules["gluoncv.data"] = _data_stub()
    return package


def build(name: str) -> Any:
    """GluonCV's network ``name`` built from its own model file, ``pretrained=False``."""
    load_gluoncv()
    module_name, builder, kwargs = NETWORKS[name]
    module = importlib.import_module(module_name)
    return getattr(module, builder)(pretrained=False, **kwargs)


def export_one(name: str) -> dict:
    """MXNet's side (run by the MXNet python): build with GluonCV, seeded Xavier weights, BatchNorm statistics
    measured on a calibration batch of 4 images (so that BatchNorms on pooled 1x1 features see a real
    variance and the network stays well conditioned), then ``save_parameters`` and the check's input and
    MXNet's outputs (``io.npz``) under ``EXPORT_ROOT/<name>/``."""
    import mxnet as mx
    from gluoncv import model_zoo
    from gluoncv_models import _calibrate_batchnorm  # benchmarks/gluoncv_models.py
    folder = os.path.join(EXPORT_ROOT, name)
    os.makedirs(folder, exist_ok=True)
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    shape = SHAPES.get(name, (1, 3, 224, 224))
    kwargs = NETWORKS[name][2]
    net = model_zoo.get_model(name, pretrained=False, **kwargs)
    net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2))
    batch = 1 if "rcnn" in name else 4  # Faster R-CNN's proposal shapes are fixed per image
    calibration = mx.nd.array(rng.standard_normal((batch,) + shape[1:]).astype(np.float32))
    net(calibration)
    layers = _calibrate_batchnorm(net, [calibration], rng)
    x = rng.standard_normal(shape).astype(np.float32)
    outs = [o.asnumpy() for o in _flatten(net(mx.nd.array(x)))]
    net.save_parameters(os.path.join(folder, f"{name}-structural.params"))
    try:  # MXNet's float64 result: how far MXNet's own float32 result is from exact
        net.cast("float64")
        refs = [o.asnumpy() for o in _flatten(net(mx.nd.array(x, dtype="float64")))]
    except mx.base.MXNetError:  # an operator without float64 (the detectors' anchors, box decoding)
        refs = []
    np.savez(os.path.join(folder, "io.npz"), data=x, **{f"out{i}": o for i, o in enumerate(outs)},
             **{f"ref{i}": o for i, o in enumerate(refs)})
    return {"name": name, "status": "exported", "detail": f"{len(outs)} outputs, {layers} BatchNorm layers"}


def _folder(name: str) -> str | None:
    for root in ROOTS:
        folder = os.path.join(root, name)
        if os.path.exists(os.path.join(folder, f"{name}-structural.params")) and \
                os.path.exists(os.path.join(folder, "io.npz")):
            return folder
    return None


def _flatten(out: Any) -> list:
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in _flatten(item)]
    return [out]


def _close(got: np.ndarray, want: np.ndarray, scale: float) -> np.ndarray:
    return np.abs(got - want) <= RTOL * np.abs(want) + ATOL * scale


def _error(got: Any, want: np.ndarray) -> float:
    """Largest difference relative to ``want``'s largest magnitude (inf for a shape mismatch)."""
    got = np.asarray(got).astype(np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-30) if want.size else 0.0


def compare(got: list, want: list) -> tuple[bool, float, str]:
    """``(ok, worst error relative to the output's scale, detail)``, element by element."""
    if len(got) != len(want):
        return False, float("inf"), f"{len(got)} outputs, MXNet gave {len(want)}"
    worst, ok = 0.0, True
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g).astype(np.float64), w.astype(np.float64)
        if g.shape != w.shape:
            return False, float("inf"), f"output {i} has shape {g.shape}, MXNet's {w.shape}"
        scale = max(float(np.max(np.abs(w))) if w.size else 0.0, 1e-30)
        worst = max(worst, _error(g, w))
        ok &= bool(np.all(_close(g, w, scale)))
    return ok, worst, ""


def compare_detections(got: list, want: list) -> tuple[bool, float, str]:
    """Detections after NMS (``ids (B, K, 1)``, ``scores (B, K, 1)``, ``boxes (B, K, 4)``, rows sorted by
    score, -1 padding): each of MXNet's rows must have a row of ours with the same class and score and box
    within tolerance. Rows whose scores are equal within float32 noise may come in either order; a row at
    the cut-off (its score equal to the last kept score) may be replaced by its tie."""
    if len(got) != 3 or len(want) != 3:
        return compare(got, want)
    (ids, scores, boxes), (wi, ws, wb) = [np.asarray(g).astype(np.float64) for g in got], \
        [w.astype(np.float64) for w in want]
    if ids.shape != wi.shape or scores.shape != ws.shape or boxes.shape != wb.shape:
        return False, float("inf"), f"shapes {[g.shape for g in (ids, scores, boxes)]}, MXNet's " \
                                    f"{[w.shape for w in (wi, ws, wb)]}"
    sscale, bscale = max(float(np.abs(ws).max()), 1e-30), max(float(np.abs(wb).max()), 1e-30)
    worst, moved, ties = 0.0, 0, 0
    for b in range(wi.shape[0]):
        used = np.zeros(wi.shape[1], bool)
        valid = wi[b, :, 0] >= 0
        if valid.sum() != (ids[b, :, 0] >= 0).sum():
            return False, float("inf"), f"{int((ids[b, :, 0] >= 0).sum())} detections, MXNet has {int(valid.sum())}"
        last = ws[b, valid, 0].min() if valid.any() else 0.0
        for i in np.flatnonzero(valid):
            fits = (~used & (ids[b, :, 0] == wi[b, i, 0]) & _close(scores[b, :, 0], ws[b, i, 0], sscale)
                    & np.all(_close(boxes[b], wb[b, i], bscale), axis=-1))
            if fits.any():
                j = min(np.flatnonzero(fits), key=lambda k: abs(k - i))
                used[j] = True
                moved += j != i
                worst = max(worst, abs(scores[b, j, 0] - ws[b, i, 0]) / sscale,
                            float(np.abs(boxes[b, j] - wb[b, i]).max()) / bscale)
            elif _close(np.array(ws[b, i, 0]), np.array(last), sscale):
                ties += 1
            else:
                return False, float("inf"), (f"MXNet's detection {i} (class {int(wi[b, i, 0])}, score "
                                             f"{ws[b, i, 0]:.6f}) has no counterpart")
    notes = [f"{moved} rows in another order among equal scores"] if moved else []
    notes += [f"{ties} rows at the cut-off replaced by ties"] if ties else []
    return True, worst, "; ".join(notes)


def accuracy(got: list, want: list, exact: list) -> tuple[float, float]:
    """``(hybrid's error, MXNet's float32 error)``, both against MXNet's float64 result."""
    ours = max(_error(g, e) for g, e in zip(got, exact))
    theirs = max(_error(w, e) for w, e in zip(want, exact))
    return ours, theirs


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:240] if text else ''}"


def check_one(name: str) -> dict:
    """Build, load MXNet's parameters, run eager and hybridized, compare; one result row."""
    row: dict[str, Any] = {"name": name}
    folder = _folder(name)
    if folder is None:
        return dict(row, status="no-mxnet-files", detail=f"no {name}-structural.params + io.npz under {ROOTS}")
    io = np.load(os.path.join(folder, "io.npz"))
    want = [io[k] for k in sorted((k for k in io.files if k.startswith("out")), key=lambda k: int(k[3:]))]
    exact = [io[k] for k in sorted((k for k in io.files if k.startswith("ref")), key=lambda k: int(k[3:]))]
    detector = "yolo" in name or "ssd" in name
    compare_outputs = compare_detections if detector else compare
    x = io["data"]
    stage = "import/build"
    start = time.perf_counter()
    try:
        net = build(name)
        stage = "load_parameters"
        net.load_parameters(os.path.join(folder, f"{name}-structural.params"))
        results = {}
        for mode in ("eager", "hybridized"):
            stage = mode
            if mode == "hybridized":
                net.hybridize()
            got = _flatten(net(x))
            ok, err, note = compare_outputs(got, want)
            if not ok and exact and not detector and len(exact) == len(got):
                ours, theirs = accuracy(got, want, exact)
                # as close to the exact result as MXNet's own float32 computation: a match in float32's terms
                ok = ours <= max(1.5 * theirs, ATOL)
                note = f"(from MXNet float64: {ours:.1e}, MXNet float32's own: {theirs:.1e})"
            results[mode] = (ok, err, note)
    except Exception as exc:  # a row of the table, not a crash of the run
        import traceback
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "gluoncv" in f.filename]
        where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
        return dict(row, status="error", detail=f"{stage}: {_first_line(exc)}{where}",
                    seconds=round(time.perf_counter() - start, 1))
    ok = all(r[0] for r in results.values())
    detail = ", ".join(f"{mode} {r[1]:.1e}{' ' + r[2] if r[2] else ''}" for mode, r in results.items())
    return dict(row, status="match" if ok else "mismatch", detail=f"max error {detail}",
                seconds=round(time.perf_counter() - start, 1))


def _child(name: str, timeout: float, export: bool = False) -> dict:
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    try:
        command = [MXNET_PYTHON, os.path.abspath(__file__), "--export-one", name] if export else \
            [sys.executable, os.path.abspath(__file__), "--one", name]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"name": name, "status": "timeout", "detail": f"no result within {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"name": name, "status": "crash", "detail": f"exit {proc.returncode}: {tail[:300]}"}


def _format(row: dict) -> str:
    secs = f" [{row['seconds']}s]" if "seconds" in row else ""
    return f"{row['name']:26s} {row['status']:10s} {row.get('detail', '')}{secs}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(NETWORKS), help="check only these networks")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--export-one", help=argparse.SUPPRESS)
    parser.add_argument("--export", action="store_true",
                        help=f"write MXNet's parameters, input and outputs under {EXPORT_ROOT} (runs {MXNET_PYTHON})")
    parser.add_argument("--all", action="store_true", help="also the model files beyond the issue's list")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per network")
    parser.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/gluoncv-files.txt")
    args = parser.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(check_one(args.one)), flush=True)
        return
    if args.export_one:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        print("RESULT " + json.dumps(export_one(args.export_one)), flush=True)
        return
    names = args.only or (list(NETWORKS) if args.all else REQUIRED)
    if args.export:
        for name in names:
            print(_format(_child(name, args.timeout, export=True)), flush=True)
        return
    header = f"{'network':26s} {'status':10s} detail"
    print(header, flush=True)
    rows = []
    for name in names:
        rows.append(_child(name, args.timeout))
        print(_format(rows[-1]), flush=True)
    matched = sum(r["status"] == "match" for r in rows)
    summary = (f"{matched} of {len(rows)} GluonCV networks built from their model files match MXNet's outputs eager "
               f"and hybridized (rtol {RTOL:g}, atol {ATOL:g} x the output's largest magnitude; where MXNet's own "
               f"float32 result is farther than that from its float64 result, at most 1.5x as far; detections may "
               f"come in another order among equal scores)")
    print(summary)
    if not args.no_write and not args.only:
        import jax
        with open(RESULT, "w") as f:
            f.write(f"# benchmarks/gluoncv_files.py ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, jax "
                    f"{jax.__version__}; GluonCV's model files through hybrid.mxnet, MXNet 1.9.1's saved "
                    f"parameters, inputs and outputs)\n{header}\n")
            f.writelines(_format(r) + "\n" for r in rows)
            f.write(summary + "\n")


if __name__ == "__main__":
    main()
