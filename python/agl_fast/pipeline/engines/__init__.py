"""The curation engines, side by side.

* :mod:`.local`: worker processes on one machine under a supervisor that
  isolates crashes and hangs (``curate --engine local``, the default).
* :mod:`.ray`: a Ray cluster through Ray Data (``curate --engine ray``).

Both write through the same progress log (:mod:`agl_fast.pipeline.journal`)
into the same output layout.
"""

#: The error of a Ray engine module imported without Ray installed.
RAY_MISSING = "agl_fast.ray needs Ray: pip install 'agl-fast[ray]' (or 'ray[data]')"
