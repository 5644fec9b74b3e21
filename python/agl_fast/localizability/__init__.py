"""The Audio Localizability score (AGL1K, section 3.3).

* :func:`fit_weights` — fit ``a_i`` / ``abar_i`` and the positive and negative
  category sets from time fractions, reference errors and judged
  contributions; :class:`LocalizabilityWeights` saves and reloads them (JSON).
* :func:`score` — ``l_k`` for any tagged corpus and the ``l_k > theta`` flag.
* :func:`top_categories`, :func:`top_categories_chart`, :func:`by_continent`
  — the paper's Figure 3 and Figure 11 views.
* :func:`judge_agreement` — agreement between contribution judges.

Its commands: ``judge`` (:mod:`.judge_cli`, the contributions),
``localizability fit|score|select`` (:mod:`.cli`) and ``benchmark build``
(:mod:`.benchmark`, the whole chain from curation to the leaderboard). The
package sits above :mod:`agl_fast.alm` and :mod:`agl_fast.evaluate`, which
never import it.
"""

from __future__ import annotations

from .agreement import judge_agreement
from .fit import (
    CONTRIBUTION_SCHEMA,
    LocalizabilityWeights,
    contributions_matrix,
    fit_weights,
    fractions_matrix,
    read_contributions,
    score,
)
from .report import by_continent, top_categories, top_categories_chart

__all__ = [
    "CONTRIBUTION_SCHEMA",
    "LocalizabilityWeights",
    "by_continent",
    "contributions_matrix",
    "fit_weights",
    "fractions_matrix",
    "judge_agreement",
    "read_contributions",
    "score",
    "top_categories",
    "top_categories_chart",
]
