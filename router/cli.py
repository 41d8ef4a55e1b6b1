"""`edgeroute router ...` commands: train, calibrate, eval, replay."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from models import EdgerouteError

from .settings import load_settings

router_app = typer.Typer(help="The routing policy: train, calibrate, evaluate, replay.", no_args_is_help=True)

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="TOML config file")]
DataDirOpt = Annotated[Optional[Path], typer.Option("--data-dir", help="data directory (its telemetry database)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]
DbOpt = Annotated[Optional[Path], typer.Option(help="telemetry database [default: <data-dir>/<telemetry.db_file>]")]


def _fail(exc: EdgerouteError) -> typer.Exit:
    typer.echo(f"error: {exc.message}", err=True)
    return typer.Exit(2)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _print_rows(rows: list[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        typer.echo(f"{key:<{width}}  {value}")


@router_app.command()
def train(
    prompts: Annotated[Optional[Path], typer.Option(help="labeled JSONL [default: the shipped set]")] = None,
    out: Annotated[Optional[Path], typer.Option(help="weights file [default: the shipped one]")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Retrain the complexity classifier from a labeled prompt set (held-out split kept aside)."""
    from .training.embed import embed_texts
    from .training.train import train as run_train

    try:
        report = run_train(embed_texts, prompts, out)
    except EdgerouteError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps(asdict(report), indent=2))
        return
    _print_rows(
        [
            ("prompts", f"{report.prompts} ({report.n_train} train, {report.n_test} held out)"),
            ("C (5-fold CV)", f"{report.C:g} (CV accuracy {report.cv_accuracy:.3f})"),
            ("train accuracy", f"{report.train_accuracy:.3f}"),
            ("held-out accuracy", f"{report.test_accuracy:.3f}"),
            ("time", f"embed {report.embed_s:.1f} s, fit {report.fit_s:.1f} s"),
            ("weights", report.out),
        ]
    )


