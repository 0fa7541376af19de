"""Training a small GPT on one CPU: the loop behind the capstone (chapter 9).

``train(model, train_ids, val_ids, config)`` is the standard recipe, small enough to read:
    * random windows of the token stream, drawn by a ``torch.Generator`` seeded from the
      configuration (the data order repeats exactly);
    * AdamW with decoupled weight decay on matrices and embeddings only;
    * a linear warmup, then a cosine decay of the learning rate;
    * global gradient-norm clipping;
    * a tqdm progress bar, and the held-out loss at regular steps (``evaluate``, the same
      windows every time).

Shape letters: B windows per batch, T tokens per window (``context``), V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.gpt import GPT
from lib.validation import positive_int

__all__ = ["TrainConfig", "learning_rate", "random_batch", "evaluate", "train"]


@dataclass
class TrainConfig:
    steps: int = 600
    batch_size: int = 16
    context: int = 128  # tokens per training window
    lr: float = 3e-3  # peak learning rate, reached after the warmup
    min_lr: float = 3e-4  # where the cosine ends
    warmup_steps: int = 30
    weight_decay: float = 0.1  # on matrices and embeddings only
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0  # max global gradient norm (0 disables)
    eval_every: int = 100
    eval_batches: int = 8  # held-out windows per evaluation, in batches of batch_size
    seed: int = 0  # data order (and dropout, if any)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "context", "eval_every", "eval_batches"):
            positive_int(f"TrainConfig.{name}", getattr(self, name))
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"TrainConfig needs 0 <= min_lr <= lr, got min_lr={self.min_lr}, lr={self.lr}")
        if self.warmup_steps < 0 or self.grad_clip < 0:
            raise ValueError("TrainConfig: warmup_steps and grad_clip must be >= 0")


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warmup from 0 to ``lr`` over ``warmup_steps``, then a cosine down to ``min_lr`` at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    decay_steps = max(1, config.steps - 1 - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / decay_steps)  # 0 -> 1
    return config.min_lr + 0.5 * (config.lr - config.min_lr) * (1 + math.cos(math.pi * progress))


def _check_ids(name: str, ids: object, context: int) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1 or ids.dtype.is_floating_point:
        shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"{name} must be a 1-D tensor of token ids, got {shape}")
    if ids.numel() < context + 1:
        raise ValueError(f"{name} has {ids.numel()} tokens; a window of context={context} needs {context + 1}")
    return ids.long()


def random_batch(
    ids: torch.Tensor, *, context: int, batch_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of a token stream: inputs (B, context) and targets shifted by one (B, context)."""
    ids = _check_ids("ids", ids, context)
    starts = torch.randint(0, ids.numel() - context, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(context + 1)  # (context + 1,)
    windows = ids[starts[:, None] + offsets[None, :]]  # (B, context + 1)
    return windows[:, :-1], windows[:, 1:]


@torch.no_grad()
def evaluate(model: GPT, ids: torch.Tensor, *, context: int, batch_size: int, max_batches: int | None = None) -> float:
    """Mean next-token cross-entropy (nats) over consecutive, non-overlapping windows of ``ids``.

    Deterministic: the same windows every call (from the start of ``ids``), so two
    evaluations differ only because the model did.
    """
    ids = _check_ids("ids", ids, context)
    n_windows = (ids.numel() - 1) // context
    if max_batches is not None:
        n_windows = min(n_windows, max_batches * batch_size)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for first in range(0, n_windows, batch_size):
        starts = torch.arange(first, min(first + batch_size, n_windows)) * context  # (b,)
        windows = ids[starts[:, None] + torch.arange(context + 1)[None, :]].to(device)  # (b, context + 1)
        logits = model(windows[:, :-1])  # (b, context, V)
        loss = F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten(), reduction="sum")
        total += float(loss)
        count += windows[:, 1:].numel()
    model.train(was_training)
    return total / count


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices and embeddings; leave norm weights and biases alone (they set scales)."""
    seen: set[int] = set()
    decay, no_decay = [], []
    for param in model.parameters():
        if id(param) in seen or not param.requires_grad:
            continue  # a tied weight is listed once
        seen.add(id(param))
        (decay if param.ndim >= 2 else no_decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def train(
    model: GPT, train_ids: torch.Tensor, val_ids: torch.Tensor, config: TrainConfig, *, progress: bool = True
) -> dict:
    """Train ``model`` in place on random windows of ``train_ids``; evaluate on ``val_ids``.

    AdamW (decoupled weight decay on matrices only), linear warmup then cosine decay,
    global gradient-norm clipping, a tqdm bar, and a ``torch.Generator`` seeded with
    ``config.seed`` for the data order, so a run repeats exactly on the same machine.
    Returns the history: per-step training loss and learning rate, and the held-out loss
    at step 0, every ``eval_every`` steps and at the end (with ``val_steps``), plus the
    configuration as a dict (picklable: ``lib.trained.cached`` can store it), e.g.

        def run():
            history = train(model, train_ids, val_ids, train_config)
            return {"state_dict": model.state_dict(), **history}

        result = cached("tiny-gpt", {**asdict(model_config), **asdict(train_config)}, run)
        model.load_state_dict(result["state_dict"])
    """
    from tqdm.auto import tqdm

    train_ids = _check_ids("train_ids", train_ids, config.context)
    val_ids = _check_ids("val_ids", val_ids, config.context)
    if config.context > model.config.max_len:
        raise ValueError(f"context={config.context} exceeds the model's max_len={model.config.max_len}")
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(config.seed)  # the data order
    optimizer = torch.optim.AdamW(
        _param_groups(model, config.weight_decay), lr=config.lr, betas=(config.beta1, config.beta2)
    )
    history: dict = {"train_loss": [], "lr": [], "val_steps": [], "val_loss": [], "config": asdict(config)}

    def record_eval(step: int) -> None:
        loss = evaluate(model, val_ids, context=config.context, batch_size=config.batch_size,
                        max_batches=config.eval_batches)  # fmt: skip
        history["val_steps"].append(step)
        history["val_loss"].append(loss)

    with torch.random.fork_rng(devices=[]):  # dropout draws from the global RNG: seed it, then restore it
        torch.manual_seed(config.seed)
        model.train()
        record_eval(0)
        bar = tqdm(range(config.steps), disable=not progress, desc="training", leave=False)
        for step in bar:
            lr = learning_rate(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            inputs, targets = random_batch(
                train_ids, context=config.context, batch_size=config.batch_size, generator=generator
            )
            logits = model(inputs.to(device))  # (B, context, V)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip > 0:
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            history["train_loss"].append(loss.item())
            history["lr"].append(lr)
            if (step + 1) % config.eval_every == 0 or step + 1 == config.steps:
                record_eval(step + 1)
                bar.set_postfix(train=f"{loss.item():.3f}", val=f"{history['val_loss'][-1]:.3f}")
        bar.close()
    model.eval()
    return history
