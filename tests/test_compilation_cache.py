"""The persistent compilation cache: where it lives, how it is moved or turned off, and that it stays
correct across processes, jaxlib versions, backends and damaged files."""
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import compilation_cache as cc

ROOT = Path(__file__).resolve().parents[1]

# A small training step through hybrid; prints the loss, the cache setting and the number of programs
# loaded from the cache. HYBRID_TEST_PATCH pretends another jaxlib or another backend version.
WORKER = textwrap.dedent("""
    import json, os, sys, warnings
    patch = os.environ.get("HYBRID_TEST_PATCH")
    if patch == "jaxlib":
        import jax._src.cache_key as ck
        ck.jaxlib_version_str = ck.jaxlib_version_str + "+other"
    elif patch == "platform":
        import jax._src.cache_key as ck
        original = ck._hash_platform
        def other_platform(hash_obj, backend):
            original(hash_obj, backend)
            ck._hash_string(hash_obj, "another platform version")
        ck._hash_platform = other_platform
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        import numpy as np
        import hybrid
        from hybrid import autograd, loss, nn
        hybrid.random.seed(0)
        net = nn.Sequential()
        net.add(nn.Dense(16, activation="relu"), nn.Dense(3))
        net.initialize()
        trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        x = np.linspace(-1, 1, 40, dtype=np.float32).reshape(8, 5)
        y = np.arange(8, dtype=np.float32) % 3
        for _ in range(2):
            with autograd.record():
                l = loss.SoftmaxCrossEntropyLoss()(net(x), y)
            l.backward()
            trainer.step(8)
        value = float(l.mean())
    setting = hybrid.get_compilation_cache()
    print(json.dumps({"loss": value, "path": setting.path, "source": setting.source, "hits": setting.hits,
                      "cache_warnings": [str(w.message) for w in caught
                                         if "compilation cache" in str(w.message)]}))
""")


def _start(cache_dir, patch=None, **env):
    environ = dict(os.environ, PYTHONPATH=str(ROOT), HYBRID_COMPILATION_CACHE=str(cache_dir), **env)
    environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    if patch:
        environ["HYBRID_TEST_PATCH"] = patch
    return subprocess.Popen([sys.executable, "-c", WORKER], env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _entries(cache_dir):
    return sorted(p.name for p in Path(cache_dir).glob("*-cache"))


@pytest.fixture
def restore_setting():
    """Put the process's cache setting back after a test that changes it."""
    saved = (jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache,
             jax.config.jax_compilation_cache_max_size, dict(cc._state))
    yield
    path, enabled, size, state = saved
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_enable_compilation_cache", enabled)
    jax.config.update("jax_compilation_cache_max_size", size)
    cc._state.update(state)
    from jax.experimental.compilation_cache import compilation_cache
    compilation_cache.reset_cache()


def test_default_directory_is_the_users_cache_directory(monkeypatch, tmp_path):
    if sys.platform in ("win32", "darwin"):
        pytest.skip("XDG_CACHE_HOME applies to Linux and other POSIX systems")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cc.default_cache_dir() == str(tmp_path / "xdg" / "hybrid" / "xla")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cc.default_cache_dir() == str(tmp_path / "home" / ".cache" / "hybrid" / "xla")


@pytest.mark.parametrize("value", ["0", "off", "OFF", "false", "no"])
def test_environment_variable_turns_the_cache_off(monkeypatch, restore_setting, value):
    monkeypatch.setenv(cc.ENV_VAR, value)
    jax.config.update("jax_compilation_cache_dir", None)
    cc._from_environment()
    setting = hybrid.get_compilation_cache()
    assert (setting.path, setting.source) == (None, "environment")
    assert jax.config.jax_compilation_cache_dir is None and not jax.config.jax_enable_compilation_cache


def test_environment_variable_moves_the_cache(monkeypatch, restore_setting, tmp_path):
    monkeypatch.setenv(cc.ENV_VAR, str(tmp_path / "moved"))
    jax.config.update("jax_compilation_cache_dir", None)
    cc._from_environment()
    setting = hybrid.get_compilation_cache()
    assert setting == cc.CompilationCacheSetting(str(tmp_path / "moved"), cc.DEFAULT_MAX_SIZE, "environment",
                                                 setting.hits)
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "moved")
    assert (tmp_path / "moved").is_dir()


