"""Defaults of the spatial audio pipeline, declared once.

The BAT / Spatial-AST conventions the simulator, the dataset, the readers,
the feature front end and the models share.
"""

from __future__ import annotations

#: Sample rate of every clip, BRIR and feature (Hz).
SR = 32000
#: Length of a clip (s).
CLIP_SECONDS = 10.0
#: RMS level each dry source is scaled to before rendering (dBFS).
LOUDNESS_DBFS = -14.0
#: Highest image-source order simulated.
MAX_ORDER = 3
#: STFT frame length of the features (samples).
N_FFT = 1024
#: STFT hop of the features (samples).
HOP = 320
#: Farthest source distance a scene places and a question asks about (m).
MAX_DISTANCE = 10.0
#: Mid-frequency reverberation time range of sampled rooms (s), BiDepth's.
RT60_RANGE = (0.1, 0.4)
