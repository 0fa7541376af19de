"""The story corpus: pinned across machines and Python versions, and its grammar's promises kept."""

import hashlib
import math
import random
import re

import numpy as np
import pytest

from lib.stories import NAMES, agreement, counting, story, tiny_stories, tiny_stories_nats


def test_docstring_examples():
    import doctest

    import lib.stories

    assert doctest.testmod(lib.stories).failed == 0


def test_corpus_is_pinned():
    """The same text on every machine and Python version: a change here changes the book's numbers."""
    text = "\n\n".join(tiny_stories(40, seed=0))
    assert tiny_stories(40, seed=0) == tiny_stories(40, seed=0)
    assert tiny_stories(40, seed=1) != tiny_stories(40, seed=0)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == "664f7c2ff6da8a5f"
    chapter_9 = "\n\n".join(tiny_stories(6000, seed=0))  # the capstone's corpus (the same hash on 3.7-3.13)
    assert hashlib.sha256(chapter_9.encode()).hexdigest()[:16] == "2597be6e10c30aa8"


def test_stories_carry_name_and_pronoun():
    rng = random.Random(3)
    pronouns = dict(NAMES)
    for _ in range(50):
        text = story(rng)
        hero = re.match(r"Once upon a time there was a \w+ \w+ named (\w+)\.", text).group(1)
        assert re.search(rf'"Look what I found!" said {hero}\.', text)
        thing = re.search(r"found an? \w+ (\w+)\.", text).group(1)
        assert f"played with the {thing} until" in text
        for pronoun in re.findall(r"\b(he|she|He|She)\b", text):
            assert pronoun.lower() == pronouns[hero]


def test_agreement_follows_the_subject_not_the_nearer_noun():
    rng = random.Random(4)
    seen = set()
    for _ in range(100):
        for subject, other, verb, be in re.findall(r"The (\w+) that the (\w+) (\w+) (is|are)", agreement(rng)):
            assert (be == "are") == subject.endswith("s")
            assert verb.endswith("s") != other.endswith("s")  # "the cat sees", "the cats see"
            seen.add((subject.endswith("s"), other.endswith("s")))
    assert len(seen) == 4  # every combination occurs, so the nearer noun does not predict the verb


def test_counting_lines_are_progressions():
    rng = random.Random(5)
    for _ in range(100):
        line = counting(rng)
        step, start, numbers = re.fullmatch(r"Count by (\d+) from (\d+): ([\d, ]+)\.", line).groups()
        values = [int(n) for n in numbers.split(", ")]
        assert values[0] == int(start)
        assert all(b - a == int(step) for a, b in zip(values, values[1:], strict=False))


def test_bad_count_raises():
    with pytest.raises(ValueError, match="n_paragraphs"):
        tiny_stories(0)


def test_nats_are_the_paragraphs_exact_probabilities():
    """The recorder changes no draw, and each probability is the product of the grammar's choices."""
    from lib.stories import ACTIVITIES, ADJECTIVES, ANIMALS, OBJECTS, PLACES, REPLIES, tiny_stories_nats

    pairs = tiny_stories_nats(300, seed=3)
    assert [p for p, _ in pairs] == tiny_stories(300, seed=3)
    for paragraph, nats in pairs:
        if paragraph.startswith("Count"):
            assert nats == pytest.approx(math.log(4 * 5 * 21 * 4))  # kind, step, start, length
        elif paragraph.startswith("Once"):
            morning = "Every morning" in paragraph
            p = (2 / 4) / len(NAMES) / (len(NAMES) - 1) / len(OBJECTS) / len(ADJECTIVES) / len(ANIMALS) ** 2
            p *= 1 / len(PLACES) / 2 / (len(ACTIVITIES) if morning else 1) / len(REPLIES) / 2
            assert nats == pytest.approx(-math.log(p))
        else:
            n = paragraph.count(".")
            assert nats == pytest.approx(math.log(4 * 3) + n * math.log(2 * 6 * 2 * 6 * 4 * 5))


def test_counting_probabilities_sum_to_the_kinds_share():
    """Summed over every counting line the grammar can write, P is that kind's 1/4."""
    from lib.stories import tiny_stories_nats

    lines = {p: nats for p, nats in tiny_stories_nats(4000, seed=0) if p.startswith("Count")}
    assert len(lines) > 300  # most of the 420 lines occur
    assert sum(math.exp(-n) for n in lines.values()) == pytest.approx(len(lines) / 420 / 4)


def test_tiny_stories_take_a_numpy_count_and_refuse_a_bool():
    assert tiny_stories(np.int64(3)) == tiny_stories(3) and len(tiny_stories_nats(np.int32(2))) == 2
    for call in (tiny_stories, tiny_stories_nats):
        with pytest.raises(ValueError, match="n_paragraphs must be a positive integer, got False"):
            call(False)
