"""Run a corpus case notebook-style under MXNet 1.9.1 (``record``) or under ``hybrid.mxnet`` (``replay``).

    python harness.py record <case.py> <reference.npz>   # with MXNet's interpreter
    python harness.py replay <case.py> <reference.npz>   # with hybrid's; prints the comparison as JSON
    python harness.py time <case.py> [alias]              # the second run's seconds (alias: under hybrid)

A case is a file of cells separated by ``# %%`` lines; each cell runs in one namespace, and the value of a
cell's last expression is *observed* (as a notebook shows it). The code is run unchanged; the harness only
fixes what differs between two frameworks' random streams:

- the random draws of ``np.random.*``, ``nd.random.*`` and ``mx.random.*`` (synthetic data, weights made
  from scratch) and the initial value of every Gluon parameter are recorded under MXNet and replayed,
  in order, under hybrid (a replayed draw must have the recorded sampler and shape);
- the permutations of ``gluon.data.RandomSampler`` likewise (the data order);
- Python's and NumPy's global generators are seeded alike;
- downloads (MNIST, Fashion-MNIST) are replaced by the same small synthetic datasets.

A case under ``scripts/`` is a whole script (MXNet's ``example/gluon``), unchanged, run as one cell with
the command line ``scripts/arguments.json`` gives it (small step counts through the script's own options).

Observed are the cells' values (arrays by value, numbers exactly or to rtol) and the loss of every
``backward()`` (its mean), so the per-step losses of a training loop are compared too.
"""
import ast
import json
import os
import random
import sys
import traceback

import numpy as onp

HERE = os.path.dirname(os.path.abspath(__file__))
# The first EXACT_STEPS losses agree to rtol 1e-4; later ones to LATER_RTOL: float32 sums in another order
# (XLA's against MKL's kernels) drift apart by about 1e-4 over a hundred SGD steps.
EXACT_STEPS = 20
LATER_RTOL = 2e-3
SAMPLERS = ("normal", "uniform", "randint", "randn", "rand", "choice", "permutation", "gamma", "exponential",
            "poisson", "multinomial", "laplace", "logistic", "gumbel", "beta", "bernoulli")


def cells_of(path):
    with open(path) as f:
        text = f.read()
    return [c for c in text.split("# %%\n")[1:] if c.strip()]


def _numpy(value):
    """An observed value as something comparable: a NumPy array, a number, or a type name."""
    if hasattr(value, "asnumpy"):
        return value.asnumpy()
    if isinstance(value, onp.ndarray):
        return value
    if isinstance(value, (bool, int, float, onp.generic)):
        return onp.asarray(value)
    if isinstance(value, (list, tuple)) and value and all(hasattr(v, "asnumpy") or isinstance(v, (int, float))
                                                         for v in value):
        try:
            return onp.stack([_numpy(v) for v in value])
        except ValueError:
            return type(value).__name__
    return type(value).__name__


class Tape:
    """What one run saw and drew."""

    def __init__(self, reference=None):
        self.draws, self.inits, self.orders = [], [], []
        self.losses, self.observed, self.errors = [], [], []
        self.reference = reference
        self.cursor = {"draws": 0, "inits": 0, "orders": 0}

    def next(self, kind, where):
        i = self.cursor[kind]
        stored = self.reference[kind]
        if i >= len(stored):
            raise RuntimeError(f"harness: {where} draws more than MXNet did ({len(stored)} {kind})")
        self.cursor[kind] = i + 1
        return stored[i]


def _exec_cells(cells, namespace, tape):
    for index, cell in enumerate(cells):
        try:
            tree = ast.parse(cell)
            last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            if last is not None:
                tree.body = tree.body[:-1]
            exec(compile(tree, f"<cell {index}>", "exec"), namespace)
            value = eval(compile(ast.Expression(last.value), f"<cell {index}>", "eval"), namespace) \
                if last is not None else None
            tape.observed.append("-" if last is None else "timing" if _reads_a_timer(last.value, namespace)
                                 else _numpy(value))
        except Exception:  # noqa: BLE001  the error is what the comparison reports
            tape.observed.append("error")
            tape.errors.append((index, traceback.format_exc(limit=6)))


