"""Music features in the style of a genre-classification dataset (one row
of statistics per 30 s track): chroma, RMS, spectral centroid, bandwidth,
roll-off, contrast, zero-crossing rate, onset strength and 20 MFCCs.

    python music_features.py TRACK_DIR OUT.npz
"""

import glob
import os
import sys

import librosa
import numpy as np


def track_features(path):
    y, sr = librosa.load(path, duration=30)
    S = np.abs(librosa.stft(y))
    feats = {
        "chroma_stft": librosa.feature.chroma_stft(S=S**2, sr=sr),
        "rms": librosa.feature.rms(S=S),
        "spectral_centroid": librosa.feature.spectral_centroid(y=y, sr=sr),
        "spectral_bandwidth": librosa.feature.spectral_bandwidth(y=y, sr=sr),
        "rolloff": librosa.feature.spectral_rolloff(y=y, sr=sr),
        "contrast": librosa.feature.spectral_contrast(S=S, sr=sr),
        "zero_crossing_rate": librosa.feature.zero_crossing_rate(y),
        "onset_strength": librosa.onset.onset_strength(y=y, sr=sr)[np.newaxis],
        "mfcc": librosa.feature.mfcc(y=y, sr=sr, n_mfcc=20),
    }
    row = []
    for name in feats:
        row.extend(feats[name].mean(axis=1))
        row.extend(feats[name].var(axis=1))
    return np.array(row)


track_dir, out = sys.argv[1], sys.argv[2]
rows = [track_features(p) for p in sorted(glob.glob(os.path.join(track_dir, "*.wav")))]
np.savez(out, features=np.array(rows))
