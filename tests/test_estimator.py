"""hybrid.estimator: Gluon's fit loop with event handlers.

Expected values come from the hand-written Gluon loop on the same data and initial weights, from
NumPy (accuracy, CSV contents) or from counting (epochs run, checkpoints kept)."""
import csv
import logging

import numpy as np
import pytest

from hybrid import Trainer, amp, autograd, data, estimator, init, loss, metric, nn
from hybrid.export import list_checkpoints

from conftest import assert_close


@pytest.fixture(autouse=True)
def quiet():
    logger = logging.getLogger("hybrid.estimator")
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)


def dataset(n=96, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = (x[:, 0] - x[:, 2] > 0).astype(np.int32)
    return x, y


def loaders(batch=16):
    x, y = dataset()
    train = data.DataLoader(data.ArrayDataset(x[:64], y[:64]), batch_size=batch)
    val = data.DataLoader(data.ArrayDataset(x[64:], y[64:]), batch_size=batch)
    return train, val


def make_net(seed=1):
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="tanh", in_units=6), nn.Dense(2, in_units=8))
    net.initialize(init.Xavier())
    rng = np.random.default_rng(seed)
    for p in net.collect_params().values():
        p.set_data(rng.standard_normal(p.shape).astype(np.float32) * 0.5)
    net.hybridize()
    return net


def make_estimator(net=None, lr=0.2, **kwargs):
    net = net or make_net()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr, "momentum": 0.9})
    return estimator.Estimator(net, loss.SoftmaxCELoss(), trainer=trainer, **kwargs)


def test_fit_gives_the_numbers_of_the_hand_written_loop():
    train, _ = loaders()
    est = make_estimator()
    est.fit(train, epochs=2)

    net = make_net()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.2, "momentum": 0.9})
    loss_fn = loss.SoftmaxCELoss()
    for _ in range(2):
        for x, y in train:
            with autograd.record():
                l = loss_fn(net(x), y)
            autograd.backward(l)
            trainer.step(x.shape[0])
    for got, want in zip(est.net.collect_params().values(), net.collect_params().values()):
        assert_close(got.data(), want.data(), rtol=1e-5, atol=1e-6)


def test_fit_scales_the_loss_when_the_trainer_has_a_loss_scaler():
    train, _ = loaders()
    amp.init("float16")
    try:
        def scaled_trainer(net):
            trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
            amp.init_trainer(trainer, init_scale=2.0 ** 24)  # overflows float16 at first
            return trainer

        net = make_net()
        est = estimator.Estimator(net, loss.SoftmaxCELoss(), trainer=scaled_trainer(net))
        est.fit(train, epochs=2)

        ref = make_net()
        trainer, loss_fn = scaled_trainer(ref), loss.SoftmaxCELoss()
        for _ in range(2):
            for x, y in train:
                with autograd.record():
                    l = loss_fn(ref(x), y)
                with amp.scale_loss(l, trainer) as scaled:
                    autograd.backward(scaled)
                trainer.step(x.shape[0])
    finally:
        amp.disable()
    scaler = est.trainer.loss_scaler
    assert scaler.skipped_steps == trainer.loss_scaler.skipped_steps > 0
    assert scaler.loss_scale == trainer.loss_scaler.loss_scale < 2.0 ** 24
    assert np.isfinite(est.history.batch["training SoftmaxCrossEntropyLoss"]).all()
    for got, want in zip(est.net.collect_params().values(), ref.collect_params().values()):
        assert_close(got.data(), want.data(), rtol=1e-5, atol=1e-6)


