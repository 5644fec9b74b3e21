"""The audio front end of a text-to-speech training recipe: each utterance
loaded at its own rate, resampled to 22,050 Hz, silence trimmed,
pre-emphasised, then an STFT magnitude, an 80-band mel spectrogram and
normalised decibels, as a Tacotron-style ``AudioProcessor`` computes them.

    python tts_frontend.py WAV_DIR OUT.npz
"""

import glob
import os
import sys

import librosa
import numpy as np
import scipy.signal


class AudioProcessor:
    def __init__(self, sample_rate=22050, n_fft=1024, hop_length=256, win_length=1024,
                 num_mels=80, mel_fmin=0.0, mel_fmax=8000.0, preemphasis=0.97,
                 ref_level_db=20, min_level_db=-100, trim_db=45):  # fmt: skip
        self.sample_rate = sample_rate
        self.n_fft, self.hop_length, self.win_length = n_fft, hop_length, win_length
        self.preemphasis = preemphasis
        self.ref_level_db, self.min_level_db, self.trim_db = ref_level_db, min_level_db, trim_db
        self.mel_basis = librosa.filters.mel(
            sr=sample_rate, n_fft=n_fft, n_mels=num_mels, fmin=mel_fmin, fmax=mel_fmax
        )

    def load_wav(self, path):
        x, sr = librosa.load(path, sr=None)
        if sr != self.sample_rate:
            x = librosa.resample(x, orig_sr=sr, target_sr=self.sample_rate)
        x, _ = librosa.effects.trim(x, top_db=self.trim_db, frame_length=1024, hop_length=256)
        return x

    def _stft(self, y):
        return librosa.stft(y=y, n_fft=self.n_fft, hop_length=self.hop_length,
                            win_length=self.win_length, pad_mode="reflect")  # fmt: skip

    def _normalize(self, S):
        return np.clip((S - self.min_level_db) / -self.min_level_db, 0, 1)

    def spectrogram(self, y):
        D = self._stft(scipy.signal.lfilter([1, -self.preemphasis], [1], y))
        S = librosa.amplitude_to_db(np.abs(D)) - self.ref_level_db
        return self._normalize(S).astype(np.float32)

    def melspectrogram(self, y):
        D = self._stft(scipy.signal.lfilter([1, -self.preemphasis], [1], y))
        S = librosa.amplitude_to_db(np.dot(self.mel_basis, np.abs(D))) - self.ref_level_db
        return self._normalize(S).astype(np.float32)


wav_dir, out = sys.argv[1], sys.argv[2]
ap = AudioProcessor()
mels, linears, lengths = [], [], []
for path in sorted(glob.glob(os.path.join(wav_dir, "*.wav"))):
    wav = ap.load_wav(path).astype(np.float32)
    mels.append(ap.melspectrogram(wav))
    linears.append(ap.spectrogram(wav))
    lengths.append(len(wav))
np.savez(out, mel=np.concatenate(mels, axis=1), linear=np.concatenate(linears, axis=1),
         lengths=np.array(lengths))  # fmt: skip
