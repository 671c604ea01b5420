"""Validation harness: score the cost model against published, measured training runs.

The data set (``runs.csv`` and friends, see its README) is a folder passed in by the caller, so
the harness works from an installed package as well as from a checkout. ``run(data_dir)``
returns a structured :class:`Report`; ``report`` renders it as text, JSON or Markdown.

Modules, one job each: ``gpus`` (GPU spellings of the data set -> catalog entries), ``cells``
(what one cell says: precision, recompute, sharding, source label), ``rows`` (one CSV row -> a
Case or the reason it cannot be priced), ``scoring`` (prediction, baseline, error statistics),
``korthikanti`` (the Table 4 per-layer check), ``harness`` (ties them into a Report),
``report`` (text / JSON / Markdown), ``devset`` (the rows the previous harness scored).
"""

from app.validation.harness import Report, run
from app.validation.rows import Case, DataSetError, Exclusion, load_cases
from app.validation.scoring import Outcome, SliceFigures

__all__ = [
    "Case",
    "DataSetError",
    "Exclusion",
    "Outcome",
    "Report",
    "SliceFigures",
    "load_cases",
    "run",
]
