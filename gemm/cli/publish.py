"""`gemm publish`: asv's HTML history, optionally usable offline (gemm.record.publish).

Checked before asv runs, as bad input (one sentence, exit 2): asv installed for this Python
(the track extra; asv is run as `python -m asv` of this Python, never another one on the
PATH), the config readable, and every recorded file readable: asv publish only logs "Error
parsing JSON" for a truncated result file, exits 0 and publishes the history without it.
"""
from __future__ import annotations

import json
from pathlib import Path

from .common import UsageError, need_modules


def add_arguments(p) -> None:
    p.add_argument("--config", default="asv.conf.json",
                   help="asv's config, whose results_dir and html_dir are used "
                   "(default asv.conf.json)")
    p.add_argument("--offline", action="store_true",
                   help="copy asv's CDN scripts next to the pages (fetched once with npm)")
    p.add_argument("--vendor", default=".asv/vendor",
                   help="where those scripts are kept (default .asv/vendor)")
    p.add_argument("--verdicts", default=None,
                   help="the gate's kept verdicts (default: verdicts/ beside the config)")
    p.add_argument("--newest", type=int, default=10,
                   help="commits on the dashboard, newest first (default 10)")


def run(args) -> int:
    need_modules("asv")
    check_recorded(args.config)
    from ..record import publish
    return publish.main(args)


def check_recorded(config: str) -> None:
    """UsageError naming the first file asv would skip or trip on: the config, results/
    benchmarks.json, a machine.json, a result file that is not JSON or not asv's version-2
    layout."""
    from ..store.history import HistoryError, read_run
    conf = _json(Path(config), "asv's config")
    if not isinstance(conf, dict):
        raise UsageError(f"{config} is not an asv config (a JSON object)")
    results = Path(config).parent / conf.get("results_dir", "results")
    if not results.is_dir():
        return   # nothing recorded: asv says so itself
    if (results / "benchmarks.json").exists():
        _json(results / "benchmarks.json", "asv's benchmark list")
    for machine in sorted(p for p in results.iterdir() if p.is_dir()):
        for path in sorted(machine.glob("*.json")):
            if path.name == "machine.json":
                _json(path, "asv's machine file")
                continue
            try:
                read_run(path)
            except HistoryError as exc:
                raise UsageError(f"{exc}; asv publish would leave that run out of the history: "
                                 f"restore it (git checkout -- {path}) or move it aside") from None


def _json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist ({what})") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} ({what}) is not readable JSON: {exc}") from None