def _prepare_paths():
    sys.path.insert(0, os.path.join(HERE, "d2l_package"))
    sys.path.insert(0, os.path.join(HERE, "stubs"))  # headless IPython.display: figures are not rendered
    import matplotlib
    matplotlib.use("Agg")


_DRAWING = []
_INITIALISING = []


def _wrap_samplers(modules, on_draw):
    for module in modules:
        for name in SAMPLERS:
            original = getattr(module, name, None)
            if original is None or getattr(original, "_corpus", False):
                continue

            def sampler(*args, __original=original, __name=f"{module.__name__}.{name}", **kwargs):
                if _DRAWING:  # a sampler calling another: one draw
                    return __original(*args, **kwargs)
                _DRAWING.append(__name)
                try:
                    return on_draw(__name, __original, args, kwargs)
                finally:
                    _DRAWING.pop()
            sampler._corpus = True
            setattr(module, name, sampler)


def _short(name):
    """A sampler's name without the framework's module path: ``np.random.normal`` / ``nd.random.normal``."""
    parts = name.split(".")
    family = "np" if "numpy" in parts else "nd"
    return f"{family}.{parts[-1]}"


def _synthetic_images(mx, train=True, transform=None, **kwargs):
    """A small stand-in for MNIST / Fashion-MNIST: 28x28x1 uint8 images whose class shows in the pixels
    (a template per class plus noise), int32 labels; the same arrays under both frameworks."""
    rs = onp.random.RandomState(7 if train else 8)
    count = STAND_IN_IMAGES[bool(train)]
    templates = onp.random.RandomState(6).randint(0, 256, size=(10, 28, 28, 1))
    labels = rs.randint(0, 10, size=(count,)).astype(onp.int32)
    noise = rs.randint(0, 256, size=(count, 28, 28, 1))
    images = (0.7 * templates[labels] + 0.3 * noise).astype(onp.uint8)
    array = mx.np.array if mx.npx.is_np_array() else mx.nd.array  # what MXNet's datasets give in each mode
    dataset = mx.gluon.data.ArrayDataset(array(images, dtype="uint8"), labels)
    return dataset if transform is None else dataset.transform(transform)


# Images in the MNIST stand-in, for training and for testing (see _size_stand_ins).
STAND_IN_IMAGES = {True: 1200, False: 300}


def _install_data_shim(mx):
    """Downloads replaced by small synthetic data of the right format."""
    vision = mx.gluon.data.vision
    for name in ("MNIST", "FashionMNIST"):
        setattr(vision, name, lambda *args, __mx=mx, **kwargs: _synthetic_images(__mx, *args, **kwargs))
    _install_text_shim()


_WORDS = ("the time traveller said he was in a machine of some kind and we sat looking at it while the "
          "fire burned there is no difference between time and any of the three dimensions of space except "
          "that our consciousness moves along it my friend went on with the story").split()


def _synthetic_text(seed, words):
    """Seeded English-like text: ``words`` words of _WORDS in sentences with capitals and punctuation."""
    rs = onp.random.RandomState(seed)
    sentences, left = [], words
    while left > 0:
        length = min(left, int(rs.randint(3, 12)))
        sentence = " ".join(_WORDS[i] for i in rs.randint(0, len(_WORDS), size=length))
        sentences.append(sentence[0].upper() + sentence[1:] + (".", "!", "?", ",")[int(rs.randint(0, 4))])
        left -= length
    return "\n".join(" ".join(sentences[i:i + 5]) for i in range(0, len(sentences), 5)) + "\n"


def _synthetic_pairs(seed, count):
    """Seeded ``english\tfrench`` lines as in fra.txt: short sentences, the "French" a word-by-word
    rendering (each word spelt backwards, plus an e), its punctuation after a narrow no-break space."""
    rs = onp.random.RandomState(seed)
    lines = []
    for _ in range(count):
        english = [_WORDS[i] for i in rs.randint(0, len(_WORDS), size=int(rs.randint(1, 7)))]
        mark = (".", "!", "?")[int(rs.randint(0, 3))]
        french = " ".join(w[::-1] + "e" for w in english)
        lines.append(f"{' '.join(english).capitalize()}{mark}\t{french.capitalize()}\u202f{mark}")
    return "\n".join(lines) + "\n"


