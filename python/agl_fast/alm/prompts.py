"""Versioned prompt templates.

Every template has a name and a version; the text's SHA-256 (``prompt_hash``)
enters the cache key, so editing a template never reuses stale answers.

``agl1k-reference/v1`` (the default) is the benchmark prompt as the AGL1K
reference code sends it: the ``question`` field of the released answer
files, character for character (four-space indentation, no code fence,
``predicted_longitude_value``, a trailing space after the country line). It
is stored once, as data, in ``data/agl1k_prompts.json``.
``agl1k-typeset/v1`` is the same prompt as the paper typesets it (appendix
B.9.1), verbatim, including its missing comma after the ``reason`` value; it
was the default before and is still reachable as ``agl1k-benchmark/v1``.
``agl1k-contribution/v1`` is the paper's contribution prompt (appendix
B.9.2); ``{categories}`` is replaced by the category list, one a line, and
the reasoning text follows it.

``agl-error-cause/v1`` and ``agl-cues/v1`` are agl-fast's own prompts for
the answer analyses of sections 4.5 and 4.3 (the paper publishes neither):
``{labels}`` is replaced by the allowed labels with their definitions, and
the case (truth, answer, reasoning) follows. Their ids are stored with every
label they produce.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import ParameterError

_TYPESET_V1 = """You are an expert audio analyst with exceptional ability to identify geographical locations from environmental sounds. Listen carefully to the provided audio recording and identify the geographical location where it was recorded.

You MUST provide your best guess regardless of uncertainty. Even if you feel unsure, you must still make an educated guess based on the audio characteristics, ambient sounds, languages spoken, cultural indicators, or any other audio clues you can detect.

Your response MUST be in the following JSON format (replace the values with your predictions):

```
{
  "reason": "Detailed explanation of your reasoning process. Describe what audio clues you heard (e.g., language, accent, background sounds, environmental noise, cultural indicators, weather sounds, traffic patterns, animal sounds, etc.) and how they led you to this specific location prediction. Be specific about the evidence that supports your geographical conclusion."
  "city": "Your predicted city name",
  "country": "Your predicted country name",
  "continent": "Your predicted continent name",
  "longitude": predicted longitude value,
  "latitude": predicted latitude value
}
```

Important requirements:
1. You MUST respond with a complete JSON object - no explanations outside the JSON, no refusals, no uncertainty statements
2. If you're unsure about specific coordinates, provide your best numerical estimate
3. All string values should be in English
4. Longitude should be between -180 and 180
5. Latitude should be between -90 and 90
6. The "reason" field must contain your detailed step-by-step analysis of the audio clues
7. Even if the audio seems generic, you must still provide a location guess with reasoning

Listen to the audio and provide your JSON response now:"""  # noqa: E501

_CONTRIBUTION_V1 = """You are analyzing an audio geolocation reasoning text. Your task is to identify which sound categories from the provided list contributed to the location prediction, and assess their contribution level (0.0 to 1.0).

Available sound categories:
{categories}

Please analyze the reasoning text and identify which categories are mentioned or implied, and how much each category contributed to the location prediction.

Output your response as a JSON object where:
- Each key is a category name (exactly as listed above)
- Each value is a contribution score between 0.0 and 1.0, where:
  * 0.0 = not mentioned/not relevant
  * 0.1-0.3 = mentioned but minor contribution
  * 0.4-0.6 = moderate contribution
  * 0.7-0.9 = significant contribution
  * 1.0 = primary/dominant contribution

Only include categories that have a contribution > 0.0. Output ONLY the JSON object, no additional text or explanation.

Example output format:
```
{
  "Speech": 0.8,
  "Music": 0.3,
  "Animal": 0.2
}
```"""  # noqa: E501


_ERROR_CAUSE_V1 = """You are reviewing a wrong answer of an audio geo-localization model. The model listened to a recording, explained its reasoning and named a place; the country it named is not the country where the recording was made.

