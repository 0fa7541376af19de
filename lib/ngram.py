"""Count-based baselines for the capstone: what token counts alone predict (chapter 9).

    scored_targets             which tokens of a held-out stream are scored, and after what context
    uniform_loss               every token equally likely: ln V
    unigram_loss               token frequencies of the training stream
    bigram_loss                P(token | previous token), counted on the training stream
    baseline_losses            the three above on the capstone's data, in one dict
    NGramCounts, ngram_loss    the counts of every order up to n, and the loss of one order
    ngram_ladder               n-grams of several orders, each smoothed toward the order below
    entropy_floor              the grammar's own loss on the held-out text, per token
    bigram_next_probabilities  what the training counts say follows a prompt's last token

The baselines are scored on exactly the tokens ``lib.training.evaluate`` scores: the
targets of the held-out windows. A unigram model predicts every token from training
counts; a bigram model from the previous token's counts (add-k smoothed). So a baseline
and the trained GPT of ``lib.capstone`` are compared token for token, on the
``CapstoneData`` that ``lib.capstone.prepare_data`` makes.

Shape letters: V vocabulary size; ids are 1-D token streams.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from lib.validation import positive_int

if TYPE_CHECKING:
    from lib.capstone import CapstoneData, CorpusConfig

__all__ = [
    "scored_targets",
    "uniform_loss",
    "unigram_loss",
    "bigram_loss",
    "baseline_losses",
    "bigram_next_probabilities",
    "NGramCounts",
    "ngram_loss",
    "ngram_ladder",
    "entropy_floor",
]


# --- Baselines on the same held-out tokens -----------------------------------------------
def scored_targets(n_tokens: int, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions (previous, target) of the tokens ``lib.training.evaluate`` scores.

    evaluate cuts the stream into consecutive windows of ``context + 1`` tokens that
    overlap by one, and scores tokens 1..context of each; a bigram needs the token before.
    """
    n_windows = (n_tokens - 1) // context
    if n_windows < 1:
        raise ValueError(f"a stream of {n_tokens} tokens holds no window of context={context}")
    window_starts = torch.arange(n_windows)[:, None] * context  # (n_windows, 1)
    targets = (window_starts + torch.arange(1, context + 1)[None, :]).flatten()  # (n_windows·context,)
    return targets - 1, targets  # (n_windows·context,) each


def _check_stream(name: str, ids: object, vocab_size: int) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1 or ids.dtype.is_floating_point:
        shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"{name} must be a 1-D integer tensor of token ids, got {shape}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"{name} holds ids outside 0..{vocab_size - 1} (vocab_size)")
    return ids.long()


def uniform_loss(vocab_size: int) -> float:
    """Cross-entropy (nats) of a guess that gives every token the same probability: ln V."""
    return math.log(positive_int("vocab_size", vocab_size))


def unigram_loss(train_ids: torch.Tensor, val_ids: torch.Tensor, vocab_size: int, *, context: int,
                 add_k: float = 1.0) -> float:  # fmt: skip
    """Held-out cross-entropy (nats) of token frequencies counted on the training stream (add-k)."""
    train_ids = _check_stream("train_ids", train_ids, vocab_size)
    val_ids = _check_stream("val_ids", val_ids, vocab_size)
    counts = torch.bincount(train_ids, minlength=vocab_size).double() + add_k  # (V,)
    log_probs = counts.log() - counts.sum().log()  # (V,)
    _, targets = scored_targets(val_ids.numel(), context)
    return float(-log_probs[val_ids[targets]].mean())


