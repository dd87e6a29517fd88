"""`gemm publish`: asv's HTML history, optionally usable offline (gemm.record.publish)."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--config", default="asv.conf.json")
    p.add_argument("--offline", action="store_true",
                   help="copy asv's CDN scripts next to the pages (fetched once with npm)")
    p.add_argument("--vendor", default=".asv/vendor", help="where those scripts are kept")
    p.add_argument("--verdicts", default=None,
                   help="the gate's kept verdicts (default: verdicts/ beside the config)")


def run(args) -> int:
    from ..record import publish
    return publish.main(args)
