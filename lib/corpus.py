"""A multilingual training corpus that is the same on every machine (chapters 7 and 9).

Nothing is downloaded: the text is generated from the paragraphs in ``SAMPLE_TEXTS``
below (written for this book, one per language, saying the same thing in each, plus a few
lines of Python). For each language a bigram
chain (which word may follow which, counted in that paragraph) is walked with a seeded
``random.Random``; Chinese and Japanese, written without spaces, are walked character by
character. So the corpus holds real words of ten languages
in eight scripts (Latin, Cyrillic, Greek, Arabic, Devanagari, Han, Hiragana, Katakana), in
new orders, as much of it as asked for.

Only integer arithmetic on ``random.Random(seed)`` decides the text (``randrange``, whose
algorithm Python has kept since 3.2), so the same call gives the same string on every
machine and Python version.

    >>> text = multilingual_corpus(2_000)
    >>> len(text.encode("utf-8")) <= 2_000 and text == multilingual_corpus(2_000)
    True

Limits: the words are those of eleven short paragraphs, so the vocabulary is small (a few
hundred words); good for watching a tokenizer learn and for comparing scripts, not a
stand-in for a web-scale corpus.
"""

from __future__ import annotations

import random

import regex

from lib.validation import is_integer

SAMPLE_TEXTS = {
    "English": (
        "A tokenizer turns text into numbers. Each language and each script gets a different share of "
        "the vocabulary, so the same sentence can cost many more tokens in one language than in another. "
        "Measure before you assume."
    ),
    "French": (
        "Un tokeniseur transforme le texte en nombres. Chaque langue et chaque écriture reçoit une part "
        "différente du vocabulaire, si bien que la même phrase peut coûter beaucoup plus de jetons dans "
        "une langue que dans une autre. Mesurez avant de supposer."
    ),
    "German": (
        "Ein Tokenizer verwandelt Text in Zahlen. Jede Sprache und jede Schrift erhält einen anderen "
        "Anteil am Vokabular, daher kann derselbe Satz in einer Sprache viel mehr Token kosten als in "
        "einer anderen. Erst messen, dann annehmen."
    ),
    "Spanish": (
        "Un tokenizador convierte el texto en números. Cada idioma y cada escritura recibe una parte "
        "distinta del vocabulario, así que la misma frase puede costar muchos más tokens en un idioma "
        "que en otro. Mide antes de suponer."
    ),
    "Russian": (
        "Токенизатор превращает текст в числа. Каждый язык и каждая письменность получают разную долю "
        "словаря, поэтому одно и то же предложение на одном языке может стоить гораздо больше токенов, "
        "чем на другом. Сначала измерьте, потом делайте выводы."
    ),
    "Greek": (
        "Ο διαχωριστής λέξεων μετατρέπει το κείμενο σε αριθμούς. Κάθε γλώσσα και κάθε γραφή παίρνει "
        "διαφορετικό μερίδιο του λεξιλογίου, οπότε η ίδια πρόταση μπορεί να κοστίζει πολύ περισσότερα "
        "σύμβολα σε μια γλώσσα απ' ό,τι σε μια άλλη. Μέτρησε πριν υποθέσεις."
    ),
    "Arabic": (
        "يحوّل المُرمِّز النص إلى أرقام. تحصل كل لغة وكل كتابة على حصة مختلفة من المفردات، لذلك قد "
        "تكلّف الجملة نفسها رموزًا أكثر بكثير في لغة منها في لغة أخرى. قِس قبل أن تفترض."
    ),
    "Hindi": (
        "टोकनाइज़र पाठ को संख्याओं में बदलता है। हर भाषा और हर लिपि को शब्दावली का अलग हिस्सा मिलता है, "
        "इसलिए एक ही वाक्य एक भाषा में दूसरी भाषा की तुलना में कहीं अधिक टोकन ले सकता है। "
        "मान लेने से पहले मापें।"
    ),
    "Chinese": (
        "分词器把文本变成数字。每种语言和每种文字在词表中所占的份额不同，"
        "所以同一句话在一种语言里可能比在另一种语言里多花许多词元。先测量，再下结论。"
    ),
    "Japanese": (
        "トークナイザーは文章を数字に変えます。言語や文字ごとに語彙の取り分が違うので、"
        "同じ文でもある言語では別の言語よりずっと多くのトークンがかかることがあります。"
        "思い込む前に測りましょう。"
    ),
    "Python": (
        "def fertility(tokenizer, text):\n"
        '    """Tokens per character and per byte."""\n'
        "    ids = tokenizer.encode(text)\n"
        "    return len(ids) / len(text), len(ids) / len(text.encode('utf-8'))\n"
    ),
}