def bigram_loss(train_ids: torch.Tensor, val_ids: torch.Tensor, vocab_size: int, *, context: int,
                add_k: float = 0.01) -> float:  # fmt: skip
    """Held-out cross-entropy (nats) of P(token | previous token), counted on the training stream.

    Add-k smoothing gives unseen pairs a little mass (a pair absent from training would
    otherwise cost infinite loss).
    """
    train_ids = _check_stream("train_ids", train_ids, vocab_size)
    val_ids = _check_stream("val_ids", val_ids, vocab_size)
    pair_index = train_ids[:-1] * vocab_size + train_ids[1:]  # (n_train - 1,)
    counts = torch.bincount(pair_index, minlength=vocab_size * vocab_size).double()  # (V·V,)
    counts = counts.view(vocab_size, vocab_size) + add_k  # (V, V): row = previous token
    log_probs = counts.log() - counts.sum(dim=1, keepdim=True).log()  # (V, V)
    previous, targets = scored_targets(val_ids.numel(), context)
    return float(-log_probs[val_ids[previous], val_ids[targets]].mean())


def _bigram_loss_loop(train_ids: list[int], val_ids: list[int], vocab_size: int, *, context: int,
                      add_k: float = 0.01) -> float:  # fmt: skip
    """The plain twin of ``bigram_loss``: dictionaries and a loop (tests compare the two)."""
    pair_counts: dict[tuple[int, int], int] = {}
    row_counts = [0] * vocab_size
    for previous, token in zip(train_ids[:-1], train_ids[1:], strict=True):
        pair_counts[(previous, token)] = pair_counts.get((previous, token), 0) + 1
        row_counts[previous] += 1
    total, count = 0.0, 0
    for start in range(0, (len(val_ids) - 1) // context * context, context):
        for position in range(start + 1, start + context + 1):
            previous, token = val_ids[position - 1], val_ids[position]
            probability = (pair_counts.get((previous, token), 0) + add_k) / (row_counts[previous] + add_k * vocab_size)
            total -= math.log(probability)
            count += 1
    return total / count


def baseline_losses(data: CapstoneData, context: int) -> dict[str, float]:
    """Uniform, unigram and bigram held-out losses on the tokens the model is scored on.

    The bigram's smoothing is the best of a few values *on the held-out split itself*,
    which flatters the baseline: the model's margin over it is, if anything, understated.
    """
    vocab_size = len(data.tokenizer)
    bigram = min(
        bigram_loss(data.train_ids, data.val_ids, vocab_size, context=context, add_k=add_k)
        for add_k in (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
    )
    return {
        "uniform": uniform_loss(vocab_size),
        "unigram": unigram_loss(data.train_ids, data.val_ids, vocab_size, context=context),
        "bigram": bigram,
    }


def bigram_next_probabilities(data: CapstoneData, prompt: str, candidates: list[str]) -> dict[str, float]:
    """What the training counts say: P(candidate | the prompt's last token), unsmoothed.

    The count of (last token, candidate) over the count of the last token followed by
    anything, in the training stream; each candidate must be a single token.
    """
    tokenizer = data.tokenizer
    previous = tokenizer.encode(prompt)[-1]
    ids = data.train_ids
    followers = ids[1:][ids[:-1] == previous]  # (n,) every token that follows `previous`
    if followers.numel() == 0:
        raise ValueError(f"the prompt's last token {tokenizer.decode([previous])!r} never precedes another")
    probabilities = {}
    for text in candidates:
        token = tokenizer.encode(text)
        if len(token) != 1:
            raise ValueError(f"candidate {text!r} is {len(token)} tokens {token}; it must be exactly one")
        probabilities[text] = float((followers == token[0]).sum()) / followers.numel()
    return probabilities


# --- How far back each structure needs to look: the n-gram ladder and the entropy floor ---------
class NGramCounts:
    """Counts of every n-gram up to ``max_order`` in a training stream, for ``ngram_loss``.

    ``table[m][context]`` maps the next token to its count after ``context`` (a tuple of
    m - 1 ids); ``totals[m][context]`` is the row's sum.
    """

    def __init__(self, train_ids: torch.Tensor, vocab_size: int, max_order: int) -> None:
        max_order = positive_int("max_order", max_order)
        ids = _check_stream("train_ids", train_ids, vocab_size).tolist()
        self.vocab_size, self.max_order, self.n_train = vocab_size, max_order, len(ids)
        self.table: list[dict[tuple[int, ...], dict[int, int]]] = [{} for _ in range(max_order + 1)]
        self.totals: list[dict[tuple[int, ...], int]] = [{} for _ in range(max_order + 1)]
        for m in range(1, max_order + 1):
            table, totals = self.table[m], self.totals[m]
            for end in range(m - 1, len(ids)):
                context, token = tuple(ids[end - m + 1 : end]), ids[end]
                row = table.setdefault(context, {})
                row[token] = row.get(token, 0) + 1
                totals[context] = totals.get(context, 0) + 1

    def probability(self, token: int, context: tuple[int, ...], strength: float) -> float:
        """P(token | the last max_order - 1 tokens of context), each order smoothed toward the one below.

        P_m(w | c) = (count(c, w) + strength · P_{m-1}(w | c minus its first token)) / (count(c) + strength),
        an order whose context never occurred in training falls back to the order below, and
        the unigram is add-one smoothed, so every probability is positive and each row sums to 1.
        """
        context = tuple(context[len(context) - (self.max_order - 1) :]) if self.max_order > 1 else ()
        unigram = self.table[1][()]
        p = (unigram.get(token, 0) + 1) / (self.n_train + self.vocab_size)
        for m in range(2, len(context) + 2):
            c = context[len(context) - (m - 1) :]
            total = self.totals[m].get(c)
            if total is None:
                break  # a longer context that ends in this one was never seen either
            p = (self.table[m][c].get(token, 0) + strength * p) / (total + strength)
        return p


def ngram_loss(counts: NGramCounts, val_ids: torch.Tensor, order: int, *, context: int, strength: float) -> float:
    """Held-out cross-entropy (nats) of an order-``order`` n-gram on the tokens ``evaluate`` scores.

    Like the GPT, the n-gram reads only the window it is in: a target's context is cut at
    the start of its window (so the first targets of a window get shorter contexts).
    """
    if not 1 <= order <= counts.max_order:
        raise ValueError(f"order must lie in 1..{counts.max_order} (the counts' max_order), got {order}")
    ids = _check_stream("val_ids", val_ids, counts.vocab_size).tolist()
    previous, targets = scored_targets(len(ids), context)
    sub = NGramCounts.__new__(NGramCounts)
    sub.__dict__.update(counts.__dict__, max_order=order)
    total = 0.0
    for target in targets.tolist():
        window_start = (target - 1) // context * context
        start = max(window_start, target - order + 1)
        total -= math.log(sub.probability(ids[target], tuple(ids[start:target]), strength))
    return total / len(targets)


def ngram_ladder(data: CapstoneData, context: int, orders: tuple[int, ...] = (1, 2, 3, 6),
                 strengths: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)) -> dict[int, float]:  # fmt: skip
    """Held-out loss of n-grams of each order, each at its best smoothing strength on the held-out split."""
    counts = NGramCounts(data.train_ids, len(data.tokenizer), max(orders))
    return {
        order: min(ngram_loss(counts, data.val_ids, order, context=context, strength=s) for s in strengths)
        for order in orders
    }


def entropy_floor(config: CorpusConfig, data: CapstoneData) -> float:
    """The grammar's own loss on the held-out text: -ln P(every held-out paragraph) per held-out token (nats).

    ``lib.stories.tiny_stories_nats`` gives each paragraph's exact probability under the
    grammar that wrote it. The text is the held-out part of ``prepare_data(config)``; the
    paragraph breaks cost nothing (the grammar always writes one), and the total is shared
    over the held-out tokens, the mean per token that a model would pay at best.
    """
    from lib.stories import tiny_stories_nats

    paragraphs = tiny_stories_nats(config.n_paragraphs, config.seed)
    n_val = max(1, round(config.held_out * len(paragraphs)))
    seen = {p for p, _ in paragraphs[:-n_val]}
    kept = [(p, nats) for p, nats in paragraphs[-n_val:] if p not in seen]
    if "\n\n".join(p for p, _ in kept) + "\n\n" != data.val_text:
        raise ValueError("data is not prepare_data(config): its held-out text differs")
    return sum(nats for _, nats in kept) / data.val_ids.numel()
