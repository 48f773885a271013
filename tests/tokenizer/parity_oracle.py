#!/usr/bin/env python3
"""Expected ids and texts from Hugging Face `tokenizers` for ceiling's tokenizer parity test.

Run by ctest as a fixture (FIXTURES_SETUP) so the comparison is always against the installed
library. For every tokenizer under <data>/tokenizers it writes, into <out>/<name>.json:
  cases:  the corpus (tests/tokenizer/corpus/*.txt, cases separated by "\\n----\\n") plus the
          empty string, then `random_strings` seeded random strings; for each the ids with and
          without special tokens and the decode of the former with skip_special_tokens
          False/True;
  decode: random id sequences (byte tokens, special tokens, out-of-range ids) and their decodes.
Variants (<out>/variants/*.json) exercise what the real files do not: each is a real or a tiny
synthetic tokenizer.json with one component swapped (other pre-tokenizers and split behaviors,
normalizers, added-token flags, decoders, post-processors), checked on the corpus and fewer
random strings. <out>/index.json lists every result file.
The seed is CEILING_TOKENIZER_SEED when set, else random; it is printed and stored.
"""
import copy
import argparse
import json
import os
import random
import sys
import time

from tokenizers import Tokenizer

TOKENIZERS = ["gpt2", "llama3", "qwen2.5", "mistral-7b-instruct-v0.3", "tinyllama"]
SEP = "\n----\n"


def load_hf(path):
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    return Tokenizer.from_file(path), spec