UNSPACED = ("Chinese", "Japanese")  # names of sample texts whose script does not space words


def _units(name: str, text: str) -> list[str]:
    """The units the chain walks: characters for unspaced scripts, lines for code, else words."""
    if name in UNSPACED:
        return list(text)
    if name == "Python":
        return [line + "\n" for line in text.splitlines()]
    return regex.findall(r"\S+", text)


def _chain(units: list[str]) -> dict[str, list[str]]:
    """unit -> the units that follow it in the paragraph (repeats kept, so counts weigh)."""
    follows: dict[str, list[str]] = {}
    for here, after in zip(units, units[1:] + units[:1], strict=True):  # wraps around: no dead end
        follows.setdefault(here, []).append(after)
    return follows


def sentences(name: str, n: int, seed: int = 0) -> list[str]:
    """``n`` generated sentences (or code lines) in the language ``name`` of SAMPLE_TEXTS."""
    if name not in SAMPLE_TEXTS:
        raise ValueError(f"name must be one of {sorted(SAMPLE_TEXTS)}, got {name!r}")
    if not is_integer(n) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    units = _units(name, SAMPLE_TEXTS[name])
    follows = _chain(units)
    rng = random.Random(f"{seed}:{name}")
    joiner = "" if name in UNSPACED or name == "Python" else " "
    out = []
    for _ in range(n):
        unit = units[rng.randrange(len(units))]
        words = [unit]
        for _ in range(4 + rng.randrange(14)):  # 5 to 18 units
            unit = follows[unit][rng.randrange(len(follows[unit]))]
            words.append(unit)
        out.append(joiner.join(words))
    return out


def multilingual_corpus(n_bytes: int, seed: int = 0, languages: tuple[str, ...] | None = None) -> str:
    """About ``n_bytes`` of UTF-8 (never more): paragraphs of generated sentences, the
    languages taking turns, separated by blank lines."""
    if not is_integer(n_bytes) or n_bytes < 0:
        raise ValueError(f"n_bytes must be a non-negative int, got {n_bytes!r}")
    languages = tuple(SAMPLE_TEXTS) if languages is None else tuple(languages)
    paragraphs, size, round_ = [], 0, 0
    while size < n_bytes:
        for name in languages:
            paragraph = "\n".join(sentences(name, 3, seed=seed * 1_000_003 + round_)) + "\n\n"
            paragraphs.append(paragraph)
            size += len(paragraph.encode("utf-8"))
        round_ += 1
    return "".join(paragraphs).encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")


def language_shares(n_bytes: int, seed: int = 0, languages: tuple[str, ...] | None = None) -> dict[str, float]:
    """The share of ``multilingual_corpus(n_bytes, seed, languages)``'s UTF-8 bytes that each language takes.

    The corpus gives every language the same number of sentences per round, not the same
    number of bytes: a line of Python or a sentence in a script of two- or three-byte
    characters is longer in bytes than one in Chinese, whose sentences are a few
    characters. The shares count the paragraphs as generated, before the last one is cut.
    """
    languages = tuple(SAMPLE_TEXTS) if languages is None else tuple(languages)
    sizes = dict.fromkeys(languages, 0)
    size, round_ = 0, 0
    while size < n_bytes:
        for name in languages:
            paragraph = "\n".join(sentences(name, 3, seed=seed * 1_000_003 + round_)) + "\n\n"
            sizes[name] += len(paragraph.encode("utf-8"))
            size += len(paragraph.encode("utf-8"))
        round_ += 1
    return {name: count / size for name, count in sizes.items()}
