"""The MXNet alias's costs, side by side in one run.

    python benchmarks/bench_mxnet_alias.py [--rounds 9] [--corpus] [--mxnet-python /work/mxnet-env/bin/python]

Printed, each a median of interleaved rounds:

1. an eager operation on ``mx.np``/``mx.nd`` handles against the same ``jax.numpy`` call on the arrays they
   hold (target: at most 1.2x);
2. a training step written from scratch on handles (attached arrays, ``record``, ``backward``, in-place SGD
   ``p[:] = p - lr * p.grad / n``) against hybrid's Gluon loop of the same MLP (hybridized net, loss block,
   ``Trainer`` SGD): compiled programs run per step, and the time ratio (target: no more programs, at
   most 1.3x);
3. with ``--corpus``: each corpus case's warm wall time (its second run in one process, the first compiles)
   under MXNet 1.9.1 and under ``hybrid.mxnet.install()``, and their ratio (targets: each at most 1.5x,
   the median at most 1.0x).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "mxnet_corpus"


def _per_call(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=3)) / number


def eager_ops(rounds: int) -> list[tuple[str, float, float]]:
    import jax
    import jax.numpy as jnp

    import hybrid.mxnet as mx
    np, nd = mx.np, mx.nd
    a, b = np.ones((64, 64)), np.full((64, 64), 2.0)
    x, y = a.value, b.value
    la = nd.ones((64, 64))
    cases = [
        ("np: a + b", lambda: a + b, lambda: x + y),
        ("np: a * 2.0", lambda: a * 2.0, lambda: x * 2.0),
        ("np.dot(a, b)", lambda: np.dot(a, b), lambda: jnp.dot(x, y)),
        ("np.exp(a)", lambda: np.exp(a), lambda: jnp.exp(x)),
        ("npx.relu(a)", lambda: mx.npx.relu(a), lambda: jax.nn.relu(x)),
        ("a.sum(axis=0)", lambda: a.sum(axis=0), lambda: x.sum(axis=0)),
        ("a[3:9]", lambda: a[3:9].value, lambda: x[3:9]),
        ("nd: a + a", lambda: la + la, lambda: x + x),
    ]
    results = []
    for name, handle_op, jax_op in cases:
        handle_op(), jax_op()
        ratios, base = [], []
        for _ in range(rounds):
            t_jax = _per_call(jax_op, 300)
            t_handle = _per_call(handle_op, 300)
            ratios.append(t_handle / t_jax)
            base.append(t_jax)
        results.append((name, statistics.median(base) * 1e6, statistics.median(ratios)))
    return results


def scratch_against_gluon(rounds: int, steps: int) -> dict:
    import numpy as onp

    import hybrid.mxnet as mx
    from hybrid import autograd as hybrid_autograd
    from hybrid.mxnet import autograd, gluon, np, npx
    from hybrid.mxnet.gluon import nn
    rs = onp.random.RandomState(0)
    X = np.array(rs.normal(size=(256, 784)).astype(onp.float32))
    y = np.array(rs.randint(0, 10, size=(256,)).astype(onp.int32))
    lr = 0.1

    params = [np.array(rs.normal(0, 0.01, size=s).astype(onp.float32)) for s in ((784, 256), (256,), (256, 10), (10,))]
    for p in params:
        p.attach_grad()
    W1, b1, W2, b2 = params

    def scratch_step():
        with autograd.record():
            h = npx.relu(np.dot(X, W1) + b1)
            logits = np.dot(h, W2) + b2
            loss = -npx.pick(npx.log_softmax(logits), y).mean()
        loss.backward()
        for p in params:
            p[:] = p - lr * p.grad

    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"), nn.Dense(10))
    net.initialize(mx.init.Normal(0.01))
    net.hybridize()
    ce = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    Xv, yv = X.value, y.value

    def gluon_step():
        with autograd.record():
            loss = ce(net(Xv), yv)
        loss.backward()
        trainer.step(256)

    def run(step, count):
        for _ in range(count):
            step()
        float(W1.value[0, 0]) if step is scratch_step else float(net[0].weight.data()[0, 0])

    def programs(step):
        run(step, 3)
        before = hybrid_autograd.stats.flushes
        run(step, steps)
        return (hybrid_autograd.stats.flushes - before) / steps

    counts = {"scratch": programs(scratch_step), "gluon": programs(gluon_step)}
    ratios = []
    for _ in range(rounds):
        t_gluon = timeit.timeit(lambda: run(gluon_step, steps), number=1) / steps
        t_scratch = timeit.timeit(lambda: run(scratch_step, steps), number=1) / steps
        ratios.append((t_scratch / t_gluon, t_gluon))
    return {"programs": counts, "ratio": statistics.median(r for r, _ in ratios),
            "gluon_ms": statistics.median(t for _, t in ratios) * 1e3}


def corpus_times(mxnet_python: str, rounds: int) -> list[tuple[str, float, float]]:
    cases = sorted(glob.glob(str(CORPUS / "d2l" / "*" / "*.py")))
    rows = []
    env = dict(os.environ, MPLBACKEND="Agg")

    def seconds(python: str, case: str, alias: bool) -> float:
        command = [python, str(CORPUS / "harness.py"), "time", case] + (["alias"] if alias else [])
        out = subprocess.run(command, capture_output=True, text=True, cwd=CORPUS, env=env, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])["seconds"]

    for case in cases:
        mx_times, hy_times = [], []
        for _ in range(rounds):
            mx_times.append(seconds(mxnet_python, case, False))
            hy_times.append(seconds(sys.executable, case, True))
        rows.append((os.path.relpath(case, CORPUS / "d2l")[:-3], statistics.median(mx_times),
                     statistics.median(hy_times)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--corpus", action="store_true", help="time the corpus under MXNet and hybrid")
    parser.add_argument("--corpus-rounds", type=int, default=1)
    parser.add_argument("--mxnet-python", default=str(ROOT.parent / "mxnet-env" / "bin" / "python"))
    args = parser.parse_args()

    print("1. eager operations on handles against jax.numpy on their arrays (target <= 1.2x)")
    for name, base_us, ratio in eager_ops(args.rounds):
        print(f"   {name:16s} jnp {base_us:7.1f} us   handle/jnp {ratio:5.2f}x")
    print("2. a scratch step on handles against the Gluon loop, MLP 784-256-10, batch 256 (targets: programs "
          "<= Gluon's, time <= 1.3x)")
    scratch = scratch_against_gluon(args.rounds, args.steps)
    print(f"   programs per step: scratch {scratch['programs']['scratch']:.2f}, gluon "
          f"{scratch['programs']['gluon']:.2f}")
    print(f"   time: gluon {scratch['gluon_ms']:.2f} ms/step, scratch/gluon {scratch['ratio']:.2f}x")
    if args.corpus:
        print("3. corpus cases, warm wall time (second run in one process), MXNet 1.9.1 against hybrid.mxnet "
              "(targets: each <= 1.5x, median <= 1.0x)")
        rows = corpus_times(args.mxnet_python, args.corpus_rounds)
        for name, t_mx, t_hy in rows:
            print(f"   {name:60s} mxnet {t_mx:6.2f} s  hybrid {t_hy:6.2f} s  {t_hy / t_mx:5.2f}x")
        ratios = [t_hy / t_mx for _, t_mx, t_hy in rows]
        print(f"   median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x over {len(rows)} cases")


if __name__ == "__main__":
    main()