def write(out_dir, name, result):
    with open(os.path.join(out_dir, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=True)


def corpus_cases(corpus_dir):
    cases = [""]
    for fn in sorted(os.listdir(corpus_dir)):
        if fn.endswith(".txt"):
            with open(os.path.join(corpus_dir, fn), encoding="utf-8", newline="") as f:
                cases.extend(f.read().split(SEP))
    return cases


def char_classes(specials):
    def rng(lo, hi):
        return lambda r: chr(r.randint(lo, hi))

    def pick(s):
        return lambda r: r.choice(s)

    def blocks(ranges):
        return lambda r: chr(r.randint(*r.choice(ranges)))

    return [
        (20, pick("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")),
        (6, pick("0123456789")),
        (10, pick(" ")),
        (3, pick(["  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\r"])),
        (5, pick("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")),
        (2, pick(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL"])),
        (3, rng(0xC0, 0x24F)),     # Latin-1 / Extended letters
        (2, rng(0x300, 0x36F)),    # combining marks
        (4, rng(0x4E00, 0x9FFF)),  # CJK
        (2, rng(0x3041, 0x30FF)),  # kana
        (2, rng(0xAC00, 0xD7A3)),  # Hangul syllables
        (2, rng(0x1100, 0x11FF)),  # Hangul jamo (NFC composes some)
        (2, rng(0x400, 0x4FF)),    # Cyrillic
        (1, rng(0x370, 0x3FF)),    # Greek
        (1, rng(0x600, 0x6FF)),    # Arabic
        (1, rng(0x5D0, 0x5EA)),    # Hebrew
        (1, rng(0x900, 0x97F)),    # Devanagari
        (3, rng(0x1F600, 0x1F64F)),  # emoji
        (1, rng(0x1F3FB, 0x1F3FF)),  # skin tones
        (1, pick(["\u200d", "\ufe0f", "\u20e3"])),  # ZWJ, VS16, keycap
        (1, pick(["\u00a0", "\u2000", "\u2009", "\u3000", "\u180e", "\u2028", "\u0085", "\u200b", "\ufeff"])),
        (1, rng(0x0, 0x1F)),       # control characters
        (1, pick(["\u212b", "\u2126", "\ufb01", "\u1e9b", "\u0958", "\u017f", "\u0130"])),  # NFC-changing
        # Supplementary planes, from blocks assigned long ago: PCRE2 10.42 knows Unicode 14 only,
        # so letters assigned since (e.g. Garay, U+10D40) would split differently from HF.
        (1, blocks([(0x10000, 0x1005D), (0x10330, 0x1034A), (0x1D400, 0x1D6A5), (0x1D7CE, 0x1D7FF),
                    (0x1F300, 0x1F5FF), (0x20000, 0x2A6DF), (0xE0020, 0xE007F), (0x10FFF0, 0x10FFFD)])),
        (1, rng(0xE000, 0xF8FF)),  # private use
        (2, pick(specials) if specials else pick(["<x>"])),
    ]


def random_strings(r, n, specials):
    classes = char_classes(specials)
    weights = [w for w, _ in classes]
    out = []
    for _ in range(n):
        length = r.choice([0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89])
        out.append("".join(r.choices(classes, weights)[0][1](r) for _ in range(length)))
    return out


def random_id_lists(r, n, tok, spec):
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    byte_ids = [tok.token_to_id(f"<0x{b:02X}>") for b in range(256)]
    byte_ids = [i for i in byte_ids if i is not None]
    added = [t["id"] for t in spec.get("added_tokens", [])]
    out = []
    for _ in range(n):
        ids = []
        for _ in range(r.randint(0, 24)):
            k = r.random()
            if k < 0.15 and byte_ids:
                ids.append(r.choice(byte_ids))
            elif k < 0.25 and added:
                ids.append(r.choice(added))
            elif k < 0.28:
                ids.append(vocab_size + r.randint(0, 300))  # names no token: dropped
            else:
                ids.append(r.randrange(vocab_size))
        out.append(ids)
    return out


def added(content, id_, special=False, **flags):
    t = {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": not special, "special": special}
    t.update(flags)
    return t


def bpe_suffix_model():
    """A tiny word-level BPE with end_of_word_suffix and the BPEDecoder."""
    letters = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'"
    vocab = {"<unk>": 0}
    for c in letters:
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    merges = []
    for a, b in [("t", "h"), ("th", "e</w>"), ("i", "n"), ("in", "g</w>"), ("a", "n"), ("an", "d</w>")]:
        vocab.setdefault(a + b, len(vocab))
        merges.append([a, b])
    return {"version": "1.0", "added_tokens": [added("<unk>", 0, True)],
            "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": None, "decoder": {"type": "BPEDecoder", "suffix": "</w>"},
            "model": {"type": "BPE", "unk_token": "<unk>", "end_of_word_suffix": "</w>", "fuse_unk": True,
                      "vocab": vocab, "merges": merges}}


def variants(real, synthetic_dir):
    """(name, spec) pairs: real tokenizer.json files with one component swapped."""
    out = []

    def derive(base, name, **changes):
        spec = copy.deepcopy(real[base])
        for path, value in changes.items():
            node = spec
            keys = path.split("__")
            for k in keys[:-1]:
                node = node[k]
            node[keys[-1]] = value
        out.append((name, spec))
        return spec

    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    g = derive("gpt2", "gpt2_prefix_space_added_flags",
               pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True})
    g["added_tokens"] += [added("<mask>", 50257, lstrip=True, rstrip=True), added("ing", 50258, single_word=True),
                          added("Hello", 15496, normalized=True), added("[SP]", 50259, True, single_word=True,
                                                                      lstrip=True)]
    for behavior in ["Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous", "Isolated"]:
        for invert in [False, True] if behavior in ("Removed", "Contiguous") else [False]:
            derive("gpt2", f"gpt2_split_{behavior.lower()}{'_invert' if invert else ''}",
                   pre_tokenizer={"type": "Sequence", "pretokenizers": [
                       {"type": "Split", "pattern": {"Regex": "\\d+|\\s|[.,!?]"}, "behavior": behavior,
                        "invert": invert}, bl]})
    derive("gpt2", "gpt2_split_string", pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False}, bl]})
    derive("gpt2", "gpt2_whitespace", pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Whitespace"}, bl]})
    derive("gpt2", "gpt2_wsplit_digits_punct", pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": True},
        {"type": "Punctuation", "behavior": "Isolated"}, bl]})
    derive("gpt2", "gpt2_digits_contiguous", pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False}, {**bl, "use_regex": True}]})
    derive("gpt2", "gpt2_nfkc_lowercase",
           normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]})
    derive("gpt2", "gpt2_nfd_stripaccents_strip",
           normalizer={"type": "Sequence", "normalizers": [
               {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Strip", "strip_left": True, "strip_right": True}]})
    derive("gpt2", "gpt2_replace_append",
           normalizer={"type": "Sequence", "normalizers": [
               {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "#"},
               {"type": "Replace", "pattern": {"String": "  "}, "content": " "}]})
    derive("gpt2", "gpt2_no_decoder", decoder=None)
    derive("gpt2", "gpt2_wordpiece_decoder", decoder={"type": "WordPiece", "prefix": "Ġ", "cleanup": True})
    derive("gpt2", "gpt2_replace_decoder", decoder={"type": "Sequence", "decoders": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        {"type": "Replace", "pattern": {"String": "ab"}, "content": "<AB>"},
        {"type": "Strip", "content": "!", "start": 2, "stop": 0}]})
    derive("gpt2", "gpt2_roberta", post_processor={
        "type": "RobertaProcessing", "sep": ["<|endoftext|>", 50256], "cls": ["<|endoftext|>", 50256],
        "trim_offsets": True, "add_prefix_space": False})
    derive("gpt2", "gpt2_template_bos_eos", post_processor={"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "E", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "E", "type_id": 0}}],
         "pair": [], "special_tokens": {"E": {"id": "E", "ids": [50256], "tokens": ["<|endoftext|>"]}}}]})
    derive("llama3", "llama3_no_ignore_merges", model__ignore_merges=False)
    meta = {"type": "Metaspace", "replacement": "\u2581"}
    for scheme, split in [("always", True), ("first", True), ("never", False), ("always", False)]:
        derive("tinyllama", f"tinyllama_metaspace_{scheme}_{'split' if split else 'nosplit'}", normalizer=None,
               pre_tokenizer={**meta, "prepend_scheme": scheme, "split": split},
               decoder={"type": "Sequence", "decoders": [
                   {**meta, "prepend_scheme": scheme, "split": split}, {"type": "ByteFallback"}, {"type": "Fuse"}]}
               if scheme != "never" else real["tinyllama"]["decoder"])
    derive("tinyllama", "tinyllama_unk_fused", model__byte_fallback=False)
    derive("tinyllama", "tinyllama_unk_unfused", model__byte_fallback=False, model__fuse_unk=False)
    t = derive("tinyllama", "tinyllama_normalized_added")
    for a in t["added_tokens"]:
        a["normalized"] = True
    t["added_tokens"].append(added("ello", 32000, normalized=True, single_word=True))
    derive("mistral-7b-instruct-v0.3", "mistral_strip_both", decoder={"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Strip", "content": " ", "start": 0, "stop": 1}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 2, "stop": 0}]})
    # (HF's Strip panics when `stop` meets an empty or all-stripped string, so stop > 0 is only
    # used per token above, where tokens are never empty.)
    derive("mistral-7b-instruct-v0.3", "mistral_legacy_metaspace",
           pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True})
    out.append(("bpe_suffix", bpe_suffix_model()))
    for fn in sorted(os.listdir(synthetic_dir)):
        if fn.endswith(".json"):
            with open(os.path.join(synthetic_dir, fn), encoding="utf-8") as f:
                out.append(("synthetic_" + fn[:-5], json.load(f)))
    return out