def test_a_cache_configured_in_jax_is_left_alone(monkeypatch, restore_setting, tmp_path):
    monkeypatch.setenv(cc.ENV_VAR, str(tmp_path / "ours"))
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "theirs"))
    jax.config.update("jax_compilation_cache_max_size", 12345)
    cc._from_environment()
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "theirs")
    assert jax.config.jax_compilation_cache_max_size == 12345
    setting = hybrid.get_compilation_cache()
    assert (setting.path, setting.max_size, setting.source) == (str(tmp_path / "theirs"), 12345, "jax")
    assert not (tmp_path / "ours").exists()


def test_set_compilation_cache_writes_there_and_none_turns_it_off(restore_setting, tmp_path):
    setting = hybrid.set_compilation_cache(tmp_path / "api", max_size=10 * 2**20)
    assert (setting.path, setting.max_size, setting.source) == (str(tmp_path / "api"), 10 * 2**20, "api")
    assert jax.config.jax_compilation_cache_max_size == 10 * 2**20
    np.testing.assert_allclose(jax.jit(lambda a: a * 3.25 - 0.125)(jnp.arange(7.0)), np.arange(7.0) * 3.25 - 0.125)
    assert _entries(tmp_path / "api"), "a compiled program was not saved in the new directory"
    assert hybrid.set_compilation_cache(None).path is None
    assert not jax.config.jax_enable_compilation_cache


def test_set_compilation_cache_rejects_bad_arguments(restore_setting, tmp_path):
    with pytest.raises(TypeError, match="set_compilation_cache: path must be a directory"):
        hybrid.set_compilation_cache(3)
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="max_size must be a positive number of bytes"):
            hybrid.set_compilation_cache(tmp_path, max_size=bad)


def test_an_unwritable_directory_warns_and_turns_the_cache_off(restore_setting, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="compilation cache directory .*a-file.* cannot be written"):
        setting = hybrid.set_compilation_cache(blocker / "xla")
    assert setting.path is None
    np.testing.assert_allclose(jax.jit(lambda a: a + 41.5)(jnp.ones(2)), [42.5, 42.5])


def test_first_use_is_logged_once_at_info(restore_setting, tmp_path, caplog):
    hybrid.set_compilation_cache(tmp_path / "logged")
    with caplog.at_level("INFO", logger="hybrid"):
        jax.jit(lambda a: a * 1.75)(jnp.ones(3)).block_until_ready()
        jax.jit(lambda a: a * 2.75)(jnp.ones(3)).block_until_ready()
    lines = [r.getMessage() for r in caplog.records if "compilation cache:" in r.getMessage()]
    assert len(lines) == 1 and str(tmp_path / "logged") in lines[0] and "at most 1 GiB" in lines[0]


def test_processes_share_the_cache_safely(tmp_path):
    """Two processes compiling the same programs at once both succeed; a third loads them; another
    jaxlib or backend version loads nothing; damaged entries warn and are compiled again."""
    cache = tmp_path / "shared"
    first = [_finish(p) for p in [_start(cache), _start(cache)]]
    assert first[0]["loss"] == first[1]["loss"] and first[0]["path"] == str(cache)
    saved = _entries(cache)
    assert saved, "the first processes saved nothing"

    warm = _finish(_start(cache))
    assert warm["hits"] >= 1 and warm["loss"] == first[0]["loss"] and warm["cache_warnings"] == []

    others = [_finish(p) for p in [_start(cache, patch="jaxlib"), _start(cache, patch="platform")]]
    for other in others:
        assert other["hits"] == 0 and other["loss"] == first[0]["loss"]
    assert len(_entries(cache)) >= 3 * len(saved), "another version should have written its own entries"

    for index, path in enumerate(sorted(cache.glob("*-cache"))):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if index % 2 else bytes(b ^ 0x5A for b in data))
    damaged = _finish(_start(cache))
    assert damaged["hits"] == 0 and damaged["loss"] == first[0]["loss"]
    assert damaged["cache_warnings"], "a damaged entry should be reported"


def test_without_filelock_the_directory_is_trimmed_to_its_cap_oldest_first(restore_setting, tmp_path, monkeypatch):
    monkeypatch.setattr(cc, "_filelock_available", lambda: False)
    for age, name in enumerate(["newest", "middle", "oldest"]):
        path = tmp_path / name
        path.write_bytes(b"x" * 1000)
        os.utime(path, (1_000_000 - age * 1000, 1_000_000 - age * 1000))
    setting = cc.set_compilation_cache(tmp_path, max_size=2500)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["middle", "newest"]
    assert setting.max_size is None  # JAX itself keeps no cap without filelock
