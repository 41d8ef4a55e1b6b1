"""The verifier's offline commands, ``edgeroute cache calibrate`` and ``edgeroute cache
train-verifier``: ``edgeroute.cli`` adds them to the edge's ``cache_app``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from edge.cli import DataDirOpt, PairsOpt, _data_dir, _fail
from edge.config import CacheSettings
from models import EdgerouteError

if TYPE_CHECKING:  # heavy modules load inside the commands that use them
    from edge.cache.calibration import Calibration
    from edge.cache.judged import Judged, Pair
    from edge.embedder import Embedder

JudgedOpt = Annotated[
    Optional[Path], typer.Option(
        "--judged", help="judged pairs: a JSONL file or a directory [default: data/judged/ of the source checkout]"
    ),
]
BudgetOpt = Annotated[
    Optional[float], typer.Option("--max-wrong-rate", min=0.0, max=1.0, help="error budget [default: the setting]")
]


CalExtraOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--calibration-extra",
        help="judged pairs for calibration only [default: data/judged/calibration_extra/, unless --judged is given]",
    ),
]
NoCalExtraOpt = Annotated[bool, typer.Option("--no-calibration-extra", help="calibrate without them")]
ConfidenceOpt = Annotated[
    Optional[float],
    typer.Option("--confidence", min=0.0, max=1.0, help="confidence that the budget holds [default: the setting]"),
]
BoundOpt = Annotated[
    Optional[str], typer.Option("--bound", help="wilson or clopper-pearson [default: the setting]")
]


def _budget_settings(max_wrong_rate: float | None, confidence: float | None, bound: str | None) -> CacheSettings:
    given = {"max_wrong_rate": max_wrong_rate, "budget_confidence": confidence, "budget_bound": bound}
    try:
        return CacheSettings(**{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:  # pydantic's ValidationError: a bad --bound or --confidence
        raise typer.BadParameter(str(exc)) from exc


def _calibration_extra(judged: Path | None, given: Path | None, off: bool) -> list[Judged]:
    """The repository's calibration_extra pairs go with its judged set: another --judged set takes
    only the extra pairs named with it."""
    from edge.cache.judged import load_calibration_extra

    if off or (given is None and judged is not None):
        return []
    return load_calibration_extra(given)


def _print_point(point: Calibration, budget: float, target: float | None = None) -> None:
    target = budget if target is None else target  # the share of the budget the replay was held to
    typer.echo(f"{'threshold':>10}{'served':>8}{'precision':>11}{'recall':>9}")
    for row in point.curve:
        typer.echo(f"{row['threshold']:>10.2f}{row['served']:>8}{row['precision']:>11.3f}{row['recall']:>9.3f}")
    if point.threshold is None:
        typer.echo(f"no threshold keeps wrong hits under {target:g} ({budget:g} x calibration_margin) on "
                   f"{point.pairs} calibration queries")
        return
    typer.echo(
        f"max_wrong_rate {budget} (the calibration replay held to {target:g}) at {100 * point.confidence:.1f}% "
        f"confidence ({point.bound}): threshold "
        f"{point.threshold:.4f}; on the calibration replay ({point.pairs} queries, {point.positives} answerable) "
        f"it serves {point.served} (expected hit rate {point.hit_rate:.3f}) at precision {point.precision:.3f}, "
        f"wrong-rate upper bound {point.wrong_bound:.4f}, recall of answerable {point.recall:.3f}"
    )


def calibrate(
    judged: JudgedOpt = None,
    max_wrong_rate: BudgetOpt = None,
    verifier_dir: Annotated[
        Optional[Path], typer.Option("--verifier-dir", help="verifier files [default: the shipped ones]")
    ] = None,
    write: Annotated[
        bool, typer.Option("--write", help="store the new calibration in --verifier-dir's verifier.json")
    ] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="also write the result as JSON")] = None,
    calibration_extra: CalExtraOpt = None,
    no_calibration_extra: NoCalExtraOpt = False,
    confidence: ConfidenceOpt = None,
    bound: BoundOpt = None,
) -> None:
    """Replay the judged calibration part (and calibration_extra); pick the threshold that meets the
    error budget with confidence."""
    from edge.cache.judged import calibration_items, load_judged, split_judged
    from edge.cache.verifier import Verifier, operating_point
    from edge.embedder import Embedder

    from .verifier import calibrate as fit_calibration

    settings = _budget_settings(max_wrong_rate, confidence, bound)
    if write and verifier_dir is None:
        # The shipped verifier lives in the installed package, which is never written to.
        raise typer.BadParameter("--write needs --verifier-dir (the installed verifier is read-only)")
    try:
        verifier = Verifier.load(verifier_dir) if verifier_dir else Verifier.shipped()
        judged_items = load_judged(judged)
        extra = _calibration_extra(judged, calibration_extra, no_calibration_extra)
        items = calibration_items(judged_items, extra)
        if not items:
            typer.echo("no judged pairs in the calibration part", err=True)
            raise typer.Exit(1)
        verifier = fit_calibration(verifier, items, settings, Embedder.load(settings))
        assert verifier.replay is not None
        target = settings.max_wrong_rate * settings.calibration_margin  # as the node calibrates its rule
        point = operating_point(verifier.replay, target, settings.budget_confidence, settings.budget_bound)
        if write:
            own = len(split_judged(judged_items)["calibration"])
            verifier.meta["judged"] = {**verifier.meta.get("judged", {}), "calibration": own,
                                       "calibration_extra": len(items) - own}
            verifier.meta["operating_point"] = {k: v for k, v in point.as_dict().items() if k != "curve"}
            assert verifier_dir is not None
            verifier.save_meta(verifier_dir)
    except EdgerouteError as exc:
        raise _fail(exc) from exc
    _print_point(point, settings.max_wrong_rate, target)
    if out:
        out.write_text(json.dumps(point.as_dict(), indent=2) + "\n", encoding="utf-8")
    if point.threshold is None:
        raise typer.Exit(1)


def _refit_index(rows: list[Pair], embedder: Embedder, out_dir: Path, seed: int) -> None:
    """k-means centroids of the train questions' embeddings (new cache files copy them in)."""
    from edge.cache import split_pairs
    from edge.cache.index import save_index, train_index

    from .verifier import embed_all

    train_rows, _ = split_pairs(rows)
    texts = list(dict.fromkeys(t for p in train_rows for t in (p.a, p.b)))
    save_index(train_index(embed_all(embedder, texts), seed=seed), out_dir / "index.npz")
    typer.echo(f"refit the vector index on {len(texts)} train questions: {out_dir}/index.npz")


