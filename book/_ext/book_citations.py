"""A Sphinx extension of the book's own: citations in round brackets, as the prose wrote them.

sphinxcontrib-bibtex (which jupyter-book loads, reading ``book/references.bib``) writes its
author-year citations in square brackets, "Vaswani et al. [2017]", and joins two sources with
a comma. This registers ``author_year_round``, the same style with round brackets and a
semicolon, which ``book/_config.yml`` selects (``bibtex_reference_style``):

* ``{cite:t}`vaswani2017``` reads "Vaswani et al. (2017)";
* ``{cite:p}`dao2022,dao2023``` reads "(Dao et al., 2022; Dao, 2023)";
* ``{cite:alp}`ainslie2023``` reads "Ainslie et al., 2023", for inside a parenthesis of the prose's own;
* ``{cite:author}`xiong2020``` reads "Xiong et al.";
* ``{cite:t}`dao2022{Figure 2}``` reads "Dao et al. (2022, Figure 2)".

Each is a link to the source's entry on the references page, which is labelled the same way,
"[Vaswani et al., 2017]" (the ``book_author_year`` bibliography style: pybtex's plain style with
author-year labels instead of "[VSP+17]"). A student's copy of a chapter, read in JupyterLab,
gets the same words in plain text (``lib.plain_roles.plain_citations``).
"""

from __future__ import annotations

import dataclasses

import pybtex.plugin
import sphinxcontrib.bibtex.plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle

STYLE = "author_year_round"
BIBLIOGRAPHY_STYLE = "book_author_year"


def round_brackets() -> BracketStyle:
    return BracketStyle(left="(", right=")", sep="; ")


@dataclasses.dataclass
class RoundAuthorYearStyle(AuthorYearReferenceStyle):
    bracket_parenthetical: BracketStyle = dataclasses.field(default_factory=round_brackets)
    bracket_textual: BracketStyle = dataclasses.field(default_factory=round_brackets)
    bracket_author: BracketStyle = dataclasses.field(default_factory=round_brackets)
    bracket_label: BracketStyle = dataclasses.field(default_factory=round_brackets)
    bracket_year: BracketStyle = dataclasses.field(default_factory=round_brackets)


sphinxcontrib.bibtex.plugin.register_plugin("sphinxcontrib.bibtex.style.referencing", STYLE, RoundAuthorYearStyle)


def author_year_label(entry) -> str:
    """ "Shazeer, 2019", "Loshchilov and Hutter, 2017", "Vaswani et al., 2017": as the citations read."""
    surnames = [" ".join(person.prelast_names + person.last_names) for person in entry.persons.get("author", [])]
    names = f"{surnames[0]} et al." if len(surnames) >= 3 else " and ".join(surnames)
    return f"{names}, {entry.fields['year']}"


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            yield author_year_label(entry)


class AuthorYearPlainStyle(PlainStyle):
    default_label_style = "book_author_year"


pybtex.plugin.register_plugin("pybtex.style.labels", "book_author_year", AuthorYearLabels)
pybtex.plugin.register_plugin("pybtex.style.formatting", BIBLIOGRAPHY_STYLE, AuthorYearPlainStyle)


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
