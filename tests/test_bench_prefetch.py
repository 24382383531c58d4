"""Smoke run of benchmarks/bench_prefetch.py: every variant is timed and the table is complete."""
import os
import re
import subprocess
import sys


def test_prefetch_bench_times_each_loader_with_and_without_prefetch(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_file = tmp_path / "prefetch.txt"
    out = subprocess.run([sys.executable, "benchmarks/bench_prefetch.py", "--rounds", "1", "--batches", "4",
                          "--prep-ms", "4", "--out", str(out_file)], cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = re.findall(r"^(main thread|2 workers) +(no|yes) +([\d.]+) +([\d.]+) +([\d.]+) +(-?[\d.]+)%$",
                      out.stdout, re.M)
    assert {(r[0], r[1]) for r in rows} == {("main thread", "no"), ("main thread", "yes"), ("2 workers", "no"),
                                            ("2 workers", "yes")}, out.stdout
    for _, _, pipeline, step, loop, wait in rows:
        pipeline, step, loop, wait = map(float, (pipeline, step, loop, wait))
        assert pipeline > 0 and step > 0 and loop > 0
        assert abs(wait - 100 * (loop - max(pipeline, step)) / loop) < 1.0  # the printed share follows its formula
    assert out_file.read_text() == out.stdout
    assert len(re.findall(r"the loop with prefetch takes [\d.]+x the time of the loop without", out.stdout)) == 2