def _synthetic_download(name):
    """The bytes served for a d2l download: timemachine.txt, fra-eng.zip (fra-eng/fra.txt inside)."""
    import io
    import zipfile
    if name == "timemachine.txt":
        return _synthetic_text(11, 130).encode()
    if name == "fra-eng.zip":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr(zipfile.ZipInfo("fra-eng/fra.txt", (2020, 1, 1, 0, 0, 0)),
                             _synthetic_pairs(12, 600).encode())
        return buffer.getvalue()
    raise RuntimeError(f"harness: no stand-in for the download of {name}")


def _install_text_shim():
    """d2l.download fetches with requests.get: its answer is replaced by the synthetic files."""
    import requests

    class _Answer:
        def __init__(self, url):
            self.content = _synthetic_download(url.split("/")[-1])
    requests.get = lambda url, *args, **kwargs: _Answer(url)


def record(case, out):
    import mxnet as mx
    tape = Tape()
    _prepare_paths()
    _install_data_shim(mx)

    def on_draw(name, original, args, kwargs):
        value = original(*args, **kwargs)
        if _INITIALISING:  # an initializer's draw: the parameter's value is recorded as an init instead
            return value
        target = kwargs.get("out")
        shown = value if value is not None else target
        tape.draws.append((_short(name), _kept(tape, shown.asnumpy())))
        return value
    _wrap_samplers([mx.np.random, mx.nd.random, mx.random], on_draw)

    initializer_call = mx.init.Initializer.__call__

    def initializing(self, *args, **kwargs):
        _INITIALISING.append(self)
        try:
            return initializer_call(self, *args, **kwargs)
        finally:
            _INITIALISING.pop()
    mx.init.Initializer.__call__ = initializing

    init_impl = mx.gluon.Parameter._init_impl

    def recording_init(self, data, ctx_list):
        init_impl(self, data, ctx_list)
        tape.inits.append(_kept(tape, self.data().asnumpy()))
    mx.gluon.Parameter._init_impl = recording_init

    sampler_iter = mx.gluon.data.RandomSampler.__iter__

    def recording_iter(self):
        order = list(sampler_iter(self))
        tape.orders.append(onp.asarray(order))
        return iter(order)
    mx.gluon.data.RandomSampler.__iter__ = recording_iter
    _install_download_shim()

    def recording_backward(original):
        def backward(self, *args, **kwargs):
            tape.losses.append(float(self.mean().asnumpy()))
            return original(self, *args, **kwargs)
        return backward
    for cls in (mx.nd.NDArray, mx.np.ndarray):
        if "backward" in vars(cls):
            cls.backward = recording_backward(cls.backward)
    autograd_backward = mx.autograd.backward

    def recording_autograd_backward(heads, *args, **kwargs):  # autograd.backward(heads): the first head's
        head = heads[0] if isinstance(heads, (list, tuple)) else heads  # loss, as replay records it
        tape.losses.append(float(head.mean().asnumpy()))
        return autograd_backward(heads, *args, **kwargs)
    mx.autograd.backward = recording_autograd_backward
    _run(case, tape)
    _save(tape, out)


def _seed():
    random.seed(0)
    onp.random.seed(0)


class _Tab:
    """d2lbook's ``tab``: the cells are those of the MXNet tab."""

    @staticmethod
    def selected(*names):
        return not names or "mxnet" in names


def _run(case, tape):
    _size_stand_ins(case)
    _seed()
    namespace = {"__name__": "__main__", "tab": _Tab()}
    if script_arguments(case) is not None:
        return _run_script(case, namespace, tape)
    _exec_cells(cells_of(case), namespace, tape)


def _save(tape, out):
    arrays = {}
    for kind in ("inits", "orders", "observed"):
        for i, value in enumerate(getattr(tape, kind)):
            if isinstance(value, onp.ndarray):
                arrays[f"{kind}/{i}"] = value
    for i, (name, value) in enumerate(tape.draws):
        arrays[f"draws/{i}"] = value
    meta = {"draw_names": [n for n, _ in tape.draws], "counts": {k: len(getattr(tape, k)) for k in
                                                                 ("inits", "orders", "observed")},
            "observed_kinds": [v if isinstance(v, str) else "array" for v in tape.observed],
            "losses": tape.losses, "errors": tape.errors}
    onp.savez_compressed(out, __meta__=onp.asarray(json.dumps(meta)), **arrays)  # the meta text is UCS-4


