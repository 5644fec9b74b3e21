"""The executors of the one curation driver (:func:`agl_fast.pipeline.curate`,
protocol :class:`agl_fast.pipeline.run.Executor`), side by side.

* :mod:`.local`: worker processes on one machine under a supervisor that
  isolates crashes and hangs (``curate --engine local``, the default), or
  the batches in the driver's process (``--workers 0``).
* :mod:`.ray_run`: Ray actors on a cluster (``curate --engine ray``); the
  actors themselves are in :mod:`.ray_actors`.
* :mod:`.ray`: the same actors as Ray Data stages, for pipelines that read
  and write datasets themselves (not a driver of ``curate``).

The driver writes through one progress log (:mod:`agl_fast.pipeline.journal`)
into one output layout and one summary, whichever executor runs the batches.
"""

#: The error of a Ray engine module imported without Ray installed.
RAY_MISSING = "agl_fast.ray needs Ray: pip install 'agl-fast[ray]' (or 'ray[data]')"
