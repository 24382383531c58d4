"""Images per second of a JPEG training pipeline: hybrid (folder and .rec) against torchvision, in one run.

    python benchmarks/bench_image_pipeline.py [--images 1024] [--size 256] [--crop 224] [--batch 64]
        [--workers 2] [--epochs 5] [--out benchmarks/results/image-pipeline-cpu.txt]

Data: ``--images`` generated ``--size`` x ``--size`` RGB JPEGs (quality 90, smooth colour fields plus
noise) in 8 class folders, and the same JPEG bytes packed in a RecordIO ``.rec`` + ``.idx``.
Pipelines, each ``RandomResizedCrop(crop)``, a random left-right flip, ``ToTensor``, ``Normalize`` with
ImageNet's mean and std, shuffled batches of ``--batch`` from ``--workers`` worker processes:

- ``torchvision``: ``torchvision.datasets.ImageFolder`` + ``torch.utils.data.DataLoader``
  (persistent workers);
- ``hybrid folder``: ``data.vision.ImageFolderDataset`` + ``data.DataLoader``;
- ``hybrid .rec``: ``data.vision.ImageRecordDataset`` + ``data.DataLoader``;
- ``hybrid threads``: the folder pipeline with ``thread_pool=True`` (worker threads, no pickling
  of batches between processes);
- ``... transport``: each loader over a dataset of ready ``(3, crop, crop)`` float32 images (no
  decoding, no transforms): the rate at which the loader alone moves batches out of its workers.

Every loader runs one warm-up epoch, then ``--epochs`` timed epochs, interleaved between the
pipelines; a pipeline's rate is the median of its epochs' images per second. The script also
times each stage on one image in the main process (decode, crop-and-resize, flip, to tensor,
normalize) for both libraries, to show where the time goes.
"""
from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLASSES = 8


def make_images(root: Path, count: int, size: int) -> Path:
    """JPEGs in ``root/images/class_k/`` and the same bytes in ``root/images.rec`` (+ ``.idx``); returns the .rec."""
    from PIL import Image

    from hybrid import recordio
    rng = np.random.default_rng(0)
    rec_path = root / "images.rec"
    writer = recordio.MXIndexedRecordIO(str(root / "images.idx"), str(rec_path), "w")
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    for i in range(count):
        label = i % CLASSES
        phase = rng.random(3) * 6.28
        freq = 1 + rng.random(3) * 4
        img = np.stack([127 + 100 * np.sin(freq[c] * (xx + yy * (c + 1)) * 3.14 + phase[c]) for c in range(3)], -1)
        img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=90)
        folder = root / "images" / f"class_{label}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:05d}.jpg").write_bytes(buf.getvalue())
        writer.write_idx(i, recordio.pack(recordio.IRHeader(0, float(label), i, 0), buf.getvalue()))
    writer.close()
    return rec_path


class ReadyImages:
    """``count`` samples of an all-zero ``(3, crop, crop)`` float32 image and label 0."""

    def __init__(self, count: int, crop: int):
        self.count, self.image = count, np.zeros((3, crop, crop), np.float32)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int):
        return self.image, 0


def hybrid_transform(crop: int):
    from hybrid.data.vision import transforms as T
    return T.Compose([T.RandomResizedCrop(crop), T.RandomFlipLeftRight(), T.ToTensor(), T.Normalize(MEAN, STD)])


def hybrid_loader(dataset, crop: int, batch: int, workers: int, threads: bool = False):
    from hybrid import data
    return data.DataLoader(dataset.transform_first(hybrid_transform(crop)), batch_size=batch, shuffle=True,
                           num_workers=workers, thread_pool=threads)


def make_loaders(root: Path, rec: Path, crop: int, batch: int, workers: int, with_torch: bool) -> dict[str, object]:
    from hybrid import data
    from hybrid.data import vision
    loaders = {}
    try:
        if not with_torch:
            raise ImportError("--no-torch")
        import torch
        import torchvision
        from torchvision import transforms as TT
        torch.manual_seed(0)
        tv = torchvision.datasets.ImageFolder(str(root / "images"), transform=TT.Compose([
            TT.RandomResizedCrop(crop), TT.RandomHorizontalFlip(), TT.ToTensor(), TT.Normalize(MEAN, STD)]))
        loaders["torchvision"] = torch.utils.data.DataLoader(tv, batch_size=batch, shuffle=True, num_workers=workers,
                                                             persistent_workers=workers > 0)
        loaders["torch transport"] = torch.utils.data.DataLoader(
            ReadyImages(len(tv), crop), batch_size=batch, num_workers=workers, persistent_workers=workers > 0)
    except ImportError as exc:
        print(f"torchvision not measured: {exc}")
    for name, dataset in (("hybrid folder", vision.ImageFolderDataset(str(root / "images"))),
                          ("hybrid .rec", vision.ImageRecordDataset(str(rec)))):
        loaders[name] = hybrid_loader(dataset, crop, batch, workers)
    loaders["hybrid threads"] = hybrid_loader(vision.ImageFolderDataset(str(root / "images")), crop, batch, workers,
                                              threads=True)
    count = len(vision.ImageFolderDataset(str(root / "images")))
    loaders["hybrid transport"] = data.DataLoader(ReadyImages(count, crop), batch_size=batch, num_workers=workers)
    return loaders