def test_fit_with_every_built_in_handler_on_the_digits(tmp_path):
    from sklearn.datasets import load_digits
    digits = load_digits()
    x, y = (digits.images / 16.0).reshape(-1, 64).astype(np.float32), digits.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(x))
    train_at, test_at = order[:1400], order[1400:]
    train = data.DataLoader(data.ArrayDataset(x[train_at], y[train_at]), batch_size=64, shuffle=True)
    val = data.DataLoader(data.ArrayDataset(x[test_at], y[test_at]), batch_size=128)

    def make():
        net = nn.HybridSequential()
        net.add(nn.Dense(64, activation="relu", in_units=64), nn.Dense(10, in_units=64))
        net.initialize(init.Xavier())
        net.hybridize()
        trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
        return estimator.Estimator(net, loss.SoftmaxCELoss(), train_metrics=[metric.Accuracy()],
                                   val_metrics=[metric.Accuracy()], trainer=trainer)

    est = make()
    val_acc = est.val_metrics[0]
    handlers = [
        estimator.StoppingHandler(max_epoch=5),
        estimator.MetricHandler(est.train_metrics),
        estimator.ValidationHandler(val, est.evaluate),
        estimator.LoggingHandler(log_interval=10),
        estimator.CheckpointHandler(str(tmp_path), "digits", monitor=val_acc, save_best=True, max_checkpoints=2),
        estimator.EarlyStoppingHandler(val_acc, min_delta=0.5, patience=1),  # no epoch gains 50 points: stops
        estimator.GradientUpdateHandler(),
        estimator.CSVLogger(str(tmp_path / "log.csv")),
        estimator.TensorBoardHandler(str(tmp_path / "tb")),
        estimator.LRSchedulerHandler(lambda epoch: 0.1 * 0.5 ** epoch),
    ]
    history = est.fit(train, val_data=val, epochs=5, event_handlers=handlers)

    epochs = len(history.epoch["validation accuracy"])
    assert epochs == 3  # the first epoch sets the best; the next two gain less than 50 points: patience 1 ends it
    assert history.epoch["validation accuracy"][-1] > 0.9
    pred = np.asarray(est.net(x[test_at])).argmax(axis=1)
    assert val_acc.get()[1] == pytest.approx(np.mean(pred == y[test_at]))
    with open(tmp_path / "log.csv") as f:
        assert len(list(csv.DictReader(f))) == epochs
    tb = {(tag, step) for tag, step, _ in read_scalars(tmp_path / "tb")}
    assert {("epoch/validation_accuracy", e) for e in range(1, epochs + 1)} <= tb
    assert est.trainer.learning_rate == pytest.approx(0.1 * 0.5 ** (epochs - 1))
    assert len(list_checkpoints(tmp_path / "digits")) == 2 and (tmp_path / "digits-best.params").exists()

    resumed = make()  # other weights: the checkpoint's replace them, and nothing is left to train
    resumed.fit(train, epochs=epochs, event_handlers=[estimator.CheckpointHandler(
        str(tmp_path), "digits", resume_from_checkpoint=True)])
    for got, want in zip(resumed.net.collect_params().values(), est.net.collect_params().values()):
        assert_close(got.data(), want.data(), rtol=0, atol=0)


def test_history_and_default_metrics_match_numpy():
    train, val = loaders()
    est = make_estimator()
    history = est.fit(train, val_data=val, epochs=3)
    names = ["training accuracy", "training SoftmaxCrossEntropyLoss", "validation accuracy",
             "validation SoftmaxCrossEntropyLoss"]
    assert list(history.epoch) == names
    assert all(len(values) == 3 for values in history.epoch.values())
    assert len(history.batch["training accuracy"]) == 3 * 4  # 4 batches of 16 per epoch
    x, y = dataset()
    pred = np.asarray(est.net(x[64:])).argmax(axis=1)
    assert history.epoch["validation accuracy"][-1] == pytest.approx(np.mean(pred == y[64:]))


def test_csv_logger_writes_a_row_per_epoch(tmp_path):
    train, val = loaders()
    est = make_estimator()
    path = tmp_path / "log.csv"
    history = est.fit(train, val_data=val, epochs=3, event_handlers=[estimator.CSVLogger(str(path))])
    with open(path) as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["epoch"] + list(history.epoch)
    assert [row[0] for row in rows[1:]] == ["1", "2", "3"]
    for i, row in enumerate(rows[1:]):
        assert [float(v) for v in row[1:]] == pytest.approx([values[i] for values in history.epoch.values()],
                                                            rel=1e-5)


