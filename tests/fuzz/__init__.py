"""A mutation fuzzer for the audio decoders (``agl_fast.load`` and the batch
loaders): seed files generated at run time, format-aware mutations, each
case decoded in a child process under a memory cap and a time limit.

The test suite runs a fixed, bounded set (``tests/test_fuzz_decode.py``);
``python scripts/fuzz_decode.py --minutes 60 --out DIR`` runs for as long as asked.
"""

from __future__ import annotations

from .mutate import OPTION_SETS, Case, random_case, seek_case, seek_options, targeted_cases
from .runner import DEFAULT_MEMORY, DEFAULT_TIMEOUT, Outcome, Report, run_cases
from .seeds import SEEK_SEED_SECONDS, Seed, SeedSet, make_seeds, make_seek_seeds

__all__ = [
    "DEFAULT_MEMORY",
    "DEFAULT_TIMEOUT",
    "OPTION_SETS",
    "SEEK_SEED_SECONDS",
    "Case",
    "Outcome",
    "Report",
    "Seed",
    "SeedSet",
    "make_seeds",
    "make_seek_seeds",
    "random_case",
    "run_cases",
    "seek_case",
    "seek_options",
    "targeted_cases",
]