def epoch_rate(loader) -> float:
    """Images per second of one full pass over ``loader`` (each batch's arrays made ready)."""
    count, start = 0, time.perf_counter()
    for images, _labels in loader:
        if hasattr(images, "block_until_ready"):
            images.block_until_ready()
        count += images.shape[0]
    return count / (time.perf_counter() - start)


def stage_times(path: Path, crop: int, repeats: int, with_torch: bool) -> list[tuple[str, float, float]]:
    """Milliseconds per image of each stage, hybrid and torchvision, in this process."""
    from PIL import Image

    from hybrid.data.vision import _decode
    from hybrid.data.vision import transforms as T
    payload = path.read_bytes()

    def ms(fn: Callable[[], object]) -> float:
        fn()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - start) / repeats * 1e3

    img = _decode.decode_image(payload)
    tensor = T.ToTensor()(img[:crop, :crop])
    ours = {"decode JPEG": lambda: _decode.decode_image(payload),
            "RandomResizedCrop": lambda: T.RandomResizedCrop(crop)(img),
            "flip": lambda: T.RandomFlipLeftRight(p=1)(img),
            "ToTensor": lambda: T.ToTensor()(img[:crop, :crop]),
            "Normalize": lambda: T.Normalize(MEAN, STD)(tensor)}
    theirs: dict[str, Callable[[], object]] = {}
    try:
        if not with_torch:
            raise ImportError("--no-torch")
        import torch
        from torchvision import transforms as TT
        torch.set_num_threads(1)
        pil = Image.open(io.BytesIO(payload)).convert("RGB")
        pil_crop = pil.crop((0, 0, crop, crop))
        ttensor = TT.ToTensor()(pil_crop)
        theirs = {"decode JPEG": lambda: Image.open(io.BytesIO(payload)).convert("RGB"),
                  "RandomResizedCrop": lambda: TT.RandomResizedCrop(crop)(pil),
                  "flip": lambda: TT.RandomHorizontalFlip(p=1)(pil),
                  "ToTensor": lambda: TT.ToTensor()(pil_crop),
                  "Normalize": lambda: TT.Normalize(MEAN, STD)(ttensor)}
    except ImportError:
        pass
    return [(name, ms(fn), ms(theirs[name]) if name in theirs else float("nan")) for name, fn in ours.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--size", type=int, default=256, help="side of the generated JPEGs")
    parser.add_argument("--crop", type=int, default=224, help="RandomResizedCrop's output side")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs per pipeline (after one warm-up)")
    parser.add_argument("--stage-repeats", type=int, default=200)
    parser.add_argument("--no-torch", action="store_true", help="measure hybrid's pipelines only")
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args()

    import hybrid
    hybrid.random.seed(0)
    with tempfile.TemporaryDirectory(prefix="bench-images-") as tmp:
        root = Path(tmp)
        rec = make_images(root, args.images, args.size)
        loaders = make_loaders(root, rec, args.crop, args.batch, args.workers, not args.no_torch)
        rates: dict[str, list[float]] = {name: [] for name in loaders}
        for name, loader in loaders.items():
            epoch_rate(loader)  # warm-up: workers start, files enter the page cache
        for _ in range(args.epochs):
            for name, loader in loaders.items():
                rates[name].append(epoch_rate(loader))
        for loader in loaders.values():
            if hasattr(loader, "close"):
                loader.close()
        stages = stage_times(next((root / "images" / "class_0").iterdir()), args.crop, args.stage_repeats,
                             not args.no_torch)

    lines = [f"JPEG pipeline: {args.images} images {args.size}x{args.size}, RandomResizedCrop({args.crop}), flip, "
             f"ToTensor, Normalize; batch {args.batch}; {args.workers} workers; median of {args.epochs} epochs "
             f"after a warm-up",
             f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
             "",
             f"{'pipeline':<18}{'images/s':>10}{'min':>10}{'max':>10}"]
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, values in rates.items():
        lines.append(f"{name:<18}{medians[name]:>10.1f}{min(values):>10.1f}{max(values):>10.1f}")
    lines.append("")
    if "torchvision" in medians:
        lines.append(f"hybrid folder / torchvision: {medians['hybrid folder'] / medians['torchvision']:.2f}x "
                     f"(target >= 1.0x)")
        lines.append(f"hybrid threads / torchvision: {medians['hybrid threads'] / medians['torchvision']:.2f}x")
        lines.append(f"hybrid transport / torch transport: "
                     f"{medians['hybrid transport'] / medians['torch transport']:.2f}x")
    lines.append(f"hybrid .rec / hybrid folder: {medians['hybrid .rec'] / medians['hybrid folder']:.2f}x "
                 f"(target >= 1.0x)")
    lines += ["", "one image, main process (ms):", f"{'stage':<20}{'hybrid':>10}{'torchvision':>13}"]
    lines += [f"{name:<20}{ours:>10.3f}{theirs:>13.3f}" for name, ours, theirs in stages]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
