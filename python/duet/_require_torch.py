"""torch for the modules that cannot work without it, or an ImportError
that names it."""
try:
    import torch
except ImportError as e:
    raise ImportError(f"this part of duet needs torch (PyTorch), which is not importable: {e}") from e

__all__ = ["torch"]
