"""The command line on top of the stages (`gemm ...`, `python -m gemm ...`)."""
from .main import build_parser, main  # noqa: F401
