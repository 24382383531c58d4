"""``gluon.contrib.data`` against MXNet 1.9.1: ``IntervalSampler``'s orders and the WikiText datasets read
from the small text files in ``fixtures/mxnet_init/wikitext`` (the batches, vocabulary and counts MXNet
gave for them are in ``fixtures/mxnet_init/results.*``), and ``mx.contrib.text``'s ``Vocabulary``.
"""
import collections
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hybrid.mxnet as mx
from helpers import fixture_module

cases = fixture_module("mxnet_init")
compare_with_mxnet = fixture_module("mxnet_init", "compare").compare_with_mxnet
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("case", ["interval_sampler", "wikitext"])
def test_case_gives_mxnets_results(case):
    compare_with_mxnet(case, cases.CASES[case](mx))


def test_interval_sampler_is_hybrids_and_counts_what_it_yields():
    sampler = mx.gluon.contrib.data.IntervalSampler(13, 3, rollover=False)
    assert len(sampler) == len(list(sampler)) == 5                  # MXNet's len says 13
    with pytest.raises(ValueError, match="must not exceed length"):
        mx.gluon.contrib.data.IntervalSampler(3, 4)


def test_wikitext_samples_are_int32_handles_and_batch_in_a_dataloader():
    train = mx.gluon.contrib.data.text.WikiText2(root=cases.TEXT_ROOT, seq_len=5)
    data, label = train[0]
    assert isinstance(data, mx.nd.NDArray) and data.dtype == np.int32 and data.shape == (5,)
    np.testing.assert_array_equal(data.asnumpy()[1:], label.asnumpy()[:-1])
    loader = mx.gluon.data.DataLoader(train, batch_size=4, last_batch="discard")
    batches = [d.asnumpy() for d, _ in loader]
    assert len(batches) == 3 and batches[0].shape == (4, 5)
    np.testing.assert_array_equal(np.concatenate(batches), np.stack([train[i][0].asnumpy() for i in range(12)]))


def test_a_missing_file_names_the_file_and_the_folder(tmp_path):
    shutil.copy(os.path.join(cases.TEXT_ROOT, "wiki.train.tokens"), tmp_path)
    text = mx.gluon.contrib.data.text
    assert len(text.WikiText103(root=str(tmp_path), seq_len=5)) == 13
    with pytest.raises(FileNotFoundError, match=r"wiki\.valid\.tokens not found in .*%s.*does not download.*"
                       r"wikitext-2-v1\.zip" % tmp_path.name):
        text.WikiText2(root=str(tmp_path), segment="validation")
    with pytest.raises(ValueError, match="segment"):
        text.WikiText2(root=str(tmp_path), segment="valid")


def test_the_default_root_is_under_mxnet_home(tmp_path, monkeypatch):
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=os.path.join("datasets", "wikitext-103")):
        mx.gluon.contrib.data.text.WikiText103(segment="test")


def test_vocabulary_orders_by_frequency_then_string():
    Vocabulary = mx.contrib.text.vocab.Vocabulary
    counter = collections.Counter({"b": 2, "a": 2, "c": 3, "d": 1, "<unk>": 9, "x": 1})
    vocab = Vocabulary(counter, most_freq_count=3, reserved_tokens=["<pad>"])
    assert vocab.idx_to_token == ["<unk>", "<pad>", "c", "a", "b"]
    assert vocab.to_indices(["a", "zzz"]) == [3, 0] and vocab.to_indices("c") == 2
    assert vocab.to_tokens([4, 1]) == ["b", "<pad>"] and len(vocab) == 5
    assert Vocabulary(counter, min_freq=2).idx_to_token == ["<unk>", "c", "a", "b"]
    with pytest.raises(ValueError, match="invalid"):
        vocab.to_tokens(5)
    with pytest.raises(ValueError, match="unknown token"):
        Vocabulary(reserved_tokens=["<unk>"])
    counts = mx.contrib.text.utils.count_tokens_from_str(" Life is\tgreat \n life is good . \n", to_lower=True)
    assert counts == collections.Counter({"life": 2, "is": 1, "is\tgreat": 1, "good": 1, ".": 1})


def test_module_paths_resolve_under_the_mxnet_alias():
    script = textwrap.dedent(f"""
        import hybrid.mxnet
        hybrid.mxnet.install()
        from mxnet.gluon.contrib.data import IntervalSampler
        from mxnet.gluon.contrib.data.text import WikiText2
        from mxnet.contrib.text.vocab import Vocabulary
        import mxnet as mx
        assert IntervalSampler is mx.gluon.contrib.data.IntervalSampler
        ds = WikiText2(root={cases.TEXT_ROOT!r}, seq_len=5)
        assert isinstance(ds.vocabulary, Vocabulary) and len(ds) == 13
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
