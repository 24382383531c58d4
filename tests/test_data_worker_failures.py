"""DataLoader with several worker processes: a worker that dies (killed, exits, crashes in native code)."""
import ctypes
import os
import re
import signal
import sys
import time

import numpy as np
import pytest

from hybrid import data

from helpers import processes

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads processes from /proc (Linux)")


# Module-level datasets: worker processes unpickle them by reference.

class DiesWhileFlagged(data.Dataset):
    """Sample ``bad`` ends its worker process (``how``) while the file ``flag`` exists."""

    def __init__(self, bad, flag, how):
        self.bad, self.flag, self.how = bad, flag, how

    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == self.bad and os.path.exists(self.flag):
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif self.how == "exit":
                os._exit(3)
            elif self.how == "segfault":
                ctypes.string_at(0)
            elif self.how == "sys.exit":
                sys.exit(4)
        time.sleep(0.01)
        return np.float32(i)


@pytest.fixture
def deadline():
    """Fail (instead of hanging) when a test runs longer than 60 s."""
    def expire(signum, frame):
        raise TimeoutError("worker failure test exceeded 60 s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _descendants():
    """{pid: (parent pid, state, command line)} of the processes started under this one, at any depth."""
    table = processes()
    found, frontier = {}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, state, cmdline) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = (ppid, state, cmdline)
                frontier.append(pid)
    return found


def _workers_alive(before):
    """Processes started under this test process since ``before`` that are still running: not zombies, and
    not multiprocessing's fork server or resource tracker (children of this process kept for the whole
    session; the workers are the fork server's children)."""
    me = os.getpid()
    return [pid for pid, (ppid, state, cmdline) in _descendants().items()
            if pid not in before and state != "Z"
            and not (ppid == me and ("forkserver" in cmdline or "resource_tracker" in cmdline))]


EXPECTED_FATE = {"kill": r"exit code -9: killed by SIGKILL", "exit": r"exit code 3",
                 "segfault": r"exit code -11: killed by SIGSEGV"}


@pytest.mark.parametrize("how", sorted(EXPECTED_FATE))
def test_a_dead_worker_among_several_is_reported_and_the_next_epoch_works(deadline, tmp_path, how):
    flag = tmp_path / "die"
    flag.touch()
    before = set(_descendants())
    loader = data.DataLoader(DiesWhileFlagged(5, str(flag), how), batch_size=2, num_workers=2)
    expected = [[2.0 * k, 2.0 * k + 1] for k in range(6)]
    try:
        delivered = []
        with pytest.raises(data.WorkerError) as info:
            for batch in loader:
                delivered.append(np.asarray(batch).tolist())
        message = str(info.value)
        assert "worker process (pid " in message
        assert re.search(rf"\(pid \d+, {EXPECTED_FATE[how]}\) died while making batch 2 "
                         r"\(sample indices \[4, 5\]\)", message), message
        lost = int(re.search(r"Batch (\d+) and the later batches", message).group(1))
        assert lost <= 2 and delivered == expected[:lost]  # the batches before the loss arrive, in order
        assert not isinstance(info.value.__cause__, data.WorkerError)
        end = time.monotonic() + 10
        while _workers_alive(before) and time.monotonic() < end:
            time.sleep(0.05)
        assert _workers_alive(before) == []  # the surviving worker was stopped, nothing is orphaned
        flag.unlink()
        assert [np.asarray(b).tolist() for b in loader] == expected
        assert [np.asarray(b).tolist() for b in loader] == expected
    finally:
        loader.close()


def test_submit_on_a_broken_pool_is_not_a_raw_broken_process_pool(deadline, tmp_path):
    """The worker dies at the first batch while more batches are still being submitted (prefetch 4)."""
    flag = tmp_path / "die"
    flag.touch()
    loader = data.DataLoader(DiesWhileFlagged(0, str(flag), "kill"), batch_size=1, num_workers=3, prefetch=8)
    try:
        for _ in range(3):  # every epoch fails the same way, none with BrokenProcessPool
            with pytest.raises(data.WorkerError, match=r"died while making batch 0 \(sample indices \[0\]\)"):
                list(loader)
        flag.unlink()
        assert [np.asarray(b).tolist() for b in loader] == [[float(i)] for i in range(12)]
    finally:
        loader.close()


def test_sys_exit_in_a_sample_is_a_worker_error_and_the_workers_survive(deadline, tmp_path):
    flag = tmp_path / "die"
    flag.touch()
    loader = data.DataLoader(DiesWhileFlagged(3, str(flag), "sys.exit"), batch_size=2, num_workers=2)
    try:
        with pytest.raises(data.WorkerError, match=r"sys.exit\(4\)"):
            list(loader)
        flag.unlink()
        assert [np.asarray(b).tolist() for b in loader] == [[2.0 * k, 2.0 * k + 1] for k in range(6)]
    finally:
        loader.close()


def test_a_worker_killed_between_epochs_is_replaced_with_a_warning(deadline, tmp_path):
    loader = data.DataLoader(DiesWhileFlagged(5, str(tmp_path / "never"), "kill"), batch_size=2, num_workers=2)
    expected = [[2.0 * k, 2.0 * k + 1] for k in range(6)]
    try:
        assert [np.asarray(b).tolist() for b in loader] == expected
        victim = next(pid for pid in loader._slots[0::2] if pid)
        os.kill(victim, signal.SIGKILL)
        end = time.monotonic() + 20
        while not getattr(loader._executor, "_broken", False) and time.monotonic() < end:
            time.sleep(0.02)  # the pool notices the death on its own thread
        with pytest.warns(RuntimeWarning, match=rf"worker process \(pid {victim}, exit code -9: killed by SIGKILL\) "
                                                r"died between batches while the loader was idle"):
            assert [np.asarray(b).tolist() for b in loader] == expected  # no batch was lost: nothing to raise
    finally:
        loader.close()