@router_app.command()
def calibrate(
    target_cloud_share: Annotated[float, typer.Option(help="share of requests to send to the cloud, 0..1")],
    prompts: Annotated[
        Optional[Path],
        typer.Option(help="prompt set, JSONL or one per line [default: shipped held-out split]"),
    ] = None,
    from_telemetry: Annotated[bool, typer.Option(help="use the logged traffic as the prompt set")] = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pick the complexity threshold that sends the requested share to the cloud."""
    from .training.calibrate import logged_scores, threshold_for_share

    try:
        settings = load_settings(config, data_dir=data_dir)
        if from_telemetry:
            from .training.replay import read_decisions_db

            source = str(db or settings.data_dir / settings.telemetry.db_file)
            scores = logged_scores(read_decisions_db(Path(source)))
            if not scores:
                typer.echo(
                    f"error: {source} holds no routed, unhinted, non-private request with a score", err=True
                )
                raise typer.Exit(2)
        else:
            from .policy.classifier import load_classifier
            from .training.dataset import SHIPPED_PROMPTS, load_prompts, select
            from .training.embed import embed_texts

            chosen = load_prompts(prompts, require_labels=False)
            if prompts is None:
                # The shipped weights were fit on the train split; its scores are overconfident.
                chosen = select(chosen, "test")
            source = str(prompts) if prompts else f"{SHIPPED_PROMPTS} (held-out split)"
            texts = [p.text for p in chosen]
            scores = (
                load_classifier(settings.routing.complexity.classifier_path).score_batch(embed_texts(texts)).tolist()
            )
        result = threshold_for_share(scores, target_cloud_share)
    except EdgerouteError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps({"source": source, **asdict(result)}, indent=2))
        return
    _print_rows(
        [
            ("calibrated on", f"{source} ({result.n} prompts)"),
            ("target cloud share", f"{result.target_share:.1%}"),
            ("achieved", f"{result.achieved_share:.1%}"),
            ("threshold", f"{result.threshold:.6f}"),
        ]
    )
    typer.echo(f"\nset it in the config file:\n  [routing.complexity]\n  threshold = {result.threshold!r}")
    typer.echo(f"or the environment:\n  EDGEROUTE_ROUTING__COMPLEXITY_THRESHOLD={result.threshold!r}")


@router_app.command("eval")
def evaluate_cmd(
    prompts: Annotated[Optional[Path], typer.Option(help="labeled JSONL [default: the shipped set]")] = None,
    split: Annotated[
        Optional[str], typer.Option(help="train, test or all [default: test for the shipped set, else all]")
    ] = None,
    out: Annotated[
        Optional[Path], typer.Option(help="JSON report [default: <data-dir>/router-eval.json]")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, help="timing passes over the prompts")] = 20,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Accuracy against labels, cloud share and decision latency of the configured policy."""
    from .policy.classifier import load_classifier
    from .training.dataset import load_prompts, select
    from .training.embed import count_tokens, embed_texts
    from .training.evaluate import NodeState, evaluate
    from .policy.policies import build_policy
    from .policy.privacy import PrivacyDetector

    split = split or ("test" if prompts is None else "all")
    if split not in ("train", "test", "all"):
        typer.echo(f"error: --split must be train, test or all, not {split!r}", err=True)
        raise typer.Exit(2)
    try:
        settings = load_settings(config, data_dir=data_dir)
        chosen = select(load_prompts(prompts), split)  # type: ignore[arg-type]
        if not chosen:
            typer.echo(f"error: the {split} split is empty", err=True)
            raise typer.Exit(2)
        texts = [p.text for p in chosen]
        clf = load_classifier(settings.routing.complexity.classifier_path)
        policy = build_policy(settings.routing)
        state = NodeState(
            edge_max_queue=settings.edge.max_queue,
            n_ctx=settings.edge.n_ctx,
            default_max_tokens=settings.edge.default_max_tokens,
        )
        report = evaluate(
            chosen,
            embed_texts(texts),
            count_tokens(texts),
            clf,
            policy,
            threshold=settings.routing.complexity.threshold,
            state=state,
            repeats=repeats,
            privacy=PrivacyDetector.from_settings(settings.routing),
        )
    except EdgerouteError as exc:
        raise _fail(exc) from exc
    out = out or settings.data_dir / "router-eval.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"prompts": str(prompts or "shipped"), "split": split, **asdict(report)}, indent=2)
    )
    _print_rows(
        [
            (
                "prompts",
                f"{prompts or 'shipped set'} ({split} split, {report.n} prompts, {report.labeled} labeled)",
            ),
            ("policy", f"{report.policy} (complexity threshold {report.threshold:g})"),
            ("accuracy", _num(report.accuracy)),
            ("cloud precision", _num(report.cloud_precision)),
            ("cloud recall", _num(report.cloud_recall)),
            ("cloud share", f"{report.cloud_share:.1%} (labels: {_num(report.label_cloud_share)})"),
            (
                "decision p50",
                f"{report.decision_us_p50 / 1000:.4f} ms (target <= 0.5 ms, beyond the embedding)",
            ),
            ("decision p95", f"{report.decision_us_p95 / 1000:.4f} ms ({report.decision_samples} samples)"),
            ("reasons", ", ".join(f"{k} {v}" for k, v in report.reasons.items())),
            ("report", str(out)),
        ]
    )
    for m in report.misrouted:
        typer.echo(f"  misrouted ({m['label']} -> {m['target']}, score {m['score']:.3f}): {m['text'][:100]}")


@router_app.command()
def replay(
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0, help="complexity threshold to replay with")],
    db: DbOpt = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="only the newest N decisions")] = None,
    edge_cost_per_1k: Annotated[float, typer.Option(min=0.0, help="edge price per 1k tokens")] = 0.0,
    cloud_cost_per_1k: Annotated[float, typer.Option(min=0.0, help="cloud price per 1k tokens")] = 0.002,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-decide the logged traffic with another threshold; print how shares, latency and cost change."""
    from .policy.policies import build_policy
    from .telemetry.config import PriceSettings
    from .training.replay import format_report, read_decisions_db
    from .training.replay import replay as run_replay

    try:
        settings = load_settings(config, data_dir=data_dir)
        complexity = settings.routing.complexity.model_copy(update={"threshold": threshold})
        routing = settings.routing.model_copy(update={"complexity": complexity})
        records = read_decisions_db(Path(db or settings.data_dir / settings.telemetry.db_file), limit)
        prices = PriceSettings(edge_per_1k=edge_cost_per_1k, cloud_prompt_per_1k=cloud_cost_per_1k,
                               cloud_completion_per_1k=cloud_cost_per_1k)
        report = run_replay(records, build_policy(routing), prices)
    except EdgerouteError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps({"threshold": threshold, **report.as_dict()}, indent=2))
        return
    typer.echo(format_report(report, threshold))
