"""Files that are not what they claim are refused quickly and by name (issue 13's file cases)."""
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hybrid import nn
from hybrid.serialization import FormatError


@pytest.fixture
def net():
    layer = nn.Dense(3, in_units=4)
    layer.initialize()
    return layer


@pytest.fixture
def alarm():
    """Fail instead of hanging: a read that blocks is interrupted after 20 s."""
    def on_alarm(signum, frame):
        raise TimeoutError("the read blocked")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_parameter_file_linked_to_dev_zero_is_refused(net, tmp_path, alarm):
    link = tmp_path / "net.params"
    os.symlink("/dev/zero", link)
    with pytest.raises(FormatError, match="not a regular file") as info:
        net.load_parameters(str(link))
    assert str(link) in str(info.value)


def test_parameter_file_that_is_a_fifo_is_refused_without_blocking(net, tmp_path, alarm):
    fifo = tmp_path / "net.params"
    os.mkfifo(fifo)
    with pytest.raises(FormatError, match="not a regular file"):
        net.load_parameters(str(fifo))


def test_parameter_file_that_is_a_directory_is_refused(net, tmp_path):
    (tmp_path / "net.params").mkdir()
    with pytest.raises(FormatError, match="not a regular file"):
        net.load_parameters(str(tmp_path / "net.params"))


def test_a_write_past_the_file_size_limit_names_the_file_and_keeps_the_old_one(tmp_path):
    """A full disk (here the file-size limit, errno 27) names the file and leaves the previous file."""
    path = tmp_path / "net.params"
    path.write_bytes(b"previous")
    script = textwrap.dedent(f"""
        import resource, signal, sys
        from hybrid import nn
        net = nn.Dense(256, in_units=256)
        net.initialize()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        try:
            net.save_parameters({str(path)!r})
        except OSError as exc:
            print(type(exc).__name__, exc.errno, exc)
            sys.exit(0)
        sys.exit("no error")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-2000:]
    assert str(path) in out.stdout and " 27 " in out.stdout, out.stdout
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["net.params"]  # no temporary file left behind


def test_a_zip_bomb_is_refused_from_its_headers_before_anything_large_is_allocated(net, tmp_path):
    """A compressed member declaring 64 MB (of zeros, a 64 KB deflate stream) with a shape the block does not
    have is refused before its data is decompressed."""
    import tracemalloc
    from hybrid.errors import ShapeError
    path = tmp_path / "bomb.params"
    with open(path, "wb") as handle:
        np.savez_compressed(handle, weight=np.zeros((4000, 4000), np.float32), bias=np.zeros(3, np.float32))
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ShapeError, match=r"'weight' has shape \(4000, 4000\) in the file.*expects \(3, 4\)"):
            net.load_parameters(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes allocated while refusing the file"


def test_saving_a_deferred_net_names_the_parameter_structurally_and_writes_nothing(tmp_path):
    from hybrid.errors import DeferredInitializationError, UninitializedParameterError
    net = nn.HybridSequential()
    net.add(nn.Dense(3), nn.Dense(2))
    net.initialize()
    path = tmp_path / "net.params"
    with pytest.raises(DeferredInitializationError, match=r"parameter '0\.weight' has unknown shape"):
        net.save_parameters(str(path))
    assert not path.exists()
    fresh = nn.Dense(2, in_units=3)
    with pytest.raises(UninitializedParameterError, match=r"parameter 'weight' is not initialized"):
        fresh.save_parameters(str(path))
    assert not path.exists()
