"""The in-process route: a transformers model behind the provider interface.

:class:`TransformersProvider` is the ``transformers`` provider of ``query``:
the engine hands it one clip at a time, as it does to an HTTP provider, and
the provider gathers the clips that arrive together (up to ``batch_size``)
into one batched ``generate`` call run in a worker thread. Everything the
query path does around a request (the store, resume, error rows, the run
record) applies unchanged.

What it does for each batch: the clip (decoded by the engine to mono at the
processor's feature-extractor rate, 16-bit WAV) is read back as float32; the
conversation (the model's system prompt, then the audio and the prompt in one
user turn) goes through the processor's own chat template; the processor
builds the features and pads the batch on the left; ``generate`` decodes
greedily (temperature 0 or unset) or samples (temperature > 0: clip by clip,
each seeded alike); only the new tokens are decoded. The finish reason is ``stop`` when
an end-of-sequence token came and ``length`` when ``max_tokens`` ran out.

Only architectures that transformers ships are loaded, never a checkpoint's
own code (``trust_remote_code``): those raise :class:`RemoteCodeRequired`,
naming what the model needs instead. Qwen2.5-Omni loads its thinker only
(text output, as the AGL1K reference code ran it with the talker disabled).
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..exceptions import ParameterError
from .audio import PreparedAudio
from .protocol import Provider, ProviderError, Reply

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "MAX_BATCH",
    "RemoteCodeRequired",
    "TransformersProvider",
    "resolve_device",
    "resolve_dtype",
]

_log = logging.getLogger("agl_fast.alm.hf_backend")

#: ``max_new_tokens`` when neither the model's settings nor ``--max-tokens`` give one.
DEFAULT_MAX_NEW_TOKENS = 1024
#: Largest ``--batch-size``: a batch's decoded clips are held in memory at once.
MAX_BATCH = 256
#: A batch closes when it is full or no clip has joined it for this long (s).
BATCH_WAIT_S = 0.25
#: Parameters the in-process route turns into ``generate`` arguments.
_USED = frozenset({"max_tokens", "temperature", "top_p", "top_k", "seed"})
DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")
#: Architectures whose weights hold more than the text path needs: the class
#: that generates text from the same checkpoint.
_TEXT_CLASS = {"qwen2_5_omni": "Qwen2_5OmniThinkerForConditionalGeneration"}


class RemoteCodeRequired(ParameterError):
    """A model whose architecture transformers does not ship: it runs only
    with its own code, which agl-fast does not execute in-process."""


def resolve_device(device: str) -> str:
    """``auto`` is ``cuda`` when a GPU is visible, else ``cpu``.

    Raises
    ------
    ParameterError
        An unknown name, or ``cuda`` without a GPU.
    """
    import torch

    if device not in DEVICES and not device.startswith("cuda:"):
        raise ParameterError(f"--device must be one of {DEVICES} or cuda:N, got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError(f"--device {device}: torch sees no CUDA device")
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    """The torch dtype: ``auto`` is bfloat16 on a GPU that has it (else
    float16) and float32 on the CPU."""
    import torch

    if dtype not in DTYPES:
        raise ParameterError(f"--dtype must be one of {DTYPES}, got {dtype!r}")
    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, dtype)


def _model_class(config: Any, name: str) -> Any:
    """The transformers class that generates text for ``config``."""
    import transformers

    arch = _TEXT_CLASS.get(getattr(config, "model_type", ""))
    if arch is None:
        archs = getattr(config, "architectures", None) or []
        arch = archs[0] if archs else None
    cls = getattr(transformers, arch, None) if arch else None
    if cls is None:
        raise RemoteCodeRequired(
            f"{name}: architecture {arch!r} is not a transformers class; the model needs its own "
            "modelling code (trust_remote_code), "
            "which agl-fast does not run in-process (serve it with vLLM and use --provider vllm)"
        )
    return cls


def _read_limit(fe: Any) -> int | None:
    """Samples the feature extractor reads of a clip at most by default
    (Whisper's ``n_samples``, or a ``max_length`` it truncates to), or None."""
    import inspect

    n = getattr(fe, "n_samples", None)
    if isinstance(n, int) and n > 0:
        return n
    try:
        sig = inspect.signature(fe.__call__).parameters
    except (TypeError, ValueError):
        return None
    ml, tr = sig.get("max_length"), sig.get("truncation")
    if ml is not None and tr is not None and tr.default is True and isinstance(ml.default, int):
        return ml.default
    return None


def _gen_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    """``generate`` arguments from the request parameters."""
    mt = params.get("max_tokens")
    kw: dict[str, Any] = {"max_new_tokens": int(mt) if mt else DEFAULT_MAX_NEW_TOKENS}
    t = params.get("temperature")
    if t is None or float(t) == 0.0:
        kw["do_sample"] = False
        return kw
    kw.update(do_sample=True, temperature=float(t))
    if params.get("top_p") is not None:
        kw["top_p"] = float(params["top_p"])
    if params.get("top_k") is not None:
        kw["top_k"] = int(params["top_k"])
    return kw


@dataclass
class _Item:
    prompt: str
    audio: np.ndarray | None


class TransformersProvider(Provider):
    """The ``transformers`` provider: see the module notes.

    Parameters
    ----------
    name : str
        ``"transformers"``.
    key : None
        Unused (kept for the provider signature).
    model_id : str
        Hugging Face repository or local directory.
    device, dtype : str
        See :func:`resolve_device` and :func:`resolve_dtype`.
    batch_size : int
        Clips per ``generate`` call at most.
    system_prompt : str or None
        System message placed before each clip.
    needs : str or None
        What the model needs beyond transformers' classes (a registry
        entry's ``needs``): set, it raises :class:`RemoteCodeRequired` at
        once, before anything is loaded.
    revision : str or None
        Checkpoint revision (branch, tag or commit).
    """

    def __init__(
        self,
        name: str,
        key: str | None = None,
        *,
        model_id: str,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 4,
        system_prompt: str | None = None,
        needs: str | None = None,
        revision: str | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(name, None, **kw)
        if needs:
            raise RemoteCodeRequired(
                f"{model_id} does not run in-process: it needs {needs}; agl-fast runs only "
                "architectures that transformers ships (see docs/models.md for its route)"
            )
        import transformers  # noqa: F401  (a missing one: the cli's pip line for the hf extra)

        if not (isinstance(batch_size, int) and 1 <= batch_size <= MAX_BATCH):
            raise ParameterError(
                f"--batch-size must be between 1 and {MAX_BATCH}, got {batch_size!r}"
            )
        self.model_id = model_id
        self.batch_size = batch_size
        self.system_prompt = system_prompt
        self.revision = revision
        self.device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype, self.device)
        self.model: Any = None
        self.processor = self._load_processor()
        self._pending: list[tuple[_Item, asyncio.Future[Reply]]] = []
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._warned: set[str] = set()
        #: clips longer than the processor reads (it keeps their beginning)
        self.n_cut = 0

    # -- loading -----------------------------------------------------------
    def _load_processor(self) -> Any:
        from transformers import AutoConfig, AutoProcessor

        kw = {"revision": self.revision} if self.revision else {}
        try:
            self.config = AutoConfig.from_pretrained(self.model_id, **kw)
        except ValueError as exc:
            # an unknown model_type: the checkpoint ships its own code
            raise RemoteCodeRequired(
                f"{self.model_id}: transformers cannot read its configuration ({exc}); the model "
                "needs its own modelling code (trust_remote_code), which agl-fast "
                "does not run in-process (serve it with vLLM and use --provider vllm)"
            ) from None
        self.model_class = _model_class(self.config, self.model_id)
        processor = AutoProcessor.from_pretrained(self.model_id, **kw)
        fe = getattr(processor, "feature_extractor", None) or getattr(
            processor, "audio_processor", None
        )
        rate = getattr(fe, "sampling_rate", None)
        tok = getattr(processor, "tokenizer", None)
        template = getattr(processor, "chat_template", None)
        tok_template = getattr(tok, "chat_template", None)
        if template is None and tok_template is not None:
            # some checkpoints keep the template with the tokenizer only
            processor.chat_template = template = tok_template
        if not isinstance(rate, int) or rate <= 0 or template is None:
            raise ParameterError(
                f"{self.model_id}: its processor has no audio feature extractor with a sampling "
                "rate or no chat template; it cannot take an audio turn"
            )
        if tok is not None:
            tok.padding_side = "left"  # decoder-only batches pad on the left
        self.sampling_rate = rate
        self.read_limit = _read_limit(fe)
        return processor

    def open(self) -> None:
        """Load the weights onto the device (once; the first batch calls it
        otherwise)."""
        if self.model is not None:
            return
        kw = {"revision": self.revision} if self.revision else {}
        t0 = time.monotonic()
        model = self.model_class.from_pretrained(self.model_id, dtype=self.torch_dtype, **kw)
        self.model = model.to(self.device).eval()
        _log.info(
            "loaded %s (%s) on %s as %s in %.1f s", self.model_id, self.model_class.__name__,
            self.device, self.torch_dtype, time.monotonic() - t0,
        )  # fmt: skip

    # -- one batch (worker thread) ------------------------------------------
    def _conversation(self, item: _Item) -> list[dict[str, Any]]:
        conv: list[dict[str, Any]] = []
        if self.system_prompt:
            system = [{"type": "text", "text": self.system_prompt}]
            conv.append({"role": "system", "content": system})
        content: list[dict[str, Any]] = []
        if item.audio is not None:
            content.append({"type": "audio", "audio": "clip"})
        content.append({"type": "text", "text": item.prompt})
        conv.append({"role": "user", "content": content})
        return conv

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for src in (getattr(self.model, "generation_config", None), self.config):
            e = getattr(src, "eos_token_id", None)
            ids.update([e] if isinstance(e, int) else list(e or []))
        tok = getattr(self.processor, "tokenizer", None)
        if tok is not None and isinstance(tok.eos_token_id, int):
            ids.add(tok.eos_token_id)
        return ids

    def generate(self, items: list[_Item], params: dict[str, Any]) -> list[Reply]:
        """Answer ``items`` in one ``generate`` call (blocking)."""
        import torch

        self.open()
        texts = [
            self.processor.apply_chat_template(self._conversation(i), add_generation_prompt=True,
                                               tokenize=False)
            for i in items
        ]  # fmt: skip
        audios = [i.audio for i in items if i.audio is not None]
        kw: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True}
        if audios:
            kw.update(audio=audios, sampling_rate=self.sampling_rate)
        inputs = self.processor(**kw)
        inputs = {
            k: (v.to(self.device, self.torch_dtype) if v.is_floating_point() else v.to(self.device))
            if isinstance(v, torch.Tensor) else v
            for k, v in inputs.items()
        }  # fmt: skip
        gen = _gen_kwargs(params)
        if gen["do_sample"] and params.get("seed") is not None:
            torch.manual_seed(int(params["seed"]))
        tok = getattr(self.processor, "tokenizer", self.processor)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        _log.debug("generate: a batch of %d clips, %d new tokens at most",
                   len(items), gen["max_new_tokens"])  # fmt: skip
        with torch.inference_mode():
            out = self.model.generate(**inputs, **gen, pad_token_id=pad)
        seqs = out if isinstance(out, torch.Tensor) else out.sequences
        n_in = inputs["input_ids"].shape[1]
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        eos = self._eos_ids()
        replies = []
        for row, pt in zip(seqs[:, n_in:].tolist(), prompt_tokens, strict=True):
            stop = next((j for j, t in enumerate(row) if t in eos), None)
            ids = row if stop is None else row[: stop + 1]
            text = tok.decode(ids, skip_special_tokens=True)
            replies.append(
                Reply(text=text, finish_reason="length" if stop is None else "stop",
                      prompt_tokens=int(pt), completion_tokens=len(ids))
            )  # fmt: skip
        return replies

    def _run(self, items: list[_Item], params: dict[str, Any]) -> list[Reply | BaseException]:
        """A batch, and on a failure each clip alone, so one bad clip fails alone.

        Sampled decoding runs clip by clip, each seeded alike, so an answer
        does not depend on which clips happened to share its batch."""
        sampled = _gen_kwargs(params)["do_sample"]
        if sampled and len(items) > 1 and "sampled" not in self._warned:
            self._warned.add("sampled")
            _log.info("temperature > 0: clips are generated one at a time, each seeded alike")
        try:
            if not sampled:
                return list(self.generate(items, params))
        except Exception as exc:
            if len(items) == 1:
                return [exc]
            _log.warning("a batch of %d failed (%s); answering its clips one by one",
                         len(items), type(exc).__name__)  # fmt: skip
        results: list[Reply | BaseException] = []
        for it in items:
            try:
                results.append(self.generate([it], params)[0])
            except Exception as exc:
                results.append(exc)
        return results

    # -- the provider interface -------------------------------------------
    def _waveform(self, audio: PreparedAudio) -> np.ndarray:
        import soundfile as sf

        y, sr = sf.read(io.BytesIO(audio.data), dtype="float32", always_2d=True)
        y = y.mean(axis=1)
        if sr != self.sampling_rate:
            import soxr

            y = soxr.resample(y, sr, self.sampling_rate).astype(np.float32)
        if self.read_limit is not None and len(y) > self.read_limit:
            self.n_cut += 1
            if "cut" not in self._warned:
                self._warned.add("cut")
                _log.warning(
                    "the processor of %s reads the first %.1f s of a clip (a %.1f s clip and "
                    "every longer one are cut; counted in run.json)", self.model_id,
                    self.read_limit / self.sampling_rate, len(y) / self.sampling_rate,
                )  # fmt: skip
        return np.ascontiguousarray(y)

    def _note_unused(self, params: dict[str, Any]) -> None:
        unused = sorted(k for k in params if k not in _USED and params[k] is not None)
        key = ",".join(unused)
        if unused and key not in self._warned:
            self._warned.add(key)
            _log.warning(
                "the transformers route does not use %s (recorded with each answer only)",
                ", ".join(unused),
            )

    async def _gather(self, fut: asyncio.Future[Reply], params: dict[str, Any]) -> None:
        """Run batches until ``fut`` has its answer; one batch at a time."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            # one lock per event loop: a provider may serve several runs
            self._lock, self._lock_loop = asyncio.Lock(), loop
        lock = self._lock
        while not fut.done():
            async with lock:
                if fut.done():
                    return
                seen, last = len(self._pending), time.monotonic()
                while len(self._pending) < self.batch_size:
                    if len(self._pending) != seen:
                        seen, last = len(self._pending), time.monotonic()
                    elif time.monotonic() - last >= BATCH_WAIT_S:
                        break
                    await asyncio.sleep(0.005)
                batch = self._pending[: self.batch_size]
                del self._pending[: self.batch_size]
                results = await asyncio.to_thread(self._run, [i for i, _ in batch], params)
                for (_, f), r in zip(batch, results, strict=True):
                    if f.done():
                        continue
                    if isinstance(r, BaseException):
                        f.set_exception(r)
                    else:
                        f.set_result(r)

    async def complete(
        self, client: Any, model: str, prompt: str, audio: PreparedAudio | None,
        params: dict[str, Any],
    ) -> Reply:  # fmt: skip
        """Queue one clip and wait for its batch; a failure is a
        non-retryable :class:`ProviderError` (``GenerationError`` or
        ``OutOfMemory``) stored as the clip's error row."""
        try:
            return await self._complete(client, model, prompt, audio, params)
        except ProviderError:
            raise
        except Exception as exc:
            kind = "OutOfMemory" if "OutOfMemory" in type(exc).__name__ else "GenerationError"
            raise ProviderError(
                f"transformers: {type(exc).__name__}: {str(exc)[:300]}", error_type=kind
            ) from None

    async def _complete(
        self, client: Any, model: str, prompt: str, audio: PreparedAudio | None,
        params: dict[str, Any],
    ) -> Reply:  # fmt: skip
        """Queue one clip and wait for the batch it joins (no HTTP deadline:
        the model runs here; errors are mapped by :meth:`complete`)."""
        self._note_unused(params)
        item = _Item(prompt, None if audio is None else self._waveform(audio))
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending.append((item, fut))
        await self._gather(fut, params)
        return fut.result()
