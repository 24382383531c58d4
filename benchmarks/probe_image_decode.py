"""Decoding cost of ImageFolderDataset's samples against torchvision's loader, per JPEG, in this process.

    python3 benchmarks/probe_image_decode.py [--images 256] [--size 256] [--repeats 15] [--out FILE]
        [--without-torchvision]

Data: ``--images`` generated ``--size`` x ``--size`` RGB JPEGs (quality 90, smooth colour fields plus noise)
in 4 class folders. Timed, one pass over all images per sample, variants interleaved, medians:

- ``hybrid ImageFolderDataset[i]``: the uint8 ``(H, W, 3)`` array a sample holds (``decode_file``);
- ``torchvision ImageFolder[i]``: torchvision's default loader (a decoded RGB Pillow image);
- ``torchvision + np.asarray``: the same, turned into the array the transforms would need;
- ``Pillow open + load``: the decode alone, the floor of the three.

Printed: microseconds per image and each variant's ratio to torchvision's loader.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import interleaved_medians  # noqa: E402


def make_images(root: Path, count: int, size: int) -> None:
    from PIL import Image
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    for i in range(count):
        phase, freq = rng.random(3) * 6.28, 1 + rng.random(3) * 4
        img = np.stack([127 + 100 * np.sin(freq[c] * (xx + yy * (c + 1)) * 3.14 + phase[c]) for c in range(3)], -1)
        img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
        folder = root / f"class_{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(folder / f"{i:05d}.jpg", quality=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--without-torchvision", action="store_true", help="hybrid and Pillow only")
    args = parser.parse_args()

    from PIL import Image

    from hybrid.data.vision import ImageFolderDataset
    with tempfile.TemporaryDirectory(prefix="probe-decode-") as tmp:
        root = Path(tmp)
        make_images(root, args.images, args.size)
        ours = ImageFolderDataset(root)
        paths = [p for p, _ in ours.items]
        fns = {"hybrid ImageFolderDataset[i]": lambda: [ours[i] for i in range(len(ours))]}
        try:
            if args.without_torchvision:
                raise ImportError
            from torchvision.datasets import ImageFolder
            theirs = ImageFolder(str(root))
            fns["torchvision ImageFolder[i]"] = lambda: [theirs[i] for i in range(len(theirs))]
            fns["torchvision + np.asarray"] = lambda: [np.asarray(theirs[i][0]) for i in range(len(theirs))]
        except ImportError:
            pass

        def load_only():
            for p in paths:
                with Image.open(p) as im:
                    im.load()
        fns["Pillow open + load"] = load_only
        medians = interleaved_medians(fns, repeats=args.repeats, warmup=1)
    base = medians.get("torchvision ImageFolder[i]")
    lines = [f"JPEG decoding: {args.images} images {args.size}x{args.size} q90, one pass per sample, "
             f"median of {args.repeats} interleaved samples",
             f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
             f"Pillow {Image.__version__}", "",
             f"{'variant':32s} {'us/image':>9s} {'vs torchvision':>15s}"]
    for name, seconds in medians.items():
        ratio = f"{seconds / base:.2f}x time" if base else "-"
        lines.append(f"{name:32s} {seconds / args.images * 1e6:9.0f} {ratio:>15s}")
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")


if __name__ == "__main__":
    main()
