"""A spectrogram pipeline over a folder of recordings, as a dataset
preparation script writes one: each file loaded, its log-mel spectrogram
(128 bands, decibels against the file's peak) and its linear-frequency
power spectrogram in decibels, saved per file.

    python spectrogram_pipeline.py AUDIO_DIR OUT.npz
"""

import glob
import os
import sys

import librosa
import numpy as np

audio_dir, out = sys.argv[1], sys.argv[2]
results = {}
for path in sorted(glob.glob(os.path.join(audio_dir, "*.wav"))):
    y, sr = librosa.load(path, sr=22050, mono=True)
    mel = librosa.feature.melspectrogram(y=y, sr=sr, n_fft=2048, hop_length=512, n_mels=128)
    log_mel = librosa.power_to_db(mel, ref=np.max)
    spec = np.abs(librosa.stft(y, n_fft=1024, hop_length=256)) ** 2
    log_spec = librosa.power_to_db(spec, ref=np.max, top_db=80.0)
    key = os.path.splitext(os.path.basename(path))[0]
    results[f"{key}_mel"] = log_mel.astype(np.float32)
    results[f"{key}_spec"] = log_spec.astype(np.float32)
np.savez(out, **results)
