"""duet's softmax family as differentiable functions: the same functions as
duet.softmax / duet.log_softmax, which are differentiable themselves (kept
for code written against earlier versions).
"""
from ._require_torch import torch  # noqa: F401 (an ImportError naming torch where it is absent)
from ._ops import log_softmax, softmax

__all__ = ["softmax", "log_softmax"]
