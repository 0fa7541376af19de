"""Chapter 6's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py)."""

from _variant_answers import variant_answer_tests

ANSWERS = {
    "6.next-position": lambda prompt: len(range(prompt)),  # positions 0..prompt-1 are taken
    "6.weights-gb": lambda billions: billions * 10**9 * 2 / 10**9,
}

test_has_answers, test_variants_agree = variant_answer_tests(6, ANSWERS)
