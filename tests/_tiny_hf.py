"""Tiny random-weight audio-language models built from configs, saved as
local checkpoints (never downloaded): Qwen2.5-Omni and Phi-4-multimodal, each
with a character-level tokenizer, its processor's feature extractor at
default settings and a chat template of the model's turn format."""

from __future__ import annotations

from pathlib import Path

_CHARS = [chr(c) for c in range(32, 127)] + ["\n"]


def _tokenizer(specials: list[str], named: dict[str, str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(_CHARS)}
    for s in ["<|endoftext|>", *specials, *named.values()]:
        vocab.setdefault(s, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=named,
    )
    tok.add_special_tokens({"additional_special_tokens": specials})
    return tok


def _template(audio: str, start: str, end: str, assistant: str) -> str:
    """A Jinja chat template: ``start`` + role, the turn's parts (``audio``
    for an audio part), ``end``; then the assistant's opening."""
    return (
        "{% for m in messages %}" + start + "{{ m['role'] }}"
        "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
        "{% for c in m['content'] %}{% if c['type'] == 'audio' %}" + audio + "{% else %}"
        "{{ c['text'] }}{% endif %}{% endfor %}{% endif %}" + end + "{% endfor %}"
        "{% if add_generation_prompt %}" + assistant + "{% endif %}"
    )


def build_qwen25_omni(path: Path, seed: int = 0) -> Path:
    """A Qwen2_5OmniForConditionalGeneration (thinker only, no talker) and its processor."""
    import torch
    from transformers import (
        Qwen2_5OmniConfig,
        Qwen2_5OmniForConditionalGeneration,
        Qwen2_5OmniProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        WhisperFeatureExtractor,
    )

    named = {
        "audio_token": "<|AUDIO|>",
        "audio_bos_token": "<|audio_bos|>",
        "audio_eos_token": "<|audio_eos|>",
        "image_token": "<|IMAGE|>",
        "video_token": "<|VIDEO|>",
        "vision_bos_token": "<|vision_bos|>",
        "vision_eos_token": "<|vision_eos|>",
    }
    tok = _tokenizer(["<|im_start|>", "<|im_end|>"], named)
    template = _template(
        "<|audio_bos|><|AUDIO|><|audio_eos|>", "<|im_start|>", "<|im_end|>\n",
        "<|im_start|>assistant\n",
    )  # fmt: skip
    # 2-second feature windows keep the tiny audio tower fast
    fe = WhisperFeatureExtractor(feature_size=128, chunk_length=2)
    proc = Qwen2_5OmniProcessor(
        image_processor=Qwen2VLImageProcessor(),
        video_processor=Qwen2VLVideoProcessor(),
        feature_extractor=fe,
        tokenizer=tok,
        chat_template=template,
    )
    ids = tok.convert_tokens_to_ids
    cfg = Qwen2_5OmniConfig(
        enable_audio_output=False,
        thinker_config={
            "audio_config": {"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 2,
                             "encoder_ffn_dim": 32, "d_model": 16, "output_dim": 32,
                             "n_window": 50},
            "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 32,
                              "num_heads": 2, "out_hidden_size": 32, "fullatt_block_indexes": [0]},
            "text_config": {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64,
                            "num_hidden_layers": 1, "num_attention_heads": 2,
                            "num_key_value_heads": 1, "eos_token_id": tok.eos_token_id,
                            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                "mrope_section": [2, 3, 3]}},
            "audio_token_index": ids("<|AUDIO|>"),
            "audio_start_token_id": ids("<|audio_bos|>"),
            "audio_end_token_id": ids("<|audio_eos|>"),
            "image_token_index": ids("<|IMAGE|>"),
            "video_token_index": ids("<|VIDEO|>"),
            "vision_start_token_id": ids("<|vision_bos|>"),
        },
    )  # fmt: skip
    torch.manual_seed(seed)
    Qwen2_5OmniForConditionalGeneration(cfg).save_pretrained(path)
    proc.save_pretrained(path)
    return path


def build_phi4_multimodal(path: Path, seed: int = 0) -> Path:
    """A Phi4MultimodalForCausalLM and its processor."""
    import torch
    from transformers import (
        Phi4MultimodalConfig,
        Phi4MultimodalFeatureExtractor,
        Phi4MultimodalForCausalLM,
        Phi4MultimodalImageProcessor,
        Phi4MultimodalProcessor,
    )

    tok = _tokenizer(
        ["<|user|>", "<|assistant|>", "<|system|>", "<|end|>"],
        {"image_token": "<|image|>", "audio_token": "<|audio|>"},
    )
    proc = Phi4MultimodalProcessor(
        image_processor=Phi4MultimodalImageProcessor(),
        audio_processor=Phi4MultimodalFeatureExtractor(),
        tokenizer=tok,
        chat_template=_template("<|audio|>", "<|", "<|end|>", "<|assistant|>").replace(
            "{{ m['role'] }}", "{{ m['role'] }}|>"
        ),
    )
    eos = tok.eos_token_id
    cfg = Phi4MultimodalConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, bos_token_id=eos, eos_token_id=eos,
        pad_token_id=eos,
        vision_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
                       "num_attention_heads": 2, "image_token_id": tok.image_token_id},
        audio_config={"hidden_size": 16, "intermediate_size": 32, "num_blocks": 1,
                      "num_attention_heads": 2, "ext_pw_out_channel": 16,
                      "depthwise_separable_out_channel": 16, "nemo_conv_channels": 16,
                      "audio_token_id": tok.audio_token_id},
    )  # fmt: skip
    torch.manual_seed(seed)
    Phi4MultimodalForCausalLM(cfg).save_pretrained(path)
    proc.save_pretrained(path)
    return path
