"""Vision datasets and NumPy image transforms (mirrors ``gluon.data.vision``)."""
from . import transforms
from ._decode import decode_image
from .datasets import CIFAR10, CIFAR100, MNIST, FashionMNIST
from .folder_datasets import ImageFolderDataset, ImageListDataset
from .record_datasets import ImageRecordDataset

__all__ = ["transforms", "decode_image", "MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "ImageRecordDataset",
           "ImageFolderDataset", "ImageListDataset"]