def test_early_stopping_stops_when_the_monitor_stops_improving():
    train, val = loaders()
    est = make_estimator(lr=0.0)  # nothing learns: the validation loss never improves after epoch 1
    stopper = estimator.EarlyStoppingHandler(monitor=est.val_metrics[1], patience=1)
    history = est.fit(train, val_data=val, epochs=10, event_handlers=[stopper])
    assert len(history.epoch["validation SoftmaxCrossEntropyLoss"]) == 3 and stopper.stopped_epoch == 3

    est = make_estimator(lr=0.2)
    stopper = estimator.EarlyStoppingHandler(monitor=est.val_metrics[1], patience=1)  # improves every epoch
    history = est.fit(train, val_data=val, epochs=4, event_handlers=[stopper])
    assert len(history.epoch["validation SoftmaxCrossEntropyLoss"]) == 4 and stopper.stopped_epoch == 0
    est = make_estimator(lr=0.2)
    stopper = estimator.EarlyStoppingHandler(monitor=est.val_metrics[1], patience=0, min_delta=1.0)
    history = est.fit(train, val_data=val, epochs=4, event_handlers=[stopper])  # no gain is that large
    assert len(history.epoch["validation SoftmaxCrossEntropyLoss"]) == 2 and stopper.stopped_epoch == 2


def test_checkpoints_are_kept_saved_best_and_resumed(tmp_path):
    train, val = loaders()
    straight = make_estimator()
    straight.fit(train, epochs=4)

    est = make_estimator()
    handler = estimator.CheckpointHandler(str(tmp_path), "mlp", monitor=est.val_metrics[0], save_best=True,
                                          max_checkpoints=1)
    est.fit(train, val_data=val, epochs=2, event_handlers=[handler])
    assert [step for step, _ in list_checkpoints(tmp_path / "mlp")] == [8]  # 2 epochs of 4 batches, 1 kept
    assert (tmp_path / "mlp-best.params").exists()

    resumed = make_estimator(net=make_net(seed=7))  # other weights: all of them come from the checkpoint
    handler = estimator.CheckpointHandler(str(tmp_path), "mlp", resume_from_checkpoint=True)
    history = resumed.fit(train, epochs=4, event_handlers=[handler])
    assert len(history.epoch["training accuracy"]) == 2  # only the 2 remaining epochs ran
    for got, want in zip(resumed.net.collect_params().values(), straight.net.collect_params().values()):
        assert_close(got.data(), want.data(), rtol=1e-5, atol=1e-6)


def test_lr_scheduler_handler_sets_the_rate_per_epoch_or_batch():
    train, _ = loaders()
    seen = []

    class Record(estimator.BatchBegin):
        priority = 0

        def batch_begin(self, est, *args, **kwargs):
            seen.append(est.trainer.learning_rate)
    est = make_estimator()
    est.fit(train, epochs=2, event_handlers=[estimator.LRSchedulerHandler(lambda i: 0.1 * (i + 1)), Record()])
    assert seen == pytest.approx([0.1] * 4 + [0.2] * 4)
    seen.clear()
    est.fit(train, batches=3, event_handlers=[estimator.LRSchedulerHandler(lambda i: 0.01 * i, by="batch"),
                                              Record()])
    assert seen == pytest.approx([0.0, 0.01, 0.02])


def test_history_plot_saves_a_png(tmp_path):
    train, val = loaders()
    history = make_estimator().fit(train, val_data=val, epochs=2)
    figure = history.plot(str(tmp_path / "curves.png"))
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(figure.axes) == 2  # accuracy, loss: training and validation on each
    with pytest.raises(ValueError, match="recorded"):
        history.plot(metrics=["top-5"])


def test_evaluate_updates_the_validation_metrics():
    _, val = loaders()
    est = make_estimator(val_metrics=[metric.Accuracy()])
    est.evaluate(val)
    x, y = dataset()
    pred = np.asarray(est.net(x[64:])).argmax(axis=1)
    assert est.val_metrics[0].name == "validation accuracy"
    assert est.val_metrics[0].get()[1] == pytest.approx(np.mean(pred == y[64:]))


@pytest.mark.parametrize("call, match", [
    (lambda est, train: est.fit(train), "exactly one of epochs or batches"),
    (lambda est, train: est.fit(train, epochs=1, batches=2), "exactly one of epochs or batches"),
    (lambda est, train: est.fit([np.ones((2, 6), np.float32)], epochs=1), r"a batch must be \(data, label\)"),
    (lambda est, train: est.fit(train, epochs=1, event_handlers=[object()]), "EventHandler instances"),
])
def test_bad_arguments_are_refused(call, match):
    train, _ = loaders()
    with pytest.raises(ValueError, match=match):
        call(make_estimator(), train)


