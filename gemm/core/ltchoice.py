"""The baseline's algorithm per GPU model, as data: baselines/<gpu>-choice.toml, made by
`gemm baseline --choose` from gemm.baseline/1 documents (gemm.measure.baseline) and read by
the timed path (gemm.cuda.basecall) and by the benchmark versions (gemm.core.metrics).

Rule: for a configuration x problem, a cuBLASLt candidate is chosen when, on every recorded
GPU of the model that measured that problem, the same algorithm (every configuration
attribute and the compute type equal) passed the check, was faster than today's call in
every round (verdict "faster") and its median paired ratio was at most 1 - MIN_GAIN of the
problem's size class; among those, the one with the lowest worst ratio over the GPUs. Else
today's call stays, with why. A problem the file does not list runs today's call.

The file:
  schema = "gemm.baseline-choice/1", gpu, slug, rule, made_by, sources = [{file, identity,
  date, cublaslt}], then one [[entry]] per configuration x problem measured: config, size,
  M, N, K, call ("cublaslt" | "today"), why; for "cublaslt" also compute, workspace_bytes
  (given to every launch), needs_bytes (the most the heuristic asked for),
  algo = {id, tile, stages, splitk, reduction, swizzle, custom, inner_shape, cluster},
  evidence = [{identity, rank, ratio, ratio_min, ratio_max}].
"""
from __future__ import annotations

import enum
import hashlib
import json
import tomllib
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path

from .machines import gpu_slug
from .problem import Problem, SizeClass

SCHEMA = "gemm.baseline-choice/1"
SOURCE_SCHEMA = "gemm.baseline/1"
# twice the gate's floors (gemm.track.gate.MIN_EFFECT): a switch of baseline restarts the
# % of cuBLAS series, so it must gain more than the smallest change the gate calls
MIN_GAIN = {SizeClass.LARGE: 0.02, SizeClass.MEDIUM: 0.06, SizeClass.SMALL: 0.10}
RULE = ("cuBLASLt's candidate where, on every recorded GPU, the same algorithm was correct, "
        "faster than today's call in every round and at least MIN_GAIN faster in the median "
        "(2 % from 2048^3 on, 6 % from 1000^3, 10 % below); the lowest worst ratio wins; "
        "else today's call. Problems not listed: today's call.")


def baselines_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "baselines"


class ChoiceError(ValueError):
    """A gemm.baseline/1 document or choice file that cannot be used; one sentence."""


class Call(enum.Enum):
    TODAY = "today"
    CUBLASLT = "cublaslt"


@dataclass(frozen=True)
class AlgoConfig:
    """cublasLtMatmulAlgoConfigAttributes_t as gemm.cuda.cublaslt reads them (enums by name
    where the bindings know them, e.g. tile "128x128", else their ids)."""
    id: int
    tile: str | int | None = None
    stages: str | int | None = None
    splitk: int | None = None
    reduction: int | None = None
    swizzle: int | None = None
    custom: int | None = None
    inner_shape: int | None = None
    cluster: str | int | None = None

    @classmethod
    def from_dict(cls, d: dict) -> "AlgoConfig":
        known = {f.name for f in fields(cls)}
        extra = set(d) - known
        if extra or d.get("id") is None:
            raise ChoiceError(f"an algorithm needs an id and only {', '.join(sorted(known))}, "
                              f"got {json.dumps(d, sort_keys=True)}")
        return cls(**d)

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def label(self) -> str:
        a = self.as_dict()
        return " ".join([f"algo {self.id}"] + [f"{n} {a[k]}" for k, n in (
            ("tile", "tile"), ("stages", "stages"), ("splitk", "splitK"),
            ("reduction", "reduction"), ("swizzle", "swizzle"), ("custom", "custom"),
            ("cluster", "cluster")) if k in a])


@dataclass(frozen=True)
class Evidence:
    identity: str
    rank: int
    ratio: float
    ratio_min: float
    ratio_max: float


