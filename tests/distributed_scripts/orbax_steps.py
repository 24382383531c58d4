"""The training step shared by the orbax checkpoint scripts."""
import hybrid
from hybrid import autograd, distributed, loss


def stepper(net, trainer, mesh):
    """A hybrid.compile training step fed with batches split over ``mesh`` (with several processes, each
    passes its own part of the batch)."""
    loss_fn = loss.SoftmaxCrossEntropyLoss()

    def step(x, y):
        with autograd.record():
            out = loss_fn(net(x), y)
        autograd.backward(out)
        trainer.step(x.shape[0])

    compiled = hybrid.compile(step)
    return lambda x, y: compiled(*distributed.shard_batch((x, y), mesh))
