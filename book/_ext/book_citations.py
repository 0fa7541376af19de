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

Each is a link to the source's entry on the references page. A student's copy of a chapter,
read in JupyterLab, gets the same words in plain text (``lib.student.plain_citations``).
"""

from __future__ import annotations

import dataclasses

import sphinxcontrib.bibtex.plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle

STYLE = "author_year_round"


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


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