@dataclass(frozen=True)
class Choice:
    config: str
    size: str
    M: int
    N: int
    K: int
    call: Call
    why: str
    compute: str | None = None
    workspace_bytes: int = 0
    needs_bytes: int = 0
    algo: AlgoConfig | None = None
    evidence: tuple[Evidence, ...] = ()

    def as_dict(self) -> dict:
        d = {"config": self.config, "size": self.size, "M": self.M, "N": self.N, "K": self.K,
             "call": self.call.value, "why": self.why}
        if self.call is Call.CUBLASLT:
            d.update(compute=self.compute, workspace_bytes=self.workspace_bytes,
                     needs_bytes=self.needs_bytes, algo=self.algo.as_dict(),
                     evidence=[asdict(e) for e in self.evidence])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Choice":
        try:
            call = Call(d["call"])
            algo = AlgoConfig.from_dict(d["algo"]) if call is Call.CUBLASLT else None
            return cls(config=d["config"], size=str(d["size"]), M=int(d["M"]), N=int(d["N"]),
                       K=int(d["K"]), call=call, why=d.get("why", ""),
                       compute=d.get("compute"), workspace_bytes=int(d.get("workspace_bytes", 0)),
                       needs_bytes=int(d.get("needs_bytes", 0)), algo=algo,
                       evidence=tuple(Evidence(**e) for e in d.get("evidence", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise ChoiceError(f"an [[entry]] cannot be read "
                              f"({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class ChoiceFile:
    gpu: str
    slug: str
    entries: tuple[Choice, ...]
    sources: tuple[dict, ...] = ()
    made_by: str = ""
    path: str = ""

    def lookup(self, config: str, M: int, N: int, K: int) -> Choice | None:
        """The cuBLASLt choice for this problem, or None (today's call)."""
        return next((e for e in self.entries if e.call is Call.CUBLASLT and e.config == config
                     and (e.M, e.N, e.K) == (M, N, K)), None)

    def chosen(self, config: str) -> list[Choice]:
        return [e for e in self.entries if e.call is Call.CUBLASLT and e.config == config]


# --- choosing -------------------------------------------------------------------------------

def _short(identity: str | None) -> str:
    parts = (identity or "?").split()
    gpu = next((p for p in parts if p.startswith("GPU-")), parts[-1])
    return gpu[:12]


def _qualified(entry: dict, gain: float) -> dict:
    """{(compute, AlgoConfig): candidate row} of one GPU's entry that meet the rule."""
    out = {}
    for c in entry.get("candidates") or []:
        if (c.get("verdict") == "faster" and c.get("ok") and c.get("ratio") is not None
                and c["ratio"] <= 1 - gain and c.get("ratio_max") is not None
                and c["ratio_max"] < 1):
            out.setdefault((entry.get("lt_compute"), AlgoConfig.from_dict(c["algo"])), c)
    return out


def _best_ratio(entry: dict) -> float | None:
    ratios = [c["ratio"] for c in entry.get("candidates") or []
              if c.get("ok") and c.get("ratio") is not None]
    return min(ratios) if ratios else None


def _decide(group: list[tuple[dict, dict]], workspace: int) -> Choice:
    """One configuration x problem from every GPU's entry for it ([(doc, entry)])."""
    e0 = group[0][1]
    prob = Problem(e0["M"], e0["N"], e0["K"])
    gain = MIN_GAIN[prob.size_class]
    base = dict(config=e0["config"], size=e0["size"], M=prob.M, N=prob.N, K=prob.K)
    quals = [_qualified(e, gain) for _, e in group]
    common = set(quals[0]).intersection(*quals[1:])
    if not common:
        best = ", ".join(f"x{r:.3f} on {_short(d['machine'].get('identity'))}"
                         if (r := _best_ratio(e)) is not None
                         else f"none timed on {_short(d['machine'].get('identity'))}"
                         for d, e in group)
        return Choice(**base, call=Call.TODAY,
                      why=f"no algorithm at least {100 * gain:g} % faster in the median and "
                          f"faster in every round on every recorded GPU (best: {best})")
    key = min(sorted(common, key=repr), key=lambda k: max(q[k]["ratio"] for q in quals))
    rows = [q[key] for q in quals]
    ev = tuple(Evidence(_short(d["machine"].get("identity")), int(r["rank"]), r["ratio"],
                        r["ratio_min"], r["ratio_max"]) for (d, _), r in zip(group, rows))
    return Choice(**base, call=Call.CUBLASLT, compute=key[0], algo=key[1],
                  workspace_bytes=workspace,
                  needs_bytes=max(int(r.get("workspace_bytes") or 0) for r in rows),
                  evidence=ev,
                  why=f"x{max(r['ratio'] for r in rows):.3f} of today's time or better on "
                      f"{len(rows)} GPU(s), faster in every round")


def choose(docs: list[tuple[str, dict]], made_by: str = "") -> ChoiceFile:
    """The choice file of the GPU model that measured `docs` ([(file name, gemm.baseline/1)])."""
    if not docs:
        raise ChoiceError("--choose needs at least one gemm.baseline/1 file")
    gpus = set()
    for name, doc in docs:
        if not isinstance(doc, dict) or doc.get("schema") != SOURCE_SCHEMA:
            raise ChoiceError(f"{name} is not a {SOURCE_SCHEMA} document")
        if doc.get("aborted"):
            raise ChoiceError(f"{name} is from an aborted run ({doc['aborted']})")
        gpus.add((doc.get("machine") or {}).get("gpu"))
    if len(gpus) != 1 or None in gpus:
        raise ChoiceError(f"the files are from more than one GPU model or none "
                          f"({', '.join(sorted(map(str, gpus)))}); choose per model")
    spaces = {int(d["settings"]["workspace_bytes"]) for _, d in docs}
    if len(spaces) != 1:
        raise ChoiceError(f"the files gave cuBLASLt different workspaces ({sorted(spaces)}); "
                          f"measure again with one --workspace-mib")
    groups: dict = {}
    for _, doc in docs:
        for e in doc["results"]:
            if e.get("error") or not (e.get("today") or {}).get("ok"):
                continue
            groups.setdefault((e["config"], e["M"], e["N"], e["K"]), []).append((doc, e))
    gpu, workspace = gpus.pop(), spaces.pop()
    entries = tuple(_decide(groups[k], workspace) for k in sorted(groups))
    sources = tuple({"file": name, "identity": _short(d["machine"].get("identity")),
                     "date": d.get("date"), "cublaslt": d["machine"].get("cublaslt")}
                    for name, d in docs)
    return ChoiceFile(gpu=gpu, slug=gpu_slug(gpu), entries=entries, sources=sources,
                      made_by=made_by)


# --- the file -------------------------------------------------------------------------------

def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    raise ChoiceError(f"no TOML for {v!r}")


def render(cf: ChoiceFile) -> str:
    head = {"schema": SCHEMA, "gpu": cf.gpu, "slug": cf.slug, "rule": RULE,
            "made_by": cf.made_by, "sources": list(cf.sources)}
    lines = [f"# {cf.gpu}: the % of cuBLAS baseline per configuration x problem. Generated "
             f"by `gemm baseline --choose`; do not edit.", ""]
    lines += [f"{k} = {_toml(v)}" for k, v in head.items()]
    for e in cf.entries:
        lines += ["", "[[entry]]"] + [f"{k} = {_toml(v)}" for k, v in e.as_dict().items()]
    return "\n".join(lines) + "\n"


def parse(text: str, path: str = "") -> ChoiceFile:
    try:
        d = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ChoiceError(f"{path or 'the choice file'} is not TOML ({exc})") from None
    if d.get("schema") != SCHEMA or "gpu" not in d:
        raise ChoiceError(f"{path or 'the choice file'} is not a {SCHEMA} file")
    return ChoiceFile(gpu=d["gpu"], slug=d.get("slug") or gpu_slug(d["gpu"]),
                      entries=tuple(Choice.from_dict(e) for e in d.get("entry", ())),
                      sources=tuple(d.get("sources", ())), made_by=d.get("made_by", ""),
                      path=path)


def path_for(slug: str, root: Path | None = None) -> Path:
    return (root or baselines_dir()) / f"{slug}-choice.toml"


@lru_cache(maxsize=None)
def for_gpu(slug: str) -> ChoiceFile | None:
    """The committed choice file of a GPU model, or None where there is none."""
    p = path_for(slug)
    return parse(p.read_text(), str(p)) if p.is_file() else None


@lru_cache(maxsize=None)
def fingerprint(config: str) -> str | None:
    """What defines `config`'s baseline beyond today's call: a hash of every committed choice
    file's cuBLASLt entries for it (any GPU model), or None where none chooses cuBLASLt."""
    chosen = []
    for p in sorted(baselines_dir().glob("*-choice.toml")):
        cf = parse(p.read_text(), str(p))
        chosen += [{"slug": cf.slug, **e.as_dict()} for e in cf.chosen(config)]
    for c in chosen:   # the measured evidence is not part of the definition
        c.pop("evidence", None)
        c.pop("why", None)
    if not chosen:
        return None
    blob = json.dumps(chosen, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


__all__ = ["AlgoConfig", "Call", "Choice", "ChoiceError", "ChoiceFile", "Evidence",
           "MIN_GAIN", "choose", "fingerprint", "for_gpu", "parse", "render"]