def load_reference(path):
    data = onp.load(path)
    meta = json.loads(str(data["__meta__"]))
    reference = {"draws": [(n, data[f"draws/{i}"]) for i, n in enumerate(meta["draw_names"])],
                 "inits": [data[f"inits/{i}"] for i in range(meta["counts"]["inits"])],
                 "orders": [data[f"orders/{i}"] for i in range(meta["counts"]["orders"])],
                 "observed": [data[f"observed/{i}"] if kind == "array" else kind
                              for i, kind in enumerate(meta["observed_kinds"])],
                 "losses": meta["losses"], "errors": meta["errors"]}
    return reference


def replay(case, reference_path):
    """Run ``case`` under hybrid.mxnet with MXNet's draws; returns the Tape."""
    import hybrid.mxnet
    hybrid.mxnet.install()
    import mxnet as mx
    from hybrid import autograd as hybrid_autograd
    from hybrid._core import gradients
    from hybrid.data import sampler as hybrid_sampler
    from hybrid.parameter import Parameter
    reference = load_reference(reference_path)
    tape = Tape(reference)
    _prepare_paths()
    _install_data_shim(mx)

    def on_draw(name, original, args, kwargs):
        if _INITIALISING:  # a custom initializer's draw: the parameter gets MXNet's value afterwards
            return original(*args, **kwargs)
        expected, values = tape.next("draws", name)
        own = original(*args, **kwargs)
        values = _unkept_draw(values, own)
        if _short(name) != expected or (values.shape != own.shape):
            raise RuntimeError(f"harness: draw {tape.cursor['draws'] - 1} is {_short(name)}, MXNet drew "
                               f"{expected} of shape {values.shape}")
        kind = mx.np.array if _short(name).startswith("np") else mx.nd.array
        result = kind(values, dtype=values.dtype)
        target = kwargs.get("out")
        if target is not None:
            target[:] = result
            return target
        return result
    _wrap_samplers([mx.np.random, mx.nd.random, mx.random], on_draw)

    init_now = Parameter._init_now

    def replaying_init(self, initializer):
        _INITIALISING.append(self)
        try:
            init_now(self, initializer)
        finally:
            _INITIALISING.pop()
        values = tape.next("inits", f"parameter {self.name!r}")
        if values.ndim and values.shape[0] == 0 and values.shape[1:] == tuple(self.shape) and values.size == 0 \
                and all(self.shape):  # not kept: the parameter keeps hybrid's own initial value
            return
        if tuple(values.shape) != tuple(self.shape):
            raise RuntimeError(f"harness: parameter {self.name!r} of shape {self.shape} is initialised where MXNet "
                               f"initialised one of shape {values.shape}")
        # initialised again, to MXNet's value: a deferred init can run inside a traced forward (a
        # HybridSequential's first call), where set_data would store a traced value
        init_now(self, _Recorded(values))
    Parameter._init_now = replaying_init

    def replaying_iter(self):
        return iter(tape.next("orders", "RandomSampler").tolist())
    hybrid_sampler.RandomSampler.__iter__ = replaying_iter

    backward = gradients.backward

    def recording_backward(heads, *args, **kwargs):
        head = heads[0] if isinstance(heads, (list, tuple)) else heads
        tape.losses.append(float(onp.asarray(head).mean()))
        return backward(heads, *args, **kwargs)
    gradients.backward = hybrid_autograd.backward = recording_backward
    _install_download_shim()
    _run(case, tape)
    return tape


