"""What the capstone GPT learned, measured on every held-out paragraph, not on one prompt (chapter 9).

Each probe is a set of (prompt, right token, rival tokens) built from the held-out text:

    name        "... named Ivy. Ivy lived by the river. One day"     -> " Ivy"
                against every other name, and above all the five of the hero's gender
    pronoun     "... One day Ivy found a red ball."                  -> " She" (rival " He")
    object      '... "Where did you find the'                        -> " ball" (rivals: the other objects)
    agreement   "The dogs that the cat sees"                         -> " are" (rival " is")
    new nouns   the same sentences with the stories' animals (owls, foxes, ...), which
                no agreement sentence uses

``name_attention`` asks each head how much weight the last token of a name prompt puts on
the hero's name earlier in the story (before asking, by ablation, whether the output uses it).

``probe_scores`` reports, per probe, the mean probability of the right token, the share of
prompts where it is above 0.5, and the share where it beats every rival. ``head_ablations``
mean-ablates each head in turn (``lib.gpt_probes.run_heads``) and reports the change in the
mean log-probability of the right token: a heads x probes table.

Shape letters: P prompts, T tokens, V vocabulary, L layers, H query heads, D head width.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import torch

from lib.gpt import GPT
from lib.gpt_probes import attention_maps, mean_head_outputs, run_heads
from lib.stories import ANIMALS, NAMES, NOUNS, OBJECTS, VERBS
from lib.tokenizer import BPETokenizer

__all__ = ["Probe", "PROBES", "held_out_probes", "probe_scores", "name_attention", "head_ablations"]

PROBES = ("name", "name, same gender", "pronoun", "object", "agreement", "new nouns")


@dataclass(frozen=True)
class Probe:
    """Prompts (token ids), the right next token of each, and the rival tokens it must beat."""

    prompts: tuple[tuple[int, ...], ...]
    right: tuple[int, ...]
    rivals: tuple[tuple[int, ...], ...]


def _token(tokenizer: BPETokenizer, text: str) -> int:
    ids = tokenizer.encode(text)
    if len(ids) != 1:
        raise ValueError(f"{text!r} is {len(ids)} tokens {ids}; a probe's target must be one token")
    return ids[0]


def _probe(tokenizer: BPETokenizer, items: list[tuple[str, str, list[str]]]) -> Probe:
    prompts, right, rivals = [], [], []
    for prompt, target, others in items:
        prompts.append(tuple(tokenizer.encode(prompt)))
        right.append(_token(tokenizer, target))
        rivals.append(tuple(_token(tokenizer, other) for other in others))
    return Probe(tuple(prompts), tuple(right), tuple(rivals))


def held_out_probes(text: str, tokenizer: BPETokenizer) -> dict[str, Probe]:
    """Every probe of ``PROBES``, built from the held-out stories and agreement sentences in ``text``."""
    gender = dict(NAMES)
    names, things = [f" {name}" for name, _ in NAMES], [f" {thing}" for _, thing in OBJECTS]
    items: dict[str, list] = {probe: [] for probe in PROBES}
    for paragraph in text.split("\n\n"):
        story = re.match(r"Once upon a time there was a \w+ \w+ named (\w+)\.", paragraph)
        if story:
            hero = story.group(1)
            day = paragraph.index(" One day") + len(" One day")
            items["name"].append((paragraph[:day], f" {hero}", [n for n in names if n != f" {hero}"]))
            same = [f" {n}" for n, g in NAMES if g == gender[hero] and n != hero]
            items["name, same gender"].append((paragraph[:day], f" {hero}", same))
            found = re.search(r"One day \w+ found an? \w+ (\w+)\.", paragraph)
            pronoun = gender[hero].capitalize()
            items["pronoun"].append((paragraph[: found.end()], f" {pronoun}", [" He" if pronoun == "She" else " She"]))
            thing = f" {found.group(1)}"
            reply = re.search(r'"(What a nice|Can I play with the|Where did you find the)', paragraph)
            items["object"].append((paragraph[: reply.end()], thing, [t for t in things if t != thing]))
        for sentence in re.finditer(r"The (\w+) that the \w+ \w+(?= (is|are) )", paragraph):
            wrong = " is" if sentence.group(2) == "are" else " are"
            items["agreement"].append((paragraph[: sentence.end()], f" {sentence.group(2)}", [wrong]))
    # Agreement with nouns the agreement sentences never use: the stories' other animals.
    for animal, other, verb, plural in itertools.product(
        [a for a in ANIMALS if a not in NOUNS and a != "mouse"], NOUNS, VERBS, (True, False)
    ):
        subject = animal + ("es" if animal == "fox" else "s") if plural else animal
        prompt = f"The {subject} that the {other} {verb}s"
        items["new nouns"].append((prompt, " are" if plural else " is", [" is" if plural else " are"]))
    return {probe: _probe(tokenizer, rows) for probe, rows in items.items()}


def _last_logits(model: GPT, prompts: tuple[tuple[int, ...], ...], replace=None) -> torch.Tensor:
    """(P, V) next-token log-probabilities after each prompt (prompts padded on the right: causal)."""
    longest = max(len(p) for p in prompts)
    idx = torch.zeros(len(prompts), longest, dtype=torch.long)  # (P, T)
    for row, prompt in enumerate(prompts):
        idx[row, : len(prompt)] = torch.tensor(prompt)
    logits, _ = run_heads(model, idx, replace)  # (P, T, V)
    last = torch.tensor([len(p) - 1 for p in prompts])  # (P,)
    return torch.log_softmax(logits[torch.arange(len(prompts)), last].float(), dim=-1)  # (P, V)


def _right_and_rivals(logp: torch.Tensor, probe: Probe) -> tuple[torch.Tensor, torch.Tensor]:
    right = logp[torch.arange(len(probe.right)), torch.tensor(probe.right)]  # (P,)
    best_rival = torch.stack([logp[i, list(r)].max() for i, r in enumerate(probe.rivals)])  # (P,)
    return right, best_rival


@torch.no_grad()
def probe_scores(model: GPT, probes: dict[str, Probe]) -> dict[str, dict[str, float]]:
    """Per probe: mean P(right), share of prompts with P(right) > 0.5, share where it beats every rival."""
    scores = {}
    for name, probe in probes.items():
        right, rival = _right_and_rivals(_last_logits(model, probe.prompts), probe)
        scores[name] = {
            "mean_p": float(right.exp().mean()),
            "share_above_half": float((right.exp() > 0.5).float().mean()),
            "share_beats_rivals": float((right > rival).float().mean()),
            "prompts": len(probe.prompts),
        }
    return scores


@torch.no_grad()
def name_attention(model: GPT, probe: Probe) -> torch.Tensor:
    """(L, H): each head's weight from a name prompt's last token on the earlier copies of the right token.

    For the ``name`` probe: how much each head, reading from "day" in "... One day", looks
    at the hero's name, averaged over the prompts.
    """
    total = torch.zeros(len(model.blocks), model.config.n_heads)  # (L, H)
    for prompt, right in zip(probe.prompts, probe.right, strict=True):
        maps = attention_maps(model, torch.tensor([prompt]))[:, 0, :, -1]  # (L, H, T): from the last token
        where = torch.tensor(prompt) == right  # (T,)
        total += maps[:, :, where].sum(-1)
    return total / len(probe.prompts)


@torch.no_grad()
def head_ablations(model: GPT, probes: dict[str, Probe], mean_windows: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per probe, an (L, H) table: the change in mean ln P(right) when that head is mean-ablated.

    Each head's output is replaced by its mean over ``mean_windows`` (B, T) of held-out
    text (``lib.gpt_probes.mean_head_outputs``), one head at a time. Negative: the head helps.
    The effect ignores the rivals, so probes with the same prompts and right tokens (the name
    probe and its same-gender subset) are measured once.
    """
    means = mean_head_outputs(model, mean_windows)  # (L, H, D)
    n_layers, n_heads = means.shape[:2]
    table, measured = {}, {}
    for name, probe in probes.items():
        if (probe.prompts, probe.right) in measured:
            table[name] = measured[probe.prompts, probe.right].clone()
            continue
        full = _right_and_rivals(_last_logits(model, probe.prompts), probe)[0].mean()
        effect = torch.zeros(n_layers, n_heads)  # (L, H)
        for layer, head in itertools.product(range(n_layers), range(n_heads)):
            logp = _last_logits(model, probe.prompts, {(layer, head): means[layer, head]})
            effect[layer, head] = _right_and_rivals(logp, probe)[0].mean() - full
        table[name] = measured[probe.prompts, probe.right] = effect
    return table
