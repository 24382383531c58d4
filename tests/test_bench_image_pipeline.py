"""Smoke run of benchmarks/bench_image_pipeline.py on tiny sizes: every hybrid pipeline reads every image,
the printed ratio follows from the printed rates, and the stage table is complete."""
import os
import re
import subprocess
import sys


def test_image_pipeline_bench_reads_every_image_and_reports_rates(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_file = tmp_path / "image-pipeline.txt"
    out = subprocess.run([sys.executable, "benchmarks/bench_image_pipeline.py", "--images", "16", "--size", "40",
                          "--crop", "24", "--batch", "4", "--epochs", "1", "--stage-repeats", "2", "--no-torch",
                          "--out", str(out_file)], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    rates = dict(re.findall(r"^(hybrid folder|hybrid \.rec|hybrid threads|hybrid transport) +([\d.]+) +[\d.]+ +[\d.]+$",
                            out.stdout, re.M))
    assert set(rates) == {"hybrid folder", "hybrid .rec", "hybrid threads", "hybrid transport"}, out.stdout
    assert all(float(r) > 0 for r in rates.values())
    ratio = float(re.search(r"hybrid \.rec / hybrid folder: ([\d.]+)x", out.stdout).group(1))
    assert abs(ratio - float(rates["hybrid .rec"]) / float(rates["hybrid folder"])) < 0.01
    stages = re.findall(r"^(decode JPEG|RandomResizedCrop|flip|ToTensor|Normalize) +([\d.]+) +nan$", out.stdout, re.M)
    assert [s[0] for s in stages] == ["decode JPEG", "RandomResizedCrop", "flip", "ToTensor", "Normalize"]
    assert out_file.read_text() == out.stdout.split("torchvision not measured: --no-torch\n", 1)[-1]
