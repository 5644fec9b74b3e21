"""Speech features in the style of speech-emotion-recognition code: every
clip of a folder loaded at 16 kHz, 40 MFCCs with their deltas, RMS energy
and zero-crossing rate, pooled into one vector per clip.

    python speech_features.py CLIP_DIR OUT.npz
"""

import glob
import os
import sys

import librosa
import numpy as np


def extract_features(path, n_mfcc=40):
    y, sr = librosa.load(path, sr=16000, offset=0.1, duration=2.5)
    mfcc = librosa.feature.mfcc(y=y, sr=sr, n_mfcc=n_mfcc, n_fft=512, hop_length=160)
    delta = librosa.feature.delta(mfcc)
    delta2 = librosa.feature.delta(mfcc, order=2)
    rms = librosa.feature.rms(y=y, frame_length=512, hop_length=160)
    zcr = librosa.feature.zero_crossing_rate(y, frame_length=512, hop_length=160)
    frames = np.vstack([mfcc, delta, delta2, rms, zcr])
    return np.hstack([frames.mean(axis=1), frames.std(axis=1)]), frames


clip_dir, out = sys.argv[1], sys.argv[2]
vectors, frames = [], []
for path in sorted(glob.glob(os.path.join(clip_dir, "*.wav"))):
    vec, fr = extract_features(path)
    vectors.append(vec)
    frames.append(fr)
np.savez(out, vectors=np.array(vectors), frames=np.concatenate(frames, axis=1))
