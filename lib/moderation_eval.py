"""Two moderation caveats, measured on a toy labelled set (chapter 7's evaluation plan).

The lesson warns: do not take keyword rules as correct labels, and measure a cascade's
routing errors, not only its speed. Both need labels a person assigned, so the messages
below (written for this book, a spam policy in several languages and scripts) carry a
label each. ``keyword_report`` scores an English keyword rule against those labels, per
slice; ``cascade_report`` runs the same rule as the cheap first stage of a cascade that
sends only the messages it is unsure of to a larger model.

The larger model is assumed right on every message it sees, which isolates what the first
stage decides alone: every error the cascade makes is then a routing error, a message the
cheap stage kept and got wrong. A real second stage has errors of its own on top.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KEYWORDS", "MESSAGES", "Message", "keyword_hits", "keyword_report", "cascade_report"]

KEYWORDS = ("free", "click", "winner", "prize", "offer")


@dataclass(frozen=True)
class Message:
    text: str
    slice: str  # the language or script slice it belongs to
    spam: bool  # the label a person gave it


MESSAGES = (
    Message("Click here to claim your free prize", "English", True),
    Message("You are a winner! Claim the offer now", "English", True),
    Message("Cheap watches, best price, buy today", "English", True),
    Message("Fr3e m0ney, cl1ck the link", "English", True),
    Message("Is the meeting room free tomorrow?", "English", False),
    Message("Click save before you close the file", "English", False),
    Message("Click the free slot in the calendar", "English", False),
    Message("Lunch at noon?", "English", False),
    Message("Haz clic aquí y gana un premio gratis", "Spanish", True),
    Message("Oferta: dinero fácil desde casa", "Spanish", True),
    Message("¿La sala está libre mañana?", "Spanish", False),
    Message("Вы выиграли приз, нажмите здесь", "Russian", True),
    Message("Встреча завтра в десять", "Russian", False),
    Message("aapne free inaam jeeta, abhi click karo", "Hindi, transliterated", True),
    Message("kal meeting hai kya?", "Hindi, transliterated", False),
    Message("bhai free ho to call karo", "Hindi-English code-mixed", False),
    Message("winner ho gaye, prize lene ke liye click karo", "Hindi-English code-mixed", True),
    Message("आपने इनाम जीता है, अभी क्लिक करें", "Hindi", True),
    Message("कल बैठक दस बजे है", "Hindi", False),
)


def keyword_hits(text: str) -> int:
    """How many of ``KEYWORDS`` the text contains as words (case-insensitive)."""
    words = {word.strip(".,!?:;¿¡").lower() for word in text.split()}
    return sum(keyword in words for keyword in KEYWORDS)


@dataclass(frozen=True)
class SliceScore:
    name: str
    messages: int
    true_pos: int
    false_pos: int
    false_neg: int

    @property
    def precision(self) -> float | None:
        flagged = self.true_pos + self.false_pos
        return self.true_pos / flagged if flagged else None

    @property
    def recall(self) -> float | None:
        spam = self.true_pos + self.false_neg
        return self.true_pos / spam if spam else None


def keyword_report(messages=MESSAGES) -> list[SliceScore]:
    """The rule "flag a message with any keyword", scored against the labels: one row per
    slice, in order of first appearance, and a last row "all"."""
    names = list(dict.fromkeys(m.slice for m in messages)) + ["all"]
    rows = []
    for name in names:
        group = [m for m in messages if name in ("all", m.slice)]
        flagged = [keyword_hits(m.text) > 0 for m in group]
        rows.append(
            SliceScore(
                name,
                len(group),
                sum(f and m.spam for f, m in zip(flagged, group, strict=True)),
                sum(f and not m.spam for f, m in zip(flagged, group, strict=True)),
                sum(not f and m.spam for f, m in zip(flagged, group, strict=True)),
            )
        )
    return rows


@dataclass(frozen=True)
class CascadeResult:
    routed: tuple[Message, ...]  # sent to the larger model
    kept_wrong: tuple[Message, ...]  # decided by the cheap stage, against the label
    kept_right: int

    @property
    def routed_share(self) -> float:
        return len(self.routed) / (len(self.routed) + len(self.kept_wrong) + self.kept_right)


def cascade_report(messages=MESSAGES, sure_spam: int = 2) -> CascadeResult:
    """The cheap stage calls a message spam when it has at least ``sure_spam`` keywords and
    clean when it has none; a message in between goes to the larger model."""
    if not isinstance(sure_spam, int) or sure_spam < 2:
        raise ValueError(
            f"sure_spam must be an integer of at least 2 (one keyword is the unsure band), got {sure_spam!r}"
        )
    routed, wrong, right = [], [], 0
    for message in messages:
        hits = keyword_hits(message.text)
        if 0 < hits < sure_spam:
            routed.append(message)
        elif (hits >= sure_spam) == message.spam:
            right += 1
        else:
            wrong.append(message)
    return CascadeResult(tuple(routed), tuple(wrong), right)