Classify the main cause of the error as exactly one of these labels:
{labels}

Judge from the reasoning text and the two places only. Output ONLY a JSON object of the form {"label": "<one label, spelled as listed>"}."""  # noqa: E501

_CUES_V1 = """You are reading the reasoning an audio geo-localization model wrote about a recording. List which kinds of audio evidence the reasoning relies on to place the recording.

The kinds of evidence:
{labels}

Count a kind only when the reasoning uses it as evidence for the location (a sound said to be absent does not count). Output ONLY a JSON object of the form {"labels": [<zero or more labels, spelled as listed>]}."""  # noqa: E501


@dataclass(frozen=True)
class PromptTemplate:
    """A named, versioned prompt; :attr:`sha256` identifies its exact text."""

    name: str
    version: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.name}/{self.version}"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def _packaged(template_id: str) -> PromptTemplate:
    """A template stored as data beside this module (``data/agl1k_prompts.json``)."""
    doc = json.loads((Path(__file__).with_name("data") / "agl1k_prompts.json").read_text("utf-8"))
    name, version = template_id.split("/")
    return PromptTemplate(name, version, doc[template_id]["text"])


TEMPLATES: dict[str, PromptTemplate] = {
    t.id: t
    for t in (
        _packaged("agl1k-reference/v1"),
        PromptTemplate("agl1k-typeset", "v1", _TYPESET_V1),
        PromptTemplate("agl1k-contribution", "v1", _CONTRIBUTION_V1),
        PromptTemplate("agl-error-cause", "v1", _ERROR_CAUSE_V1),
        PromptTemplate("agl-cues", "v1", _CUES_V1),
    )
}
#: Former ids still accepted (what they name now).
ALIASES = {"agl1k-benchmark/v1": "agl1k-typeset/v1"}
DEFAULT_PROMPT = "agl1k-reference/v1"
DEFAULT_JUDGE_PROMPT = "agl1k-contribution/v1"
DEFAULT_CAUSE_PROMPT = "agl-error-cause/v1"
DEFAULT_CUE_PROMPT = "agl-cues/v1"


def get_template(spec: str) -> PromptTemplate:
    """A template by id (``name/version``), by name alone (its latest version),
    by a former id (:data:`ALIASES`), or a text file (``@path``) as ``custom/<hash>``."""
    if spec.startswith("@"):
        text = Path(spec[1:]).read_text(encoding="utf-8").strip()
        if not text:
            raise ParameterError(f"prompt file {spec[1:]!r} is empty")
        h = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        return PromptTemplate("custom", h, text)
    spec = ALIASES.get(spec, spec)
    if "/" not in spec:
        versions = [t.version for t in TEMPLATES.values() if t.name == spec]
        if versions:
            spec = f"{spec}/{max(versions, key=lambda v: (len(v), v))}"
    try:
        return TEMPLATES[spec]
    except KeyError:
        raise ParameterError(
            f"unknown prompt {spec!r}; allowed: {sorted(TEMPLATES)} or @FILE"
        ) from None


def template_for_hash(sha256: str) -> PromptTemplate | None:
    """The known template whose text has this SHA-256, or None."""
    return next((t for t in TEMPLATES.values() if t.sha256 == sha256), None)


def contribution_prompt(categories: list[str], reasoning: str, template: PromptTemplate) -> str:
    """The judge prompt: the template with the category list, then the reasoning text."""
    listed = "\n".join(f"- {c}" for c in categories)
    return template.text.replace("{categories}", listed) + "\n\nReasoning text:\n" + reasoning


def label_prompt(template: PromptTemplate, definitions: dict[str, str], case: str) -> str:
    """A labelling prompt: ``{labels}`` filled with ``- label: definition`` lines, then the case."""
    listed = "\n".join(f"- {k}: {v}" for k, v in definitions.items())
    return template.text.replace("{labels}", listed) + "\n\n" + case
