"""Calls to remote services, shared by every package that makes them: rate
limits, back-off and the circuit breaker (:mod:`.ratelimit`), the SQLite
result store that makes a run resumable (:mod:`.store`), and the masking of
secrets in whatever leaves a run (:mod:`.redact`).

``alm`` (model queries) and ``dataset`` (fetching recordings) build on it;
nothing here knows about either.
"""

from __future__ import annotations