def compare(tape, reference, rtol=1e-4, atol=1e-5):
    """The differences between a replayed run and MXNet's: a list of strings (empty: they agree)."""
    problems = [f"cell {i} raised under hybrid:\n{text}" for i, text in tape.errors
                if not (isinstance(reference["observed"][i], str) and reference["observed"][i] == "error")]
    for i, (mine, theirs) in enumerate(zip(tape.observed, reference["observed"])):
        if isinstance(theirs, str):
            if isinstance(mine, str) and mine != theirs and "error" in (mine, theirs):
                problems.append(f"cell {i}: hybrid gave {mine}, MXNet {theirs}")
            continue
        if isinstance(mine, str):
            problems.append(f"cell {i}: hybrid gave {mine}, MXNet an array of shape {theirs.shape}")
            continue
        if mine.shape != theirs.shape:
            problems.append(f"cell {i}: shape {mine.shape}, MXNet {theirs.shape}")
        elif not onp.allclose(mine.astype(onp.float64), theirs.astype(onp.float64), rtol=rtol, atol=atol):
            problems.append(f"cell {i}: values differ, hybrid {mine.ravel()[:6]} MXNet {theirs.ravel()[:6]}")
        elif mine.dtype != theirs.dtype and not (mine.dtype.kind == theirs.dtype.kind and {mine.dtype.itemsize,
                                                                                           theirs.dtype.itemsize} == {4, 8}):
            problems.append(f"cell {i}: dtype {mine.dtype}, MXNet {theirs.dtype}")
    losses, expected = tape.losses, reference["losses"]
    if len(losses) != len(expected):
        problems.append(f"{len(losses)} backward() calls, MXNet made {len(expected)}")
    for step, (mine, theirs) in enumerate(zip(losses, expected)):
        tolerance = rtol if step < EXACT_STEPS else LATER_RTOL
        if not onp.isclose(mine, theirs, rtol=tolerance, atol=atol):
            problems.append(f"backward {step}: loss {mine}, MXNet {theirs} (rtol {tolerance})")
            break
    return problems


# Cases whose training amplifies float32 rounding, so that MXNet reseeded ends elsewhere too: case ->
# (losses compared as usual, spread of the final losses). rnn-concise (SGD at lr 1 on one batch an epoch)
# grows a 1e-6 difference sixfold a step from step 19 and its losses part by up to 10% later; MXNet 1.9.1
# reseeded (seeds 0-3) gives means of the last 10 losses of 1.953-1.994, within 1.5% of seed 0's 1.981.
# gru (SGD at lr 4) agrees to 1e-6 for 33 steps, until a loss spike of the scratch GRU amplifies the
# difference sixteenfold a step; reseeded MXNet ends the concise GRU's training at 2.109-2.161 (seed 0: 2.115).
CHAOTIC = {"d2l/chapter_recurrent-neural-networks/rnn-concise": (20, 0.03),
           "d2l/chapter_recurrent-modern/gru": (35, 0.03)}


def compare_chaotic(tape, reference, steps, spread, last=10):
    """:func:`compare` for a case whose training amplifies float32 rounding: the first ``steps`` losses
    as there, then the mean of the ``last`` losses within ``spread`` (relative) of MXNet's."""
    import copy
    head, expected = copy.copy(tape), dict(reference)
    head.losses, expected["losses"] = tape.losses[:steps], reference["losses"][:steps]
    problems = compare(head, expected)
    if len(tape.losses) != len(reference["losses"]):
        problems.append(f"{len(tape.losses)} backward() calls, MXNet made {len(reference['losses'])}")
    elif tape.losses:
        mine, theirs = onp.mean(tape.losses[-last:]), onp.mean(reference["losses"][-last:])
        if not abs(mine - theirs) <= spread * abs(theirs):
            problems.append(f"mean of the last {last} losses {mine}, MXNet {theirs} (spread {spread})")
    return problems


def warm_time(case, alias):
    """Seconds of the case's second run in this process (the first compiles, fills caches, imports)."""
    import time
    if alias:
        import hybrid.mxnet
        hybrid.mxnet.install()
    import mxnet as mx
    _prepare_paths()
    _install_data_shim(mx)
    _install_download_shim()
    seconds = []
    for _ in range(2):
        tape = Tape()
        start = time.perf_counter()
        _run(case, tape)
        mx.nd.waitall()
        seconds.append(time.perf_counter() - start)
        if tape.errors:
            raise RuntimeError(f"{case}: cell {tape.errors[0][0]} raised:\n{tape.errors[0][1]}")
    return seconds[1]


class _Recorded:
    """An initializer giving MXNet's recorded initial value of a parameter."""

    def __init__(self, values):
        self.values = values

    def __call__(self, shape, dtype="float32"):
        import jax.numpy as jnp
        return jnp.asarray(self.values, dtype=dtype)

    def for_parameter(self, name, shape, dtype="float32"):
        return self(shape, dtype)


