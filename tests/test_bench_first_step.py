"""bench_first_step.py in small: its steps train, its script timing finds the first loss line, and its report
computes the ratios it prints."""
import sys
import textwrap

import pytest

from benchmarks import bench_first_step as bench


def _figures(first, steady):
    return {"first": first, "steady": steady}


def test_the_jit_and_hybrid_steps_run_and_are_timed():
    jit = bench.child_jit(steps=2)
    inline = bench.child_hybrid(steps=2, inline=True)
    for figures in (jit, inline):
        assert set(figures) == {"first", "steady"}
        assert 0 < figures["steady"] and figures["steady"] < figures["first"], figures


def test_script_timing_finds_the_first_loss_line(tmp_path):
    script = tmp_path / "chapter.py"
    script.write_text(textwrap.dedent("""
        import time
        print("loading", flush=True)
        time.sleep(0.3)
        print("epoch 1, loss 0.5", flush=True)
        time.sleep(0.6)
        print("done")
    """))
    timing = bench._time_script([sys.executable, str(script)], tmp_path / "home")
    assert 0.3 <= timing["first_loss"] < timing["total"] - 0.5
    assert timing["last"] == "done"


def test_report_prints_the_ratios_against_their_targets():
    lenet = {"jit": _figures(2.0, 0.020), "once": _figures(2.5, 0.025), "inline": _figures(2.6, 0.030),
             "warm": _figures(0.5, 0.025), "nocache": _figures(2.4, 0.025)}
    rows = {"lenet": {"cold": {"first_loss": 4.0, "total": 10.0}, "warm": {"first_loss": 2.0, "total": 8.0},
                      "mxnet": {"first_loss": 1.0, "total": 5.0}}}
    text = bench.report(lenet, rows, None)
    assert "(c) steady / (b) steady = 1.20x (<= 1.2x)" in text
    assert "(b) first / (a) first   = 1.25x (<= 1.5x)" in text
    assert "(d) first / (b) first   = 0.20x (<= 0.35x)" in text
    assert "(e) first / (b) first   = 0.96x" in text
    lenet_row = next(line for line in text.splitlines() if line.startswith("lenet"))
    assert lenet_row.split()[-1] == "1.60x" and "2.00/  8.00" in lenet_row


@pytest.mark.parametrize("name", sorted(bench.CHAPTERS))
def test_every_chapter_has_its_script_and_mxnet_peer(name):
    assert (bench.ROOT / "examples" / "d2l" / f"{name}.py").exists()
    assert (bench.ROOT / "benchmarks" / "d2l_mxnet" / f"{name}.py").exists()
