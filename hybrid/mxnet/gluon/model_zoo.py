"""``mxnet.gluon.model_zoo``: ``vision`` is hybrid's model zoo (``hybrid.model_zoo``), without pretrained weights."""
from ... import model_zoo as vision
from ...model_zoo import get_model

__all__ = ["vision", "get_model"]
