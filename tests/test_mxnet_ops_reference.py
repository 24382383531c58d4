"""The MXNet operator table ``F`` against values computed by MXNet 1.9.1.

Cases and arrays come from ``tests/fixtures/mxnet_ops`` (see ``make_fixtures.py``
there for the format). Each case calls ``F.<op>(*inputs, **kwargs)`` on JAX
arrays (eagerly, as MXNet's ``nd`` face is used) and compares every output;
for cases with recorded gradients it compares the vector-Jacobian product,
compiled with ``jax.jit``, with MXNet's gradients. A few cases also run their
forward under ``jax.jit``, as hybridized blocks call ``F`` while tracing.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'mxnet_ops')

with open(os.path.join(FIXTURES, 'cases.json')) as _fh:
    CASES: list[dict[str, Any]] = json.load(_fh)
CASES_BY_ID = {c['id']: c for c in CASES}

# Cases rerun under jax.jit: hybridized blocks call the same F while tracing.
JIT_CASES = ['reshape_minus4', 'split_squeeze', 'Convolution_stride_pad', 'Pooling_avg_exclude_pad',
             'topk_both', 'softmax_length', 'box_nms_id_index', 'BatchNorm_global_stats', 'ROIAlign_basic',
             'take_wrap', 'slice_neg_step', 'Pad_constant', 'SequenceMask_length', 'arange_like_axis']


@functools.lru_cache(maxsize=1)
def _arrays() -> dict[str, np.ndarray]:
    with np.load(os.path.join(FIXTURES, 'arrays.npz')) as npz:
        return {k: npz[k] for k in npz.files}


def _to_tuples(value: Any) -> Any:
    """JSON lists back to the tuples MXNet attributes are written with."""
    if isinstance(value, list):
        return tuple(_to_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_tuples(v) for k, v in value.items()}
    return value


def _resolve(path: str) -> Callable:
    from hybrid.mxnet.ops import F
    obj: Any = F
    for part in path.split('.'):
        obj = getattr(obj, part)
    return obj


def _as_list(out: Any) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _check_outputs(case: dict[str, Any], got: list, what: str = 'output') -> None:
    arrays = _arrays()
    expected = [arrays[name] for name in case['outputs']]
    assert len(got) == len(expected), (
        f"{case['op']}: {len(got)} {what}s, MXNet gives {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g)
        assert g.shape == e.shape, f"{case['op']} {what} {i}: shape {g.shape}, MXNet gives {e.shape}"
        want = jax.dtypes.canonicalize_dtype(e.dtype)  # MXNet's int64 is int32 while jax_enable_x64 is off
        assert g.dtype == want, f"{case['op']} {what} {i}: dtype {g.dtype}, MXNet gives {e.dtype}"
        if e.dtype.kind in 'iub':
            np.testing.assert_array_equal(g, e, err_msg=f"{case['op']} {what} {i}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=case['rtol'],
                                       atol=case['atol'], err_msg=f"{case['op']} {what} {i}")


def _inputs(case: dict[str, Any]) -> list[jax.Array]:
    arrays = _arrays()
    return [jnp.asarray(arrays[name]) for name in case['args']]


@pytest.mark.parametrize('cid', [c['id'] for c in CASES])
def test_forward(cid: str) -> None:
    case = CASES_BY_ID[cid]
    op = _resolve(case['op'])
    out = op(*_inputs(case), **_to_tuples(case['kwargs']))
    _check_outputs(case, _as_list(out))


GRAD_CASES = [c['id'] for c in CASES if c.get('grads')]


@pytest.mark.parametrize('cid', GRAD_CASES)
def test_gradient(cid: str) -> None:
    case = CASES_BY_ID[cid]
    arrays = _arrays()
    op = _resolve(case['op'])
    kwargs = _to_tuples(case['kwargs'])
    inputs = _inputs(case)
    positions = case['grad_args']

    def first_output(*diff: jax.Array) -> jax.Array:
        args = list(inputs)
        for pos, value in zip(positions, diff):
            args[pos] = value
        return _as_list(op(*args, **kwargs))[0]

    head = jnp.asarray(arrays[case['head']])
    out_shape = jax.eval_shape(first_output, *[inputs[p] for p in positions]).shape
    assert out_shape == head.shape, f"{case['op']}: output shape {out_shape}, MXNet gives {head.shape}"

    # Compiled as a whole, as a hybridized training step would run it (and in a third of the eager time).
    @jax.jit
    def gradients(*diff: jax.Array) -> tuple:
        return jax.vjp(first_output, *diff)[1](head)

    grads = gradients(*[inputs[p] for p in positions])
    for k, (g, name) in enumerate(zip(grads, case['grads'])):
        e = arrays[name]
        assert g.shape == e.shape, f"{case['op']} gradient {k}: shape {g.shape}, MXNet gives {e.shape}"
        np.testing.assert_allclose(np.asarray(g, np.float64), e.astype(np.float64), rtol=case['rtol'],
                                   atol=max(case['atol'], 1e-5), err_msg=f"{case['op']} gradient {k}")


@pytest.mark.parametrize('cid', JIT_CASES)
def test_forward_under_jit(cid: str) -> None:
    case = CASES_BY_ID[cid]
    op = _resolve(case['op'])
    kwargs = _to_tuples(case['kwargs'])
    out = jax.jit(lambda *xs: op(*xs, **kwargs))(*_inputs(case))
    _check_outputs(case, _as_list(out))


def test_fixture_file_is_consistent() -> None:
    """Every name a case refers to is in arrays.npz, and ids are unique."""
    arrays = _arrays()
    assert len(CASES_BY_ID) == len(CASES)
    assert set(JIT_CASES) <= set(CASES_BY_ID)
    for case in CASES:
        names = case['args'] + case['outputs'] + case.get('grads', [])
        names += [case['head']] if 'head' in case else []
        missing = [n for n in names if n not in arrays]
        assert not missing, f"{case['id']}: {missing} not in arrays.npz"
        assert len(case.get('grads', [])) == len(case.get('grad_args', []))
