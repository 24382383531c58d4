"""Evaluation metrics against NumPy and hand-computed values."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hybrid import metric

# Gluon's documented example: three samples, two classes
PREDS = np.array([[0.3, 0.7], [0.0, 1.0], [0.4, 0.6]])
LABELS = np.array([0, 1, 1])


def test_accuracy_with_scores_indices_lists_and_accumulation():
    acc = metric.Accuracy()
    assert math.isnan(acc.get()[1])
    acc.update([LABELS], [PREDS])
    assert acc.get() == ("accuracy", pytest.approx(2 / 3))
    acc.update(np.array([1, 0]), np.array([1, 1]))  # bare arrays; predictions given as class indices
    assert acc.get()[1] == pytest.approx(3 / 5)
    acc.reset()
    assert math.isnan(acc.get()[1])


def test_accuracy_axis(rng):
    scores = rng.standard_normal((4, 3, 5))  # (N, C, T)
    labels = rng.integers(0, 3, (4, 5))
    acc = metric.Accuracy(axis=1)
    acc.update(labels, scores)
    assert acc.get()[1] == pytest.approx((scores.argmax(1) == labels).mean())


def test_top_k_accuracy(rng):
    scores = rng.standard_normal((20, 6))
    labels = rng.integers(0, 6, 20)
    top = metric.TopKAccuracy(top_k=3)
    top.update([labels[:12], labels[12:]], [scores[:12], scores[12:]])
    rank = (scores > scores[np.arange(20), labels][:, None]).sum(axis=1)  # classes scored above the label
    assert top.get() == ("top_k_accuracy_3", pytest.approx((rank < 3).mean()))


def test_f1_binary_pools_counts_over_updates():
    f1 = metric.F1()
    f1.update([LABELS], [PREDS])  # (N, 2) scores: column 1 > 0.5 -> predicted [1, 1, 1]
    assert f1.get() == ("f1", pytest.approx(0.8))  # tp 2, fp 1, fn 0
    f1.update(np.array([1, 1, 0]), np.array([0.2, 0.9, 0.1]))  # probabilities: tp 1, fn 1
    # pooled: tp 3, fp 1, fn 1 -> 6 / 8, not the mean of the two batches' F1 (0.8 and 2/3)
    assert f1.get()[1] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="binary labels"):
        f1.update(np.array([2]), np.array([0.3]))


def np_f1_per_class(labels, predicted, classes):
    scores = []
    for c in range(classes):
        tp = np.sum((predicted == c) & (labels == c))
        fp = np.sum((predicted == c) & (labels != c))
        fn = np.sum((predicted != c) & (labels == c))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return np.array(scores)


def test_f1_micro_and_macro(rng):
    scores = rng.standard_normal((30, 4))
    labels = rng.integers(0, 4, 30)
    macro, micro = metric.F1(average="macro"), metric.F1(average="micro")
    for m in (macro, micro):
        m.update(labels[:10], scores[:10])
        m.update(labels[10:], scores[10:])
    predicted = scores.argmax(1)
    assert macro.get()[1] == pytest.approx(np_f1_per_class(labels, predicted, 4).mean())
    assert micro.get()[1] == pytest.approx((predicted == labels).mean())  # single-label micro F1 = accuracy


def test_regression_metrics(rng):
    labels = [rng.standard_normal((4, 3)), rng.standard_normal((2, 3))]
    preds = [rng.standard_normal((4, 3)), rng.standard_normal((2, 3))]
    mae, mse, rmse = metric.MAE(), metric.MSE(), metric.RMSE()
    for m in (mae, mse, rmse):
        for label, pred in zip(labels, preds):
            m.update(label, pred)
    diff = np.concatenate(labels) - np.concatenate(preds)
    assert mae.get() == ("mae", pytest.approx(np.abs(diff).mean()))
    assert mse.get() == ("mse", pytest.approx((diff ** 2).mean()))
    assert rmse.get() == ("rmse", pytest.approx(np.sqrt((diff ** 2).mean())))
    gluon_example = metric.MAE()
    gluon_example.update([np.array([2.5, 0.0, 2, 8])], [np.array([3, -0.5, 2, 7])])
    assert gluon_example.get()[1] == pytest.approx(0.5)


def test_cross_entropy_and_perplexity():
    ce, perplexity = metric.CrossEntropy(), metric.Perplexity()
    ce.update([LABELS], [PREDS])
    perplexity.update([LABELS], [PREDS])
    expected = -(np.log(0.3) + np.log(1.0) + np.log(0.6)) / 3
    assert ce.get() == ("cross-entropy", pytest.approx(expected))
    assert perplexity.get() == ("perplexity", pytest.approx(math.exp(expected)))  # 1.7711 in Gluon's docs
    ignoring = metric.Perplexity(ignore_label=1)
    ignoring.update([LABELS], [PREDS])
    assert ignoring.get()[1] == pytest.approx(1 / 0.3)  # only the label-0 sample counts
    zero = metric.CrossEntropy(eps=1e-5)
    zero.update(np.array([0]), np.array([[0.0, 1.0]]))
    assert zero.get()[1] == pytest.approx(-math.log(1e-5))


def test_cross_entropy_from_logits_over_an_axis(rng):
    logits = rng.standard_normal((2, 5, 3))  # (N, C, T) with classes on axis 1
    labels = rng.integers(0, 5, (2, 3))
    ce = metric.CrossEntropy(axis=1, from_logits=True)
    ce.update(labels, logits)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    picked = np.take_along_axis(log_p, labels[:, None, :], axis=1)
    assert ce.get()[1] == pytest.approx(-picked.mean())


def test_loss_metric_averages_all_elements():
    m = metric.Loss()
    m.update(None, [np.array([1.0, 2.0]), np.array([[3.0], [6.0]])])
    m.update(None, np.array([3.0]))
    assert m.get() == ("loss", pytest.approx(3.0))


def test_composite_and_create():
    composite = metric.create(["acc", "f1"])
    assert isinstance(composite, metric.CompositeEvalMetric)
    composite.update([LABELS], [PREDS])
    names, values = composite.get()
    assert names == ["accuracy", "f1"] and values == pytest.approx([2 / 3, 0.8])
    assert composite.get_name_value() == [("accuracy", pytest.approx(2 / 3)), ("f1", pytest.approx(0.8))]
    composite.reset()
    assert all(math.isnan(v) for v in composite.get()[1])
    for name, cls in [("accuracy", metric.Accuracy), ("ce", metric.CrossEntropy), ("top_k_acc", metric.TopKAccuracy),
                      ("RMSE", metric.RMSE), ("perplexity", metric.Perplexity), ("loss", metric.Loss)]:
        assert type(metric.create(name)) is cls
    top = metric.create("top_k_accuracy", top_k=2)
    assert top.top_k == 2
    mse = metric.MSE()
    assert metric.create(mse) is mse
    custom = metric.create(lambda label, pred: (np.abs(label - pred).sum(), label.size))
    custom.update([np.array([1.0, 2.0])], [np.array([1.5, 2.0])])
    assert custom.get() == ("custom(<lambda>)", pytest.approx(0.25))
    with pytest.raises(ValueError, match="unknown metric 'acuracy'"):
        metric.create("acuracy")
    with pytest.raises(ValueError, match="2 label arrays but 1 prediction"):
        metric.Accuracy().update([LABELS, LABELS], [PREDS])


def test_updates_with_jax_arrays_compile_nothing():
    labels, preds = jnp.asarray(LABELS), jnp.asarray(PREDS, jnp.float32)
    positive = jnp.asarray(PREDS[:, 1], jnp.float32)
    metrics = [metric.Accuracy(), metric.TopKAccuracy(2), metric.F1(), metric.MAE(), metric.CrossEntropy(),
               metric.Loss()]
    compiles = []

    def listener(name, *_, **__):
        if "backend_compile" in name:
            compiles.append(name)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        for m in metrics:
            m.update([labels], [positive] if isinstance(m, metric.MAE) else [preds])
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiles == []
    assert metrics[0].get()[1] == pytest.approx(2 / 3)


def test_accuracy_and_loss_hold_device_arrays_without_reading_them(rng):
    batches = [(rng.integers(0, 4, 8), rng.standard_normal((8, 4)).astype(np.float32)) for _ in range(21)]
    acc, mean_loss = metric.Accuracy(), metric.Loss()
    acc.batch_values = []
    device = [(jnp.asarray(y), jnp.asarray(p)) for y, p in batches]
    for y, p in device[:10]:
        acc.update([y], [p])
        mean_loss.update(None, [p])
    assert acc.num_inst == mean_loss.num_inst == 0  # held, not read: the loop does not wait for the device
    for y, p in device[10:]:  # 16 held batches are read at once
        acc.update([y], [p])
        mean_loss.update(None, [p])
    labels = np.concatenate([y for y, _ in batches])
    preds = np.concatenate([p for _, p in batches])
    assert acc.get()[1] == pytest.approx(np.mean(preds.argmax(axis=1) == labels))
    assert mean_loss.get()[1] == pytest.approx(preds.mean(), rel=1e-5)
    running = [np.mean(preds[:8 * (i + 1)].argmax(axis=1) == labels[:8 * (i + 1)]) for i in range(21)]
    assert acc.batch_values == pytest.approx(running)
    with pytest.raises(ValueError, match="8 labels but 7 predicted classes"):
        acc.update([device[0][0]], [device[0][1][:7]])  # checked when held, not when read
