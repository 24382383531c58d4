"""Image transforms on NumPy arrays (mirrors ``gluon.data.vision.transforms``).

Images are HWC arrays (``(H, W)`` and batches ``(N, H, W, C)`` work where it
makes sense) until ``ToTensor`` turns them into CHW float32. Every transform is
a plain picklable callable on NumPy arrays (Pillow, when installed, speeds up
resizing of uint8 images), so it can run in DataLoader worker processes. Random
transforms draw from ``hybrid.data.transform_rng()``.
"""
from ._color import (RandomBrightness, RandomColorJitter, RandomContrast, RandomHue, RandomLighting,
                     RandomSaturation)
from ._compose import Compose, HybridCompose, RandomApply
from ._geometry import (CenterCrop, CropResize, RandomCrop, RandomFlipLeftRight, RandomFlipTopBottom,
                        RandomResizedCrop, Resize)
from ._rotation import RandomRotation
from ._tensor import Cast, Normalize, ToTensor

__all__ = ["Compose", "HybridCompose", "RandomApply", "Cast", "ToTensor", "Normalize", "Resize", "CenterCrop",
           "RandomResizedCrop", "RandomCrop", "CropResize", "RandomFlipLeftRight", "RandomFlipTopBottom",
           "RandomRotation", "RandomBrightness", "RandomContrast", "RandomSaturation", "RandomHue",
           "RandomColorJitter", "RandomLighting"]