def train_verifier(
    pairs: PairsOpt,
    judged: JudgedOpt = None,
    out_dir: Annotated[
        Optional[Path], typer.Option(help="where the verifier files go [default: <data_dir>/verifier]")
    ] = None,
    data_dir: DataDirOpt = None,
    steps1: Annotated[Optional[int], typer.Option(min=1, help="phase-1 steps (QQP + generated)")] = None,
    steps2: Annotated[Optional[int], typer.Option(min=1, help="phase-2 steps (+ judged train part)")] = None,
    layers: Annotated[Optional[int], typer.Option(min=1, max=6, help="MiniLM layers kept")] = None,
    batch: Annotated[Optional[int], typer.Option(min=1, help="pairs per step")] = None,
    pos_weight: Annotated[
        Optional[float], typer.Option(min=0.01, max=1.0, help="phase 2's loss weight of a servable pair")
    ] = None,
    generated: Annotated[int, typer.Option(min=0, help="generated pairs (2/3 hard negatives)")] = 12000,
    seed: Annotated[int, typer.Option(help="phase 1's seed (phase 2 uses seed + 1)")] = 0,
    threads: Annotated[int, typer.Option(min=1, help="torch threads")] = 2,
    phase1_dir: Annotated[
        Optional[Path], typer.Option(help="keep phase 1's weights here; reused when already there")
    ] = None,
    max_wrong_rate: BudgetOpt = None,
    index: Annotated[bool, typer.Option("--index", help="also refit the IVF centroids (index.npz)")] = False,
    train_extra: Annotated[
        Optional[Path],
        typer.Option("--train-extra", help="judged pairs for training only [default: data/judged/train_extra/]"),
    ] = None,
    no_train_extra: Annotated[bool, typer.Option("--no-train-extra", help="train without them")] = False,
    calibration_extra: CalExtraOpt = None,
    no_calibration_extra: NoCalExtraOpt = False,
) -> None:
    """Fine-tune the cross-encoder verifier (seeded), export it to ONNX INT8, calibrate it."""
    from dataclasses import replace

    from edge.cache import load_pairs
    from edge.cache.judged import load_judged, load_train_extra
    from edge.embedder import Embedder

    from .verifier import PHASE1, PHASE2, train

    settings = _budget_settings(max_wrong_rate, None, None)
    common = {"threads": threads} | ({"layers": layers} if layers else {}) | ({"batch": batch} if batch else {})
    phase1 = replace(PHASE1, seed=seed, **common, **({"steps": steps1} if steps1 else {}))
    phase2 = replace(PHASE2, seed=seed + 1, **common, **({"steps": steps2} if steps2 else {}),
                     **({"pos_weight": pos_weight} if pos_weight is not None else {}))

    def progress(step: int, loss: float) -> None:
        if step % 25 == 0:
            typer.echo(f"  step {step}  loss {loss:.4f}")

    out_dir = out_dir or _data_dir(data_dir) / "verifier"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise typer.BadParameter(f"cannot create {out_dir}: {exc}") from exc
    try:
        rows = load_pairs(pairs)
        items = load_judged(judged)
        extra = [] if no_train_extra else load_train_extra(train_extra)
        cal_extra = _calibration_extra(judged, calibration_extra, no_calibration_extra)
        embedder = Embedder.load(settings)
        trained = train(rows, items, out_dir, embedder=embedder, phase1=phase1, phase2=phase2,
                        phase1_dir=phase1_dir, settings=settings, n_generated=generated, progress=progress,
                        train_extra=extra, calibration_extra=cal_extra)
        if index:
            _refit_index(rows, embedder, out_dir, seed)
    except EdgerouteError as exc:
        raise _fail(exc) from exc
    size = sum((out_dir / f).stat().st_size for f in ("verifier.onnx", "verifier-tokenizer.json", "verifier.json"))
    typer.echo(f"trained in {trained.seconds:.0f} s on {trained.counts}; wrote {out_dir} ({size / 1e6:.1f} MB)")
    _print_point(trained.point, settings.max_wrong_rate)
