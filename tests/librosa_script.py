"""A realistic librosa analysis script (34 librosa calls), kept unchanged:
``tests/test_librosa_dropin.py`` runs it under plain librosa and under
``python -m agl_fast.compat.librosa`` and compares what it saves, and
``benches/bench_librosa_script.py`` times both.

    python tests/librosa_script.py AUDIO OUT.npz PNG
"""

import sys

import matplotlib

matplotlib.use("Agg")
import librosa
import librosa.display
import matplotlib.pyplot as plt
import numpy as np

path, out, png = sys.argv[1], sys.argv[2], sys.argv[3]
y, sr = librosa.load(path, sr=22050)
dur = librosa.get_duration(y=y, sr=sr)
file_dur = librosa.get_duration(path=path)
y16 = librosa.resample(y, orig_sr=sr, target_sr=16000)
yt, idx = librosa.effects.trim(y, top_db=40)
intervals = librosa.effects.split(y, top_db=40)
D = librosa.stft(y)
mag, phase = librosa.magphase(D)
y_inv = librosa.istft(D, length=len(y))
S_db = librosa.amplitude_to_db(np.abs(D), ref=np.max)
P_db = librosa.power_to_db(np.abs(D) ** 2)
M = librosa.feature.melspectrogram(y=y, sr=sr, n_mels=128)
M_db = librosa.power_to_db(M, ref=np.max)
mfcc = librosa.feature.mfcc(y=y, sr=sr, n_mfcc=20)
d1 = librosa.feature.delta(mfcc)
d2 = librosa.feature.delta(mfcc, order=2)
rms = librosa.feature.rms(y=y)
flat = librosa.feature.spectral_flatness(y=y)
cent = librosa.feature.spectral_centroid(y=y, sr=sr)
bw = librosa.feature.spectral_bandwidth(y=y, sr=sr)
roll = librosa.feature.spectral_rolloff(y=y, sr=sr)
contrast = librosa.feature.spectral_contrast(S=np.abs(D), sr=sr)
zcr = librosa.feature.zero_crossing_rate(y)
chroma = librosa.feature.chroma_stft(S=np.abs(D) ** 2, sr=sr)
onset_env = librosa.onset.onset_strength(y=y, sr=sr)
onsets = librosa.onset.onset_detect(onset_envelope=onset_env, sr=sr)
onset_times = librosa.frames_to_time(onsets, sr=sr)
tempo, beats = librosa.beat.beat_track(onset_envelope=onset_env, sr=sr)
norm = librosa.util.normalize(y)
mono = librosa.to_mono(np.stack([y, y16[: len(y)] if len(y16) >= len(y) else y]))
pcen = librosa.pcen(M * (2**31), sr=sr)
mel_fb = librosa.filters.mel(sr=sr, n_fft=2048)
fig, ax = plt.subplots(figsize=(6, 3))
librosa.display.specshow(M_db, sr=sr, x_axis="time", y_axis="mel", ax=ax)
fig.savefig(png)
np.savez(
    out,
    y=y, dur=dur, file_dur=file_dur, y16=y16, idx=idx, intervals=intervals, S_db=S_db,
    P_db=P_db, y_inv=y_inv, M_db=M_db, mfcc=mfcc, d1=d1, d2=d2, rms=rms, flat=flat,
    cent=cent, bw=bw, roll=roll, contrast=contrast, zcr=zcr, chroma=chroma,
    onset_env=onset_env, onset_times=onset_times, tempo=tempo, beats=beats, norm=norm,
    mono=mono, pcen=pcen, mel_fb=mel_fb, mag=mag,
)  # fmt: skip
