"""``mx.profiler`` over JAX's profiler: a run writes JAX trace sessions (xplane + Perfetto/Chrome trace) under
``<filename>_trace/``, ``dump()`` writes the Chrome-trace JSON at ``filename``, ``dumps()`` aggregates."""
import gzip
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid.mxnet as mx
from hybrid.mxnet import nd, profiler
from hybrid.mxnet.base import MXNetError


@pytest.fixture
def fresh_profiler():
    """The profiler stopped, with MXNet's default configuration, before and after the test."""
    profiler.set_state("stop")
    profiler._profiler.config = dict(profiler._DEFAULTS)
    profiler._profiler.stats, profiler._profiler.undumped = {}, []
    yield profiler
    profiler.set_state("stop")
    profiler._profiler.config = dict(profiler._DEFAULTS)
    profiler._profiler.stats, profiler._profiler.undumped = {}, []


def _sessions(folder):
    root = os.path.join(folder, "plugins", "profile")
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def _events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


def _names(events):
    """The events' full names: a range named ``domain:name`` shows as ``name`` with ``long_name`` the full one."""
    return {(e.get("args") or {}).get("long_name", e.get("name")) for e in events}


def test_a_run_writes_trace_files_and_the_chrome_trace(fresh_profiler, tmp_path):
    filename = str(tmp_path / "out" / "profile.json")
    profiler.set_config(profile_all=True, aggregate_stats=True, filename=filename)
    assert profiler.trace_directory() == str(tmp_path / "out" / "profile_trace")
    profiler.set_state("run")
    assert profiler.get_state() == "run"
    domain = profiler.Domain("train")
    task = domain.new_task("forward")
    task.start()
    x = nd.ones((64, 64))
    nd.dot(x, x).wait_to_read()
    task.stop()
    counter = domain.new_counter("batches", 3)
    counter += 2
    counter.decrement()
    with domain.new_frame("step"):
        (x + 1).wait_to_read()
    domain.new_marker("epoch_end").mark("global")
    with profiler.Event("load"):
        pass
    with profiler.scope("loss:"):
        (x * 3).wait_to_read()
    profiler.set_state("stop")
    assert profiler.get_state() == "stop"

    sessions = _sessions(profiler.trace_directory())
    assert len(sessions) == 1
    folder = os.path.join(profiler.trace_directory(), "plugins", "profile", sessions[0])
    files = os.listdir(folder)
    assert any(f.endswith(".xplane.pb") for f in files) and "perfetto_trace.json.gz" in files
    assert "memory.prof" in files                        # profile_memory (on by default)
    names = _names(_events(os.path.join(folder, "perfetto_trace.json.gz")))
    assert {"train:forward", "train:batches", "train:step", "train:epoch_end", "load", "loss:"} <= names

    assert not os.path.exists(filename)                  # written by dump(), as MXNet's profile.json
    profiler.dump()
    events = _events(filename)
    assert any(_names([e]) == {"train:forward"} and e.get("dur", 0) > 0 for e in events)
    counts = [e["args"].get("value") for e in events if _names([e]) == {"train:batches"}]
    assert [str(v) for v in counts] == ["3", "5", "4"]

    table = profiler.dumps()
    assert "Profile Statistics:" in table and "train\n" in table and "trace /host:CPU" in table
    forward = next(line for line in table.splitlines() if line.startswith("forward "))
    assert forward.split()[1] == "1" and float(forward.split()[2]) > 0
    as_json = json.loads(profiler.dumps(format="json", sort_by="count", ascending=True))
    assert as_json["train"]["batches"]["count"] == 3 and as_json["scope"]["loss:"]["count"] == 1
    profiler.dumps(reset=True)
    assert "forward" not in profiler.dumps()


def test_pause_resume_and_dump_while_running(fresh_profiler, tmp_path):
    filename = str(tmp_path / "p.json")
    profiler.set_config(filename=filename, profile_memory=False)
    profiler.start()
    with profiler.Event("first"):
        jnp.ones(3).block_until_ready()
    profiler.pause()
    with profiler.Event("while_paused"):
        pass
    profiler.resume()
    with profiler.Event("second"):
        pass
    profiler.dump(finished=False)                        # writes both sessions and keeps running
    assert profiler.get_state() == "run"
    names = _names(_events(filename))
    assert {"first", "second"} <= names and "while_paused" not in names
    with profiler.Event("third"):
        pass
    profiler.stop()
    assert len(_sessions(profiler.trace_directory())) == 3
    profiler.dump()
    names = _names(_events(filename))
    assert "third" in names and "first" not in names     # each dump holds the sessions since the last one
    assert "(no statistics: profiler.set_config(aggregate_stats=True)" in profiler.dumps()


def test_scope_names_ops_traced_inside_it():
    def f(a):
        with profiler.scope("attention"):
            return jnp.tanh(a) * 2

    assert "attention" in jax.jit(f).lower(jnp.ones(2)).as_text(debug_info=True)
    np.testing.assert_allclose(jax.jit(f)(jnp.ones(2)), np.tanh(np.ones(2)) * 2, rtol=1e-6)


def test_bad_input_is_refused_with_the_argument_named(fresh_profiler):
    with pytest.raises(ValueError, match=r"unknown argument\(s\) \['profile_everything'\].*profile_all"):
        profiler.set_config(profile_everything=True)
    with pytest.raises(TypeError, match="aggregate_stats must be a boolean"):
        profiler.set_config(aggregate_stats="often")
    with pytest.raises(ValueError, match="state must be 'run' or 'stop', got 'go'"):
        profiler.set_state("go")
    with pytest.raises(MXNetError, match="profile_process='server'.*use 'worker'"):
        profiler.set_state("run", profile_process="server")
    with pytest.raises(ValueError, match="format must be 'table' or 'json'"):
        profiler.dumps(format="xml")
    with pytest.raises(ValueError, match="sort_by must be one of total, avg"):
        profiler.dumps(sort_by="median")
    task = profiler.Domain("d").new_task("t")
    with pytest.raises(MXNetError, match="'d:t': stop\\(\\) without start\\(\\)"):
        task.stop()
    task.start()
    with pytest.raises(MXNetError, match="start\\(\\) again before stop\\(\\)"):
        task.start()
    task.stop()
    with pytest.raises(TypeError, match="domain must be a profiler.Domain"):
        profiler.Task("d", "t")
    with pytest.raises(ValueError, match="scope must be one of global"):
        profiler.Domain("d").new_marker("m").mark("galaxy")
    with pytest.raises(TypeError, match="value must be a number"):
        profiler.Domain("d").new_counter("c").set_value("many")
    profiler.set_config(profile_all="True")                 # MXNet's strings of booleans are accepted
    assert profiler._profiler.config["profile_all"] is True