def _reads_a_timer(expression, namespace):
    """Whether a cell's last expression reads a clock: ``timer.stop()``, ``timer.avg()``, ... on a ``Timer``
    (d2l's, or a section's own copy of it). Its value is the seconds some code took, which no two runs share,
    so it is observed as "timing" and not compared (the cell still has to run)."""
    if not (isinstance(expression, ast.Call) and isinstance(expression.func, ast.Attribute)
            and isinstance(expression.func.value, (ast.Name, ast.Attribute))):
        return False
    try:
        receiver = eval(compile(ast.Expression(expression.func.value), "<timer>", "eval"), namespace)
    except Exception:  # noqa: BLE001  not a plain name after all: not a timer
        return False
    return type(receiver).__name__ == "Timer"


# The references stay small (< 1 MB): a draw or initial value of more than KEPT_ANY_SIZE elements is kept
# only while the kept values come to at most KEPT_BYTES; beyond, it is recorded by shape only
# (async-computation draws 1000x1000 matrices only to time products of them, hybridize initialises a second
# network only to time it). Under hybrid such a draw comes from hybrid's own generator and such a parameter
# keeps hybrid's own initial value: a value computed from one and observed differs from MXNet's, and says so.
KEPT_ANY_SIZE = 100_000
KEPT_BYTES = 900_000


def _kept(tape, values):
    kept = getattr(tape, "kept_bytes", 0)
    if values.size > KEPT_ANY_SIZE and kept + values.nbytes > KEPT_BYTES:
        return onp.zeros((0,) + values.shape, values.dtype)  # stands for "not kept", with its shape and dtype
    tape.kept_bytes = kept + values.nbytes
    return values


def _unkept_draw(values, own):
    """The values to replay: MXNet's, or hybrid's own draw where MXNet's was not kept."""
    if values.ndim and values.shape[0] == 0 and values.shape[1:] == tuple(own.shape) and own.size:
        return own.asnumpy().astype(values.dtype)
    return values


# Rows of the synthetic airfoil file. d2l's has 1503 (and reads the first 1500); its training loops evaluate
# the loss on the whole set every 200 examples, which costs the square of the rows: 300 rows keep each
# optimisation section's replay within a minute.
AIRFOIL_ROWS = 300


def _synthetic_airfoil():
    """A stand-in for d2l's airfoil self-noise data: AIRFOIL_ROWS rows of 6 tab-separated columns (frequency,
    angle, chord length, velocity, displacement thickness, sound pressure), the last a noisy linear function
    of the others; the same text under both frameworks."""
    rs = onp.random.RandomState(11)
    n = AIRFOIL_ROWS
    columns = [rs.choice([200, 400, 800, 1250, 2000, 3150, 5000, 8000], n).astype(float),
               onp.round(rs.uniform(0, 22, n), 1), rs.choice([0.0254, 0.0508, 0.1016, 0.1524, 0.2286, 0.3048], n),
               rs.choice([31.7, 39.6, 55.5, 71.3], n), onp.round(rs.uniform(0.0004, 0.058, n), 6)]
    features = onp.stack(columns, axis=1)
    standard = (features - features.mean(0)) / features.std(0)
    pressure = 125 + standard @ onp.array([-4.0, -2.0, -3.5, 1.5, -2.5]) + rs.normal(0, 3, n)
    rows = onp.concatenate([features, onp.round(pressure, 3)[:, None]], axis=1)
    return "".join("\t".join(f"{v:g}" for v in row) + "\n" for row in rows)


def _install_download_shim():
    """``d2l.download('airfoil')`` serves the synthetic airfoil file from a temporary folder; d2l's module
    is imported here (after the samplers are wrapped, since it binds ``d2l.normal`` and the like)."""
    import tempfile
    from d2l import mxnet as d2l_mxnet
    download = d2l_mxnet.download

    served = {}

    def serving(url, folder="../data", sha1_hash=None):
        if url == "airfoil" or url.endswith("/airfoil_self_noise.dat"):
            if "airfoil" not in served:
                served["airfoil"] = os.path.join(tempfile.mkdtemp(prefix="corpus-data-"), "airfoil_self_noise.dat")
                with open(served["airfoil"], "w") as f:
                    f.write(_synthetic_airfoil())
            return served["airfoil"]
        return download(url, folder, sha1_hash)
    d2l_mxnet.download = serving


