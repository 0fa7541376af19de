"""A corpus the book writes itself: short paragraphs from a small probabilistic grammar (chapter 9).

Three kinds of paragraph, each holding something a bigram model (which sees only the
previous token) cannot predict:

    stories     a name and a pronoun introduced in the first sentence come back later;
                an object found in one sentence is named again in the reply
    agreement   "The dogs that the cat sees are happy.": the verb after the relative
                clause agrees with the first noun, four tokens back
    counting    "Count by 3 from 2: 2, 5, 8, 11." : each number is the previous plus a step
                stated at the start of the line

Only ``random.Random(seed).randrange`` and ``.choice`` (integer draws whose algorithm
Python has kept since 3.2) decide the text, so the same seed gives the same string on
every machine and Python version (tests/test_stories.py pins its hash). In the spirit of
TinyStories (Eldan and Li, 2023): text simple enough for a very small model to learn.

    >>> counting(random.Random(0))
    'Count by 4 from 13: 13, 17, 21, 25, 29.'
    >>> agreement(random.Random(1))
    'The bird that the girl helps is small. The cats that the girl sees are small.'
"""

from __future__ import annotations

import math
import random

from lib.validation import positive_int

__all__ = ["NAMES", "story", "agreement", "counting", "tiny_stories", "tiny_stories_nats"]

NAMES = (
    ("Mia", "she"), ("Tom", "he"), ("Lena", "she"), ("Sam", "he"), ("Nora", "she"), ("Leo", "he"),
    ("Ada", "she"), ("Max", "he"), ("Ivy", "she"), ("Ben", "he"), ("Zoe", "she"), ("Otto", "he"),
)  # fmt: skip
ANIMALS = ("cat", "dog", "fox", "owl", "frog", "bear", "duck", "mouse")
ADJECTIVES = ("little", "brave", "shy", "happy", "sleepy", "clever")
PLACES = ("in a small house", "by the river", "under a big tree", "on a green hill", "near the old mill")
ACTIVITIES = ("sing", "read books", "dig in the garden", "run in the grass", "look at the clouds")
OBJECTS = (("a red", "ball"), ("a blue", "kite"), ("an old", "map"), ("a shiny", "key"), ("a tiny", "boat"))
REPLIES = ("What a nice {thing}!", "Can I play with the {thing}?", "Where did you find the {thing}?")
NOUNS = ("dog", "cat", "bird", "girl", "boy", "frog")  # plural: add "s"
VERBS = ("see", "like", "chase", "help")  # third person singular: add "s"
STATES = ("happy", "tired", "hungry", "small", "loud")


def story(rng: random.Random) -> str:
    """A few sentences about a hero: the name and pronoun must be carried from the first line."""
    hero, pronoun = rng.choice(NAMES)
    friend, _ = rng.choice([entry for entry in NAMES if entry[0] != hero])
    article, thing = rng.choice(OBJECTS)
    lines = [
        f"Once upon a time there was a {rng.choice(ADJECTIVES)} {rng.choice(ANIMALS)} named {hero}.",
        f"{hero} lived {rng.choice(PLACES)}.",
    ]
    if rng.randrange(2):
        lines.append(f"Every morning {pronoun} liked to {rng.choice(ACTIVITIES)}.")
    lines += [
        f"One day {hero} found {article} {thing}.",
        f"{pronoun.capitalize()} showed it to {friend} the {rng.choice(ANIMALS)}.",
        f'"Look what I found!" said {hero}.',
        f'"{rng.choice(REPLIES).format(thing=thing)}" said {friend}.',
        f"{hero} and {friend} played with the {thing} until the sun went down.",
    ]
    if rng.randrange(2):
        lines.append(f"That night {hero} smiled, and {pronoun} went to sleep.")
    return " ".join(lines)


def _noun_phrase(rng: random.Random) -> tuple[str, bool]:
    plural = bool(rng.randrange(2))
    return rng.choice(NOUNS) + ("s" if plural else ""), plural


def agreement(rng: random.Random) -> str:
    """Sentences whose verb agrees with a subject the relative clause separates it from."""
    sentences = []
    for _ in range(2 + rng.randrange(3)):
        subject, subject_plural = _noun_phrase(rng)
        other, other_plural = _noun_phrase(rng)
        verb = rng.choice(VERBS) + ("" if other_plural else "s")  # agrees with the nearer noun
        be = "are" if subject_plural else "is"  # agrees with the subject, further back
        sentences.append(f"The {subject} that the {other} {verb} {be} {rng.choice(STATES)}.")
    return " ".join(sentences)


def counting(rng: random.Random) -> str:
    """An arithmetic progression: the step is stated once, then every number depends on it."""
    step, start, length = 1 + rng.randrange(5), rng.randrange(21), 5 + rng.randrange(4)
    numbers = ", ".join(str(start + i * step) for i in range(length))
    return f"Count by {step} from {start}: {numbers}."


def tiny_stories(n_paragraphs: int, seed: int = 0) -> list[str]:
    """``n_paragraphs`` paragraphs: half stories, a quarter agreement, a quarter counting."""
    n_paragraphs = positive_int("n_paragraphs", n_paragraphs)
    rng = random.Random(seed)
    kinds = (story, story, agreement, counting)
    return [rng.choice(kinds)(rng) for _ in range(n_paragraphs)]


# --- The entropy floor: what the grammar itself assigns -------------------------------------
class _Recorder(random.Random):
    """A ``random.Random`` that adds up -ln P of every draw it makes, and draws exactly what its parent draws.

    ``choice`` over n items and ``randrange(n)`` each pick one of n equally likely outcomes;
    CPython implements both with ``_randbelow``, which is not overridden, so the stream of
    draws (and so the text) is the one ``random.Random`` gives.
    """

    def __init__(self, seed: object) -> None:
        super().__init__(seed)
        self.nats = 0.0

    def choice(self, seq):  # type: ignore[override]
        self.nats += math.log(len(seq))
        return super().choice(seq)

    def randrange(self, *args):  # type: ignore[override]
        if len(args) != 1:
            raise NotImplementedError("the grammar draws randrange(n) only")
        self.nats += math.log(args[0])
        return super().randrange(args[0])


def tiny_stories_nats(n_paragraphs: int, seed: int = 0) -> list[tuple[str, float]]:
    """``tiny_stories(n_paragraphs, seed)``'s paragraphs, each with -ln P(paragraph) under the grammar (nats).

    The grammar is known, so this is the exact probability of each paragraph: the sum of
    the log-probabilities of the draws that wrote it. Every paragraph has exactly one
    derivation, except that ``story`` is listed twice among the kinds: its probability is
    counted once, as 2/4. The mean of these over many paragraphs, divided by the tokens
    they take, is the entropy floor: no model of this text can score a lower expected loss.
    """
    n_paragraphs = positive_int("n_paragraphs", n_paragraphs)
    rng = _Recorder(seed)
    kinds = (story, story, agreement, counting)
    out = []
    for _ in range(n_paragraphs):
        write = random.Random.choice(rng, kinds)  # the kind: its probability is counted below
        rng.nats = -math.log(kinds.count(write) / len(kinds))
        out.append((write(rng), rng.nats))
    return out