def test_constructor_checks():
    net = make_net()
    with pytest.raises(ValueError, match="hybrid.loss.Loss"):
        estimator.Estimator(net, lambda a, b: a)
    with pytest.raises(ValueError, match="save_best=True needs a monitor"):
        estimator.CheckpointHandler("ckpt", save_best=True)
    with pytest.warns(UserWarning, match="no trainer given"):
        est = estimator.Estimator(net, loss.L2Loss())
    assert [m.name for m in est.train_metrics] == ["training L2Loss"]


def read_scalars(logdir):
    """(tag, step, value) of every scalar in the TensorBoard event files under ``logdir``: the TFRecord
    framing read by hand, each record parsed as an Event protobuf."""
    import glob
    import struct

    from tensorboardX.proto import event_pb2
    out = []
    for path in glob.glob(str(logdir / "events.out.tfevents.*")):
        raw = open(path, "rb").read()
        at = 0
        while at < len(raw):
            (length,) = struct.unpack("<Q", raw[at:at + 8])
            event = event_pb2.Event.FromString(raw[at + 12:at + 12 + length])
            at += 12 + length + 4
            out += [(v.tag, event.step, v.simple_value) for v in event.summary.value]
    return out


def test_tensorboard_handler_writes_readable_scalars(tmp_path):
    train, val = loaders()
    est = make_estimator()
    history = est.fit(train, val_data=val, epochs=2,
                      event_handlers=[estimator.TensorBoardHandler(str(tmp_path), log_interval=2)])
    scalars = read_scalars(tmp_path)
    per_epoch = {(tag, step): value for tag, step, value in scalars if tag.startswith("epoch/")}
    for epoch, value in enumerate(history.epoch["validation accuracy"], start=1):
        assert per_epoch[("epoch/validation_accuracy", epoch)] == pytest.approx(value)
    for epoch, value in enumerate(history.epoch["training SoftmaxCrossEntropyLoss"], start=1):
        assert per_epoch[("epoch/training_SoftmaxCrossEntropyLoss", epoch)] == pytest.approx(value)
    batches = {step: value for tag, step, value in scalars if tag == "batch/training_accuracy"}
    assert sorted(batches) == [2, 4, 6, 8]  # every 2 batches
    assert batches[8] == pytest.approx(history.batch["training accuracy"][7])


def test_progress_lines_show_rate_time_left_metrics_and_compiles(caplog):
    train, _ = loaders(batch=8)
    est = make_estimator()
    logger = logging.getLogger("hybrid.estimator")
    logger.setLevel(logging.INFO)
    logger.addHandler(caplog.handler)
    try:
        est.fit(train, epochs=1, event_handlers=[estimator.ProgressBar(style="lines", interval=0)])
    finally:
        logger.removeHandler(caplog.handler)
    lines = [r.getMessage() for r in caplog.records if r.name == "hybrid.estimator"]
    progress = [line for line in lines if line.startswith("[Epoch 0] batch ")]
    assert [line.split(",")[0] for line in progress] == [f"[Epoch 0] batch {i}/8" for i in range(1, 9)]
    assert "s left" in progress[0] and "samples/s" in progress[0] and "accuracy" in progress[0]
    assert any(line.startswith("compiled a recorded step program") and line.endswith(" s") for line in lines)


def test_progress_bar_draws_with_tqdm(capsys):
    train, _ = loaders()
    make_estimator().fit(train, epochs=1, event_handlers=[estimator.ProgressBar(style="bar")])
    err = capsys.readouterr().err
    assert "epoch 0: 100%" in err and "4/4" in err and "samples/s=" in err
    with pytest.raises(ValueError, match="style"):
        estimator.ProgressBar(style="fancy")


def test_a_failed_fit_releases_its_progress_bar_and_compile_lines():
    compile_logger = logging.getLogger("hybrid.compile")
    handlers, level = list(compile_logger.handlers), compile_logger.level
    train, _ = loaders()
    bad = list(train)[:2] + [np.ones((2, 6), np.float32)]  # the third batch has no label
    with pytest.raises(ValueError, match=r"a batch must be \(data, label\)"):
        make_estimator().fit(bad, epochs=1, event_handlers=[estimator.ProgressBar(style="lines")])
    assert compile_logger.handlers == handlers and compile_logger.level == level