def _size_stand_ins(case):
    """The modern CNNs (chapter_convolutional-modern) train ten epochs of batches of 128 images, most of them
    resized to 96 or 224 pixels: they get one batch of training images and one of test images."""
    small = "chapter_convolutional-modern" in case.replace(os.sep, "/")
    STAND_IN_IMAGES.update({True: 128, False: 64} if small else {True: 1200, False: 300})


# -- whole scripts (scripts/): MXNet's example/gluon, run as one cell with their command line -------------
SCRIPTS = os.path.join(HERE, "scripts")


def script_arguments(case):
    """The command-line arguments of a script case (``scripts/arguments.json``), None for a notebook case."""
    path = os.path.abspath(case)
    if not path.startswith(SCRIPTS + os.sep):
        return None
    with open(os.path.join(SCRIPTS, "arguments.json")) as f:
        table = json.load(f)
    return table[os.path.relpath(path, SCRIPTS)[:-3]]


def _run_script(case, namespace, tape):
    """Runs ``case`` as ``python case.py ARGS`` would, in one cell: ``sys.argv`` set, its folder first on
    ``sys.path`` (for its sibling modules), and the datasets it downloads replaced (``_install_script_data``)."""
    import mxnet as mx
    _install_script_data(mx)
    path = os.path.abspath(case)
    argv, sys.argv = sys.argv, [os.path.basename(path)] + script_arguments(case)
    sys.path.insert(0, os.path.dirname(path))
    namespace["__file__"] = path
    try:
        with open(path) as f:
            code = compile(f.read(), path, "exec")
        exec(code, namespace)
        tape.observed.append("-")
    except (Exception, SystemExit):  # noqa: BLE001  the error is what the comparison reports
        tape.observed.append("error")
        tape.errors.append((0, traceback.format_exc(limit=8)))
    finally:
        sys.argv = argv
        sys.path.remove(os.path.dirname(path))


def _synthetic_colour_images(mx, train=True, transform=None, **kwargs):
    """A small stand-in for CIFAR-10: 32x32x3 uint8 images whose class shows in the pixels, int32 labels."""
    rs = onp.random.RandomState(17 if train else 18)
    count = 600 if train else 200
    templates = onp.random.RandomState(16).randint(0, 256, size=(10, 32, 32, 3))
    labels = rs.randint(0, 10, size=(count,)).astype(onp.int32)
    noise = rs.randint(0, 256, size=(count, 32, 32, 3))
    images = (0.7 * templates[labels] + 0.3 * noise).astype(onp.uint8)
    array = mx.np.array if mx.npx.is_np_array() else mx.nd.array
    dataset = mx.gluon.data.ArrayDataset(array(images, dtype="uint8"), labels)
    return dataset if transform is None else dataset.transform(transform)


def _install_script_data(mx):
    """The scripts' downloads: MNIST and Fashion-MNIST (given a root folder first, as scripts do), CIFAR-10."""
    vision = mx.gluon.data.vision
    for name, make in (("MNIST", _synthetic_images), ("FashionMNIST", _synthetic_images),
                       ("CIFAR10", _synthetic_colour_images)):
        def dataset(root=None, train=True, transform=None, __make=make):
            return __make(mx, train=train, transform=transform)
        setattr(vision, name, dataset)


if __name__ == "__main__":
    command, case = sys.argv[1:3]
    if command == "time":
        print(json.dumps({"seconds": warm_time(case, alias=sys.argv[3:4] == ["alias"])}))
        sys.exit(0)
    reference_file = sys.argv[3]
    if command == "record":
        record(case, reference_file)
    else:
        run = replay(case, reference_file)
        chaotic = CHAOTIC.get(os.path.relpath(os.path.abspath(case), HERE)[:-3])
        if chaotic:
            print(json.dumps(compare_chaotic(run, load_reference(reference_file), *chaotic), indent=1))
        else:
            print(json.dumps(compare(run, load_reference(reference_file)), indent=1))
