"""How evenly a vocabulary serves different scripts: fertility, and sample texts (chapter 7).

Fertility is how many tokens a text costs per unit of text. Words are no fair unit across
writing systems (Chinese and Japanese do not separate words with spaces), so we count per
character and per UTF-8 byte, and per word only where spaces mark words.

Chapter 7's tables compare ``SLICE_TEXTS`` (below): one sentence, written for this book,
saying the same thing in several languages and scripts, transliterated and code-mixed,
and a line of Python. Because the meaning is the same, the token counts compare what each
script pays for it. Without ``texts``, the functions compare the paragraphs the corpus is
generated from, ``lib.corpus.SAMPLE_TEXTS``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.corpus import SAMPLE_TEXTS, UNSPACED
from lib.tokenizer.base import Tokenizer, nfkc_changes

# Characters that NFKC rewrites: a ligature, full-width letters, a superscript, compatibility
# symbols, half-width katakana. Normalizing them breaks exact round trips.
NFKC_SAMPLE = "ﬁne ﬂour, Ｆｕｌｌ ｗｉｄｔｈ, x² + y², Acme™ ① ｶﾀｶﾅ"


# Slices for evaluating a multilingual model (say, a moderation classifier): by language
# and script, and the two that language-level slices hide, code-mixing (two languages in
# one message) and transliteration (a language written in another script, here Latin).
# Written for this book; each says roughly "check the result of the tokenizer before the
# meeting".
SLICE_TEXTS = {
    "English (Latin)": "Please check what the tokenizer did before the meeting tomorrow.",
    "Hindi (Devanagari)": "कृपया कल की बैठक से पहले देख लें कि टोकनाइज़र ने क्या किया।",
    "Hindi, transliterated (Latin)": "Kripya kal ki baithak se pehle dekh lein ki tokenizer ne kya kiya.",
    "Hindi-English code-mixed": "Kal meeting se pehle please check kar lena ki tokenizer ne kya kiya.",
    "Russian (Cyrillic)": "Пожалуйста, проверьте, что сделал токенизатор, до завтрашней встречи.",
    "Russian, transliterated (Latin)": "Pozhaluysta, prover'te, chto sdelal tokenizator, do zavtrashney vstrechi.",
    "Arabic (Arabic)": "من فضلك تحقق مما فعله المرمّز قبل اجتماع الغد.",
    "Arabic, transliterated (Arabizi)": "min fadlak ta7a2a2 mimma fa3alahu el tokenizer 2abl ejtima3 el ghad.",
    "Chinese (Han)": "请在明天开会之前检查一下分词器做了什么。",
    "Python code": "if tokenizer.encode(text) != expected:\n    raise ValueError(text)\n",
}


def count_words(text: str) -> int:
    """Words as runs of non-space characters: a fair unit only where spaces mark words."""
    return len(text.split())


@dataclass(frozen=True)
class Fertility:
    tokens: int
    chars: int
    utf8_bytes: int
    words: int | None = None  # None where words are not marked by spaces

    @property
    def tokens_per_word(self) -> float | None:
        return None if not self.words else self.tokens / self.words

    @property
    def tokens_per_char(self) -> float:
        return self.tokens / self.chars if self.chars else 0.0

    @property
    def tokens_per_byte(self) -> float:
        return self.tokens / self.utf8_bytes if self.utf8_bytes else 0.0


def fertility(tokenizer: Tokenizer, text: str, spaced: bool = True) -> Fertility:
    """Tokens the text costs, against its characters, UTF-8 bytes and (if ``spaced``) words."""
    return Fertility(
        len(tokenizer.encode(text)), len(text), len(text.encode("utf-8")), count_words(text) if spaced else None
    )


def fertility_rows(tokenizers: dict[str, Tokenizer], texts: dict[str, str] = SAMPLE_TEXTS) -> list[dict]:
    """One row per (text, tokenizer): tokens and tokens per character, byte and word
    (None for scripts that do not space their words)."""
    rows = []
    for name, text in texts.items():
        spaced = not any(script in name for script in UNSPACED + ("Han",))
        for tokenizer_name, tokenizer in tokenizers.items():
            f = fertility(tokenizer, text, spaced)
            rows.append(
                {
                    "text": name,
                    "tokenizer": tokenizer_name,
                    "tokens": f.tokens,
                    "per_char": f.tokens_per_char,
                    "per_byte": f.tokens_per_byte,
                    "per_word": f.tokens_per_word,
                }
            )
    return rows


def _cell(value: float | int | None) -> str:
    """One table cell: a dash for no value, counts as integers, ratios to two decimals."""
    if value is None:
        return f"{'—':>14}"
    return f"{value:14d}" if isinstance(value, int) else f"{value:14.2f}"


def format_rows(rows: list[dict], unit: str = "per_char") -> str:
    """A table: one line per text, one column per tokenizer, ``unit`` in each cell
    (``"tokens"``, ``"per_char"``, ``"per_byte"`` or ``"per_word"``)."""
    tokenizers = list(dict.fromkeys(row["tokenizer"] for row in rows))
    texts = list(dict.fromkeys(row["text"] for row in rows))
    cell = {(row["text"], row["tokenizer"]): row[unit] for row in rows}
    width = max(len(t) for t in texts) + 1
    lines = [f"{'':{width}}" + "".join(f"{name:>14}" for name in tokenizers)]
    for text in texts:
        values = [cell[text, name] for name in tokenizers]
        lines.append(f"{text:{width}}" + "".join(_cell(v) for v in values))
    return "\n".join(lines)


def fertility_table(tokenizer: Tokenizer, texts: dict[str, str] = SAMPLE_TEXTS) -> str:
    """One row per text: characters, bytes, tokens, tokens per character and per byte."""
    lines = [f"{'text':10} {'chars':>6} {'bytes':>6} {'tokens':>7} {'tok/char':>9} {'tok/byte':>9}"]
    for name, text in texts.items():
        f = fertility(tokenizer, text)
        lines.append(
            f"{name:10} {f.chars:6d} {f.utf8_bytes:6d} {f.tokens:7d} {f.tokens_per_char:9.2f} {f.tokens_per_byte:9.2f}"
        )
    return "\n".join(lines)


def nfkc_report(text: str = NFKC_SAMPLE) -> str:
    """Each character NFKC rewrites, and what it becomes: what a normalizing tokenizer loses."""
    return "\n".join(f"{i:3d}  {char!r:6} -> {folded!r}" for i, char, folded in nfkc_changes(text))
