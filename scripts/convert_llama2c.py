#!/usr/bin/env python3
"""Converts a llama2.c model (legacy v0 .bin, fp32) and its tokenizer (.bin) into a Hugging Face
Llama model directory: config.json, model.safetensors (f32, kept as the original so outputs match
it), tokenizer.json, tokenizer_config.json, generation_config.json.

    python3 scripts/convert_llama2c.py --model stories260K.bin --tokenizer tok512.bin \
        --license LICENSE --out models/stories260K [--expected expected_greedy.txt]

Layout notes
  * llama2.c rotates interleaved pairs (x[2i], x[2i+1]) of each head; Hugging Face's Llama rotates
    halves (x[i], x[i + D/2]). The q and k projections are permuted row-wise exactly as in
    transformers' convert_llama_weights_to_hf.py, so the HF forward computes the same function.
  * The tokenizer is sentencepiece-style BPE with byte fallback: llama2.c's encode() merges, at
    each step, the adjacent pair whose concatenation is the vocabulary piece with the highest
    score (leftmost on ties). The HF merges list is every split (a, b) of every piece into two
    pieces, ordered by the piece's score (then by a's and b's ids), which reproduces that greedy
    merging; --verify checks it against a Python re-implementation of encode() over a corpus.

Verification (numpy only; the tokenizers check runs when the `tokenizers` package is present):
  * the llama2.c forward (interleaved RoPE, original weights) and a Hugging Face-layout forward
    (rotate-half RoPE, converted weights) give the same logits;
  * greedy decoding from BOS for 256 steps, printed as llama2.c's run.c prints, equals --expected;
  * tokenizer.json encodes like llama2.c's encode() and decodes back.
Only numpy is needed to convert.
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------------------------
# llama2.c files


def read_model(path):
    """Legacy (v0) llama2.c checkpoint: 7 int32 header fields, then fp32 weights."""
    with open(path, "rb") as f:
        data = f.read()
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = struct.unpack_from("<7i", data, 0)
    shared = vocab > 0
    vocab = abs(vocab)
    cfg = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads,
               vocab=vocab, seq_len=seq_len, shared=shared)
    head = dim // n_heads
    kv_dim = n_kv_heads * head
    w = np.frombuffer(data, dtype="<f4", offset=28)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        if pos + n > w.size:
            sys.exit(f"{path}: file too short for tensor of shape {shape}")
        t = w[pos:pos + n].reshape(shape).copy()
        pos += n
        return t

    W = {}
    W["tok"] = take(vocab, dim)
    W["rms_att"] = take(n_layers, dim)
    W["wq"] = take(n_layers, dim, dim)
    W["wk"] = take(n_layers, kv_dim, dim)
    W["wv"] = take(n_layers, kv_dim, dim)
    W["wo"] = take(n_layers, dim, dim)
    W["rms_ffn"] = take(n_layers, dim)
    W["w1"] = take(n_layers, hidden, dim)
    W["w2"] = take(n_layers, dim, hidden)
    W["w3"] = take(n_layers, hidden, dim)
    W["rms_final"] = take(dim)
    take(seq_len, head // 2)  # freq_cis_real (unused: recomputed)
    take(seq_len, head // 2)  # freq_cis_imag
    W["cls"] = W["tok"] if shared else take(vocab, dim)
    if pos != w.size:
        sys.exit(f"{path}: {w.size - pos} trailing floats; not a legacy llama2.c checkpoint?")
    return cfg, W


def read_tokenizer(path, vocab_size):
    with open(path, "rb") as f:
        data = f.read()
    (max_len,) = struct.unpack_from("<i", data, 0)
    off = 4
    pieces, scores = [], []
    for _ in range(vocab_size):
        score, n = struct.unpack_from("<fi", data, off)
        off += 8
        pieces.append(data[off:off + n])
        scores.append(score)
        off += n
    if off != len(data):
        sys.exit(f"{path}: {len(data) - off} trailing bytes")
    return pieces, scores, max_len


# ---------------------------------------------------------------------------------------------
# llama2.c's encode() and decode(), re-implemented (run.c semantics)


class Llama2cTokenizer:
    def __init__(self, pieces, scores):
        self.pieces = pieces
        self.scores = scores
        self.lookup = {p: i for i, p in enumerate(pieces)}

    def encode(self, text, bos=False, eos=False):
        """run.c encode(): dummy-prefix token, one token per UTF-8 code point (bytes + 3 when
        absent), then repeatedly merge the adjacent pair forming the best-scoring piece."""
        tokens = [1] if bos else []
        raw = text.encode("utf-8")
        if raw:
            tokens.append(self.lookup[b" "])
        for ch in text:
            b = ch.encode("utf-8")
            if b in self.lookup:
                tokens.append(self.lookup[b])
            else:
                tokens.extend(x + 3 for x in b)
        start = 1 if bos else 0
        while True:
            best, best_id, best_i = -1e10, -1, -1
            for i in range(start, len(tokens) - 1):
                merged = self.pieces[tokens[i]] + self.pieces[tokens[i + 1]]
                j = self.lookup.get(merged)
                if j is not None and self.scores[j] > best:
                    best, best_id, best_i = self.scores[j], j, i
            if best_i == -1:
                break
            tokens[best_i:best_i + 2] = [best_id]
        if eos:
            tokens.append(2)
        return tokens

    def decode_piece(self, prev, token):
        """The bytes run.c prints for `token` after `prev` (decode() + safe_printf())."""
        piece = self.pieces[token]
        if prev == 1 and piece.startswith(b" "):
            piece = piece[1:]
        if len(piece) == 6 and piece.startswith(b"<0x") and piece.endswith(b">"):
            piece = bytes([int(piece[3:5], 16)])
        if len(piece) == 1 and not (32 <= piece[0] < 127 or piece[0] in b" \t\n\v\f\r"):
            return b""  # safe_printf skips unprintable single bytes
        return piece


# ---------------------------------------------------------------------------------------------
# Forwards (fp32, numpy): llama2.c layout and Hugging Face layout


def rmsnorm(x, w):
    return w * (x / np.sqrt(np.mean(x * x, dtype=np.float32) + np.float32(1e-5)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def attention(q, ks, vs, n_heads, n_kv_heads, head):
    out = np.zeros_like(q)
    group = n_heads // n_kv_heads
    for h in range(n_heads):
        qh = q[h * head:(h + 1) * head]
        kh = ks[:, (h // group) * head:(h // group + 1) * head]
        vh = vs[:, (h // group) * head:(h // group + 1) * head]
        s = kh @ qh / np.sqrt(np.float32(head))
        s = np.exp(s - s.max())
        out[h * head:(h + 1) * head] = (s / s.sum()) @ vh
    return out


class Forward:
    """One-token-at-a-time forward. layout='llama2c' uses interleaved RoPE on the original q/k;
    layout='hf' uses rotate-half RoPE on the permuted q/k of the converted checkpoint."""

    def __init__(self, cfg, W, layout):
        self.c, self.W, self.layout = cfg, W, layout
        self.head = cfg["dim"] // cfg["n_heads"]
        self.reset()

    def reset(self):
        self.k = [[] for _ in range(self.c["n_layers"])]
        self.v = [[] for _ in range(self.c["n_layers"])]

    def rope(self, x, pos, n):
        hd = self.head
        x = x.reshape(n, hd).copy()
        i = np.arange(0, hd, 2, dtype=np.float32)
        freq = (np.float32(1.0) / np.power(np.float32(10000.0), i / np.float32(hd))).astype(np.float32)
        ang = np.float32(pos) * freq
        c, s = np.cos(ang), np.sin(ang)
        if self.layout == "llama2c":
            a, b = x[:, 0::2].copy(), x[:, 1::2].copy()
            x[:, 0::2], x[:, 1::2] = a * c - b * s, a * s + b * c
        else:
            a, b = x[:, :hd // 2].copy(), x[:, hd // 2:].copy()
            x[:, :hd // 2], x[:, hd // 2:] = a * c - b * s, b * c + a * s
        return x.reshape(-1)

    def step(self, token, pos):
        c, W = self.c, self.W
        x = W["tok"][token].copy()
        for l in range(c["n_layers"]):
            h = rmsnorm(x, W["rms_att"][l])
            q, k, v = W["wq"][l] @ h, W["wk"][l] @ h, W["wv"][l] @ h
            q, k = self.rope(q, pos, c["n_heads"]), self.rope(k, pos, c["n_kv_heads"])
            self.k[l].append(k)
            self.v[l].append(v)
            a = attention(q, np.array(self.k[l]), np.array(self.v[l]), c["n_heads"],
                          c["n_kv_heads"], self.head)
            x = x + W["wo"][l] @ a
            h = rmsnorm(x, W["rms_ffn"][l])
            x = x + W["w2"][l] @ (silu(W["w1"][l] @ h) * (W["w3"][l] @ h))
        return W["cls"] @ rmsnorm(x, W["rms_final"])


def permute(w, n_heads):
    """Interleaved-pair rows -> rotate-half rows, per head (transformers' permute())."""
    dim1, dim2 = w.shape
    return w.reshape(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(0, 2, 1, 3).reshape(dim1, dim2)


def hf_weights(cfg, W):
    """The llama2.c weights in HF row layout (q/k permuted), keyed like W."""
    H = dict(W)
    H["wq"] = np.stack([permute(w, cfg["n_heads"]) for w in W["wq"]])
    H["wk"] = np.stack([permute(w, cfg["n_kv_heads"]) for w in W["wk"]])
    return H


# ---------------------------------------------------------------------------------------------
# Writers


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, t in tensors.items():
        n = t.nbytes
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for t in tensors.values():
            f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())


def hf_tensors(cfg, H):
    t = {"model.embed_tokens.weight": H["tok"]}
    for l in range(cfg["n_layers"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = H["rms_att"][l]
        t[p + "self_attn.q_proj.weight"] = H["wq"][l]
        t[p + "self_attn.k_proj.weight"] = H["wk"][l]
        t[p + "self_attn.v_proj.weight"] = H["wv"][l]
        t[p + "self_attn.o_proj.weight"] = H["wo"][l]
        t[p + "post_attention_layernorm.weight"] = H["rms_ffn"][l]
        t[p + "mlp.gate_proj.weight"] = H["w1"][l]
        t[p + "mlp.down_proj.weight"] = H["w2"][l]
        t[p + "mlp.up_proj.weight"] = H["w3"][l]
    t["model.norm.weight"] = H["rms_final"]
    if not cfg["shared"]:
        t["lm_head.weight"] = H["cls"]
    return t


def special_piece(i):
    return {0: "<unk>", 1: "<s>", 2: "</s>"}.get(i)


def hf_piece(p):
    """llama2.c piece bytes -> HF vocab string (spaces become the sentencepiece '▁')."""
    return p.decode("utf-8").replace(" ", "\u2581")


def build_tokenizer_json(pieces, scores):
    vocab = {}
    for i, p in enumerate(pieces):
        vocab[special_piece(i) or hf_piece(p)] = i
    if len(vocab) != len(pieces):
        sys.exit("tokenizer: duplicate pieces after the '▁' mapping")
    # Every split of a mergeable piece into two vocabulary pieces is a merge; a piece's merges
    # rank by its score (higher first), then by the left and right ids, so HF's lowest-rank-first
    # merging follows llama2.c's highest-score-first merging.
    merges = []
    for i, p in enumerate(pieces):
        if i < 3 or (p.startswith(b"<0x") and len(p) == 6):
            continue
        s = hf_piece(p)
        for cut in range(1, len(s)):
            a, b = s[:cut], s[cut:]
            if a in vocab and b in vocab and vocab[a] >= 3 and vocab[b] >= 3:
                merges.append((-scores[i], i, vocab[a], vocab[b], a, b))
    merges.sort()
    special = lambda i, c: {"id": i, "content": c, "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True}
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": "<unk>",
            "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": vocab,
            "merges": [f"{a} {b}" for *_, a, b in merges]},
    }


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def convert(cfg, W, pieces, scores, out, license_path, source_name):
    os.makedirs(out, exist_ok=True)
    head = cfg["dim"] // cfg["n_heads"]
    write_json(os.path.join(out, "config.json"), {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg["vocab"],
        "hidden_size": cfg["dim"],
        "intermediate_size": cfg["hidden"],
        "num_hidden_layers": cfg["n_layers"],
        "num_attention_heads": cfg["n_heads"],
        "num_key_value_heads": cfg["n_kv_heads"],
        "head_dim": head,
        "hidden_act": "silu",
        "max_position_embeddings": cfg["seq_len"],
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": cfg["shared"],
        "torch_dtype": "float32",
        "bos_token_id": 1,
        "eos_token_id": 2,
    })
    # llama2.c ends a sample at BOS (stories are separated by BOS in training), so BOS stops
    # generation too.
    write_json(os.path.join(out, "generation_config.json"), {
        "bos_token_id": 1, "eos_token_id": [2, 1], "do_sample": True, "temperature": 1.0,
        "top_p": 0.9, "max_new_tokens": 256})
    write_json(os.path.join(out, "tokenizer_config.json"), {
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "pad_token": None, "clean_up_tokenization_spaces": False,
        "legacy": True, "model_max_length": cfg["seq_len"], "tokenizer_class": "LlamaTokenizer",
        "added_tokens_decoder": {str(i): {"content": c, "lstrip": False, "normalized": False,
                                          "rstrip": False, "single_word": False, "special": True}
                                 for i, c in ((0, "<unk>"), (1, "<s>"), (2, "</s>"))}})
    write_json(os.path.join(out, "tokenizer.json"), build_tokenizer_json(pieces, scores))
    write_safetensors(os.path.join(out, "model.safetensors"), hf_tensors(cfg, hf_weights(cfg, W)))
    if license_path:
        shutil.copyfile(license_path, os.path.join(out, os.path.basename(license_path)))
    print(f"wrote {out} from {source_name}")


# ---------------------------------------------------------------------------------------------
# Verification


def check_layouts(cfg, W, steps=24):
    """The llama2.c forward and the HF-layout forward agree position by position."""
    a, b = Forward(cfg, W, "llama2c"), Forward(cfg, hf_weights(cfg, W), "hf")
    tok = 1
    worst = 0.0
    for pos in range(steps):
        la, lb = a.step(tok, pos), b.step(tok, pos)
        worst = max(worst, float(np.max(np.abs(la - lb)) / np.max(np.abs(la))))
        tok = int(np.argmax(la))
    print(f"layout check: max relative logit difference over {steps} steps {worst:.2e}")
    if worst > 1e-5:
        sys.exit("layout check FAILED: the q/k permutation does not reproduce llama2.c")


def greedy_text(cfg, W, tok, steps=256):
    """run.c with -t 0 and an empty prompt: prints each token after BOS, stops at BOS, then \\n."""
    f = Forward(cfg, W, "llama2c")
    token, out = 1, b""
    for pos in range(steps):
        nxt = int(np.argmax(f.step(token, pos)))
        if nxt == 1:
            break
        out += tok.decode_piece(token, nxt)
        token = nxt
    return out + b"\n"


CORPUS = [
    "Once upon a time, there was a little girl named Lily.",
    "She loved to play outside in the park. One day, she saw a big, red ball.",
    "  leading spaces and trailing   ",
    "Tabs\tand\nnewlines\n\nand unicode: café, naïve, “quotes”, — dashes… 你好 🙂",
    "The the THE tHe. Theirs? there! 12345 + 67 = 890; [a] (b) {c} <d> |e| ~f~ \\g/",
    "a", " ", "", "aaaaaaaaaaaaaaaaaaaaaaaa", "ababababab abab", "  ",
    "Tom and Sue went to the store to buy some apples and bananas for their mom.",
]


def corpus(expected_text, pieces):
    texts = list(CORPUS)
    if expected_text:
        texts += expected_text.split("\n")
        texts.append(expected_text)
    rng = np.random.default_rng(0)
    alphabet = list("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ.,!?'\"-\n\t0123456789éñ—你🙂")
    for _ in range(300):
        n = int(rng.integers(1, 60))
        texts.append("".join(alphabet[int(i)] for i in rng.integers(0, len(alphabet), n)))
    words = "the a was and to he she they it big little happy day play ball tree Lily Tom said".split()
    for _ in range(300):
        texts.append(" ".join(words[int(i)] for i in rng.integers(0, len(words), int(rng.integers(1, 20)))))
    # Runs of vocabulary pieces glued together: the merges of neighbours compete.
    text_pieces = [p.decode("utf-8") for p in pieces[259:]]
    for _ in range(1000):
        idx = rng.integers(0, len(text_pieces), int(rng.integers(1, 16)))
        texts.append("".join(text_pieces[int(i)] for i in idx))
    return texts


def check_tokenizer(out, tok, expected_text):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("tokenizer check skipped: the `tokenizers` package is not installed")
        return
    hf = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    texts = corpus(expected_text, tok.pieces)
    bad = 0
    for t in texts:
        want = tok.encode(t, bos=True)
        got = hf.encode(t).ids
        if got != want:
            bad += 1
            if bad <= 5:
                print(f"encode mismatch for {t!r}:\n  llama2.c {want}\n  HF       {got}")
        dec = hf.decode(got, skip_special_tokens=True)  # the dummy prefix is stripped again
        if dec != t:
            bad += 1
            if bad <= 5:
                print(f"decode mismatch for {t!r}: {dec!r}")
    print(f"tokenizer check: {len(texts)} texts, {bad} mismatches")
    if bad:
        sys.exit("tokenizer check FAILED")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="llama2.c checkpoint (legacy v0 .bin)")
    ap.add_argument("--tokenizer", required=True, help="llama2.c tokenizer .bin")
    ap.add_argument("--out", required=True, help="output model directory")
    ap.add_argument("--license", help="license file to copy beside the model")
    ap.add_argument("--expected", help="expected greedy output (run.c -t 0, 256 steps) to verify")
    ap.add_argument("--no-verify", action="store_true", help="skip the checks")
    args = ap.parse_args()

    cfg, W = read_model(args.model)
    pieces, scores, _ = read_tokenizer(args.tokenizer, cfg["vocab"])
    tok = Llama2cTokenizer(pieces, scores)
    convert(cfg, W, pieces, scores, args.out, args.license, os.path.basename(args.model))
    if args.no_verify:
        return
    check_layouts(cfg, W)
    expected_text = None
    if args.expected:
        with open(args.expected, "rb") as f:
            expected = f.read()
        got = greedy_text(cfg, W, tok)
        if got != expected:
            sys.exit(f"greedy check FAILED:\n--- got\n{got.decode(errors='replace')}\n--- want\n"
                     f"{expected.decode(errors='replace')}")
        print(f"greedy check: 256 steps reproduce {os.path.basename(args.expected)} byte for byte")
        expected_text = expected.decode("utf-8")
    check_tokenizer(args.out, tok, expected_text)


if __name__ == "__main__":
    main()
