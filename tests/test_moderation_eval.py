"""The keyword rule and the cascade of chapter 7's moderation caveats, recounted by hand."""

import pytest

from lib.moderation_eval import KEYWORDS, MESSAGES, Message, cascade_report, keyword_hits, keyword_report


def test_keyword_hits_counts_whole_words_in_any_case():
    assert keyword_hits("CLICK here, Free!") == 2
    assert keyword_hits("freedom clicks") == 0  # a word, not a substring
    assert keyword_hits("") == 0


def test_keyword_report_matches_a_recount_per_slice():
    rows = {row.name: row for row in keyword_report()}
    assert list(rows)[-1] == "all"
    for name, row in rows.items():
        group = [m for m in MESSAGES if name in ("all", m.slice)]
        flagged = [
            any(k in m.text.lower().replace(",", " ").replace("!", " ").split() for k in KEYWORDS) for m in group
        ]
        assert row.messages == len(group)
        assert row.true_pos == sum(f and m.spam for f, m in zip(flagged, group, strict=True))
        assert row.false_pos == sum(f and not m.spam for f, m in zip(flagged, group, strict=True))
        assert row.false_neg == sum(not f and m.spam for f, m in zip(flagged, group, strict=True))


def test_an_english_rule_misses_every_spam_in_another_script():
    rows = {row.name: row for row in keyword_report()}
    for name in ("Russian", "Hindi"):
        assert rows[name].true_pos == 0 and rows[name].false_neg > 0 and rows[name].recall == 0
    assert rows["all"].precision < 1 and rows["all"].recall < 1


def test_cascade_partitions_the_messages():
    result = cascade_report()
    assert len(result.routed) + len(result.kept_wrong) + result.kept_right == len(MESSAGES)
    assert all(keyword_hits(m.text) == 1 for m in result.routed)
    for m in result.kept_wrong:  # spam with no keyword, or clean text with two or more
        assert (m.spam and keyword_hits(m.text) == 0) or (not m.spam and keyword_hits(m.text) >= 2)


def test_a_wider_unsure_band_routes_more_and_keeps_fewer_wrong():
    narrow, wide = cascade_report(sure_spam=2), cascade_report(sure_spam=3)
    assert len(wide.routed) > len(narrow.routed)
    assert len(wide.kept_wrong) <= len(narrow.kept_wrong)


def test_a_custom_set_and_bad_band():
    mine = (Message("free prize", "x", True), Message("hello", "x", False), Message("free", "x", False))
    result = cascade_report(mine)
    assert (len(result.routed), len(result.kept_wrong), result.kept_right) == (1, 0, 2)
    with pytest.raises(ValueError, match="sure_spam must be an integer of at least 2"):
        cascade_report(sure_spam=1)