def run_cases(tok, texts, id_lists):
    cases = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=True).ids
        cases.append({
            "text": text,
            "ids": ids,
            "ids_plain": tok.encode(text, add_special_tokens=False).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(ids, skip_special_tokens=True),
        })
    decodes = [{"ids": ids,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(ids, skip_special_tokens=True)} for ids in id_lists]
    return cases, decodes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="data dir (holds tokenizers/): the repository's data/")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--synthetic", required=True, help="dir of small tokenizer.json files")
    ap.add_argument("--model", action="append", default=[], metavar="NAME=DIR",
                    help="also a model directory's tokenizer, when DIR exists (e.g. the fetched "
                         "SmolLM2); written as NAME.json, listed under \"models\" in index.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--random-strings", type=int, default=600)
    ap.add_argument("--random-ids", type=int, default=300)
    args = ap.parse_args()
    seed = int(os.environ.get("CEILING_TOKENIZER_SEED") or random.SystemRandom().randrange(1 << 31))
    print(f"parity oracle: tokenizers {__import__('tokenizers').__version__}, seed {seed} "
          f"(set CEILING_TOKENIZER_SEED={seed} to repeat)")
    os.makedirs(args.out, exist_ok=True)
    corpus = corpus_cases(args.corpus)
    index = []
    real = {}
    dirs = [(name, os.path.join(args.data, "tokenizers", name)) for name in TOKENIZERS]
    models = [m.split("=", 1) for m in args.model]
    models = [(n, d) for n, d in models if os.path.exists(os.path.join(d, "tokenizer.json"))]
    for name, d in dirs + models:
        t0 = time.time()
        tok, spec = load_hf(os.path.join(d, "tokenizer.json"))
        real[name] = spec
        r = random.Random(f"{seed}:{name}")
        specials = [t["content"] for t in spec.get("added_tokens", [])]
        texts = corpus + random_strings(r, args.random_strings, r.sample(specials, min(8, len(specials))))
        cases, decodes = run_cases(tok, texts, random_id_lists(r, args.random_ids, tok, spec))
        config = os.path.join(d, "tokenizer_config.json")
        write(args.out, name, {"name": name, "tokenizer_json": os.path.join(d, "tokenizer.json"),
                               "tokenizer_config": config if os.path.exists(config) else "",
                               "seed": seed, "corpus_cases": len(corpus), "cases": cases, "decode": decodes})
        index.append(name)
        print(f"  {name}: {len(cases)} texts, {len(decodes)} id lists in {time.time() - t0:.1f}s")
    t0 = time.time()
    vdir = os.path.join(args.out, "variants")
    os.makedirs(vdir, exist_ok=True)
    for name, spec in variants(real, args.synthetic):
        path = os.path.join(vdir, f"{name}.tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f, ensure_ascii=False)
        tok = Tokenizer.from_file(path)
        r = random.Random(f"{seed}:{name}")
        specials = [t["content"] for t in spec.get("added_tokens", [])]
        texts = corpus + random_strings(r, args.random_strings // 5, r.sample(specials, min(8, len(specials))))
        cases, decodes = run_cases(tok, texts, random_id_lists(r, args.random_ids // 5, tok, spec))
        write(args.out, "variants/" + name, {
            "name": name, "tokenizer_json": path, "tokenizer_config": "", "seed": seed,
            "corpus_cases": len(corpus), "cases": cases, "decode": decodes})
        index.append("variants/" + name)
    print(f"  {len(index) - len(dirs) - len(models)} variants in {time.time() - t0:.1f}s")
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump({"seed": seed, "results": index, "models": [n for n, _ in models]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
