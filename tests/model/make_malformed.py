#!/usr/bin/env python3
"""Writes the model-file test data of tests/model/ with the Python standard library only.

  tests/model/malformed/<case>/      one broken model directory per case (config.json + weights)
  tests/model/malformed/expected.json  case -> substring the loader's error message must contain
  tests/model/pyref/<case>/          valid models and files written independently of the C++
                                     writer, which the C++ tests load and compare byte for byte

Tensor bytes follow pattern(n, seed): byte j = (31*j + 7*seed + 1) mod 256, where seed is the
tensor's position in the architecture's expected order (tests/model/pyref_test.cpp recomputes it).

Usage: make_malformed.py            regenerate in place
       make_malformed.py --check    regenerate into a temporary directory and compare (CI)
"""
import argparse
import filecmp
import json
import os
import shutil
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "I16": 16, "U16": 16,
        "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "F64": 64, "I64": 64, "U64": 64}


def pattern(n, seed):
    return bytes((31 * j + 7 * seed + 1) % 256 for j in range(n))


def nbytes(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8


def encode_header(header):
    """Compact JSON (keys in insertion order) padded with spaces to a multiple of 8 bytes."""
    text = header if isinstance(header, bytes) else json.dumps(
        header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, data bytes), stored contiguously in that order."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    return header, b"".join(blobs)


def safetensors_aligned(tensors, metadata=None):
    """Like safetensors(), but the data section holds the widest element types first (stable
    order), as ceiling's writer lays it out; the header keeps the given order."""
    layout = sorted(range(len(tensors)), key=lambda i: -BITS[tensors[i][1]])
    offsets, offset = {}, 0
    for i in layout:
        offsets[i] = offset
        offset += len(tensors[i][3])
    header = {"__metadata__": metadata} if metadata else {}
    for i, (name, dtype, shape, data) in enumerate(tensors):
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offsets[i], offsets[i] + len(data)]}
    return header, b"".join(tensors[i][3] for i in layout)


def file_bytes(header, data):
    return encode_header(header) + data


# --- the architecture, written from the Hugging Face naming (independent of the C++ code) -------

def tiny_config(**over):
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 16,
         "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 1,
         "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-5,
         "rope_theta": 10000.0, "max_position_embeddings": 64, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2}
    c.update(over)
    return c


def expected(cfg):
    """[(name, shape)] in the order the loader documents."""
    V, H, I = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    Hq = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", Hq)
    D = cfg.get("head_dim", H // Hq)
    bias = cfg.get("attention_bias", cfg["model_type"] == "qwen2")
    qk_norm = cfg["model_type"] == "qwen3"
    out = [("model.embed_tokens.weight", [V, H])]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", [H]),
                (p + "self_attn.q_proj.weight", [Hq * D, H]),
                (p + "self_attn.k_proj.weight", [Hkv * D, H]),
                (p + "self_attn.v_proj.weight", [Hkv * D, H])]
        if bias:
            out += [(p + "self_attn.q_proj.bias", [Hq * D]),
                    (p + "self_attn.k_proj.bias", [Hkv * D]),
                    (p + "self_attn.v_proj.bias", [Hkv * D])]
        if qk_norm:
            out += [(p + "self_attn.q_norm.weight", [D]), (p + "self_attn.k_norm.weight", [D])]
        out += [(p + "self_attn.o_proj.weight", [H, Hq * D]),
                (p + "post_attention_layernorm.weight", [H]),
                (p + "mlp.gate_proj.weight", [I, H]),
                (p + "mlp.up_proj.weight", [I, H]),
                (p + "mlp.down_proj.weight", [H, I])]
    out.append(("model.norm.weight", [H]))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [V, H]))
    return out


def model_tensors(cfg, dtype):
    return [(name, dtype, shape, pattern(nbytes(dtype, shape), seed))
            for seed, (name, shape) in enumerate(expected(cfg))]


class Writer:
    def __init__(self, root):
        self.root = root

    def put(self, rel, content):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, (dict, list)):
            content = (json.dumps(content, indent=2) + "\n").encode()
        with open(path, "wb") as f:
            f.write(content)


def write_sharded(w, case, cfg, tensors, split, index_edit=None, shard_edit=None):
    """Two shards: tensors[:split] and tensors[split:], plus the index (optionally edited)."""
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    parts = [tensors[:split], tensors[split:]]
    index = {"metadata": {"total_size": sum(len(t[3]) for t in tensors)}, "weight_map": {}}
    for shard, part in zip(names, parts):
        header, data = safetensors(part)
        if shard_edit:
            header, data = shard_edit(shard, header, data)
        if header is not None:
            w.put(f"{case}/{shard}", file_bytes(header, data))
        for t in part:
            index["weight_map"][t[0]] = shard
    w.put(f"{case}/config.json", cfg)
    index_text = json.dumps(index, indent=2).encode()
    if index_edit:
        index_text = index_edit(index_text)
    w.put(f"{case}/model.safetensors.index.json", index_text)


def malformed(w):
    cfg = tiny_config()
    good = model_tensors(cfg, "BF16")
    expected_errors = {}

    def case(name, message, content=None, header=None, data=None, config=None, extra=None):
        expected_errors[name] = message
        w.put(f"{name}/config.json", config if config is not None else cfg)
        if content is None:
            h, d = safetensors(good)
            content = file_bytes(header if header is not None else h, data if data is not None else d)
        w.put(f"{name}/model.safetensors", content)
        for rel, c in (extra or {}).items():
            w.put(f"{name}/{rel}", c)

    def edited(fn, tensors=None):
        h, d = safetensors(tensors or good)
        fn(h)
        return h

    valid_header, valid_data = safetensors(good)
    valid = file_bytes(valid_header, valid_data)

    # --- the file layer ---
    case("truncated_file", "truncated file", content=valid[:-10])
    case("empty_file", "shorter than the 8-byte header length", content=b"\x10\x00\x00")
    case("huge_header_length", "header too large",
         content=struct.pack("<Q", 1 << 40) + valid[8:])
    case("header_past_eof", "header past EOF",
         content=struct.pack("<Q", len(valid)) + valid[8:])
    raw = json.dumps(valid_header, separators=(",", ":")).encode()
    case("header_not_utf8", "not valid UTF-8",
         content=encode_header(raw.replace(b'"model.norm.weight"', b'"model.norm.w\xffight"')) +
         valid_data)
    case("header_not_object", "header is not a JSON object",
         content=encode_header(b"[1,2,3]") + valid_data)
    case("header_leading_space", "must start with '{'",
         content=encode_header(b" " + raw) + valid_data)
    case("header_invalid_json", "header is not valid JSON",
         content=encode_header(raw[:-1]) + valid_data)
    case("unknown_dtype", "unknown dtype 'F17'",
         header=edited(lambda h: h["model.norm.weight"].update(dtype="F17")))
    case("negative_shape", "bad shape",
         header=edited(lambda h: h["model.norm.weight"].update(shape=[-8])))
    case("float_shape", "bad shape",
         header=edited(lambda h: h["model.norm.weight"].update(shape=[8.0])))
    case("shape_not_list", "'shape' must be a list",
         header=edited(lambda h: h["model.norm.weight"].update(shape=8)))
    case("shape_overflow", "overflows 64 bits",
         header=edited(lambda h: h["model.norm.weight"].update(shape=[1 << 62, 1 << 62])))
    case("size_mismatch", "size mismatch",
         header=edited(lambda h: h["model.norm.weight"].update(shape=[7])))
    case("missing_dtype", "missing 'dtype'",
         header=edited(lambda h: h["model.norm.weight"].pop("dtype")))
    case("missing_data_offsets", "missing 'data_offsets'",
         header=edited(lambda h: h["model.norm.weight"].pop("data_offsets")))
    case("offsets_reversed", "end before they begin",
         header=edited(lambda h: h["model.norm.weight"].update(
             data_offsets=h["model.norm.weight"]["data_offsets"][::-1])))
    case("offsets_three_values", "must be [begin, end]",
         header=edited(lambda h: h["model.norm.weight"]["data_offsets"].append(0)))

    def overlap(h):  # lm_head starts 2 bytes early: overlaps model.norm.weight
        b, e = h["lm_head.weight"]["data_offsets"]
        h["lm_head.weight"]["data_offsets"] = [b - 2, e - 2]
    case("overlapping_offsets", "overlapping offsets", header=edited(overlap),
         data=valid_data[:-2])

    def gap(h):  # lm_head starts 2 bytes late
        b, e = h["lm_head.weight"]["data_offsets"]
        h["lm_head.weight"]["data_offsets"] = [b + 2, e + 2]
    case("gap_between_tensors", "gap between tensors", header=edited(gap),
         data=valid_data + b"\0\0")
    case("trailing_bytes", "trailing bytes", data=valid_data + b"\0" * 8)
    dup = raw[:-1] + b',"model.norm.weight":' + json.dumps(
        valid_header["model.norm.weight"], separators=(",", ":")).encode() + b"}"
    case("duplicate_tensor", "appears twice", content=encode_header(dup) + valid_data)
    case("metadata_not_strings", "__metadata__",
         header=dict(__metadata__={"format": 1}, **valid_header))

    # --- the model layer ---
    case("missing_tensor", "missing tensor 'model.norm.weight'",
         content=file_bytes(*safetensors([t for t in good if t[0] != "model.norm.weight"])))
    kshape = [8, 8]
    case("wrong_shape", "wrong shape", content=file_bytes(*safetensors(
        [(n, d, kshape, pattern(nbytes(d, kshape), 3)) if n.endswith("k_proj.weight") else
         (n, d, s, b) for n, d, s, b in good])))
    case("bad_dtype_for_weight", "bad dtype", content=file_bytes(*safetensors(
        [(n, "I32", s, pattern(nbytes("I32", s), 0)) if n.startswith("model.embed") else
         (n, d, s, b) for n, d, s, b in good])))
    case("unviewable_dtype_for_weight", "has dtype U16", content=file_bytes(*safetensors(
        [(n, "U16", s, b) if n == "model.norm.weight" else (n, d, s, b) for n, d, s, b in good])))
    case("unsupported_bias", "unsupported model variant", content=file_bytes(*safetensors(
        good + [("model.layers.0.self_attn.o_proj.bias", "BF16", [8], pattern(16, 9))])))
    case("config_unsupported_arch", "unsupported architecture",
         config=tiny_config(model_type="gpt2", architectures=["GPT2LMHeadModel"]))
    case("config_missing_field", "missing field 'hidden_size'",
         config={k: v for k, v in cfg.items() if k != "hidden_size"})
    case("generation_config_bad_type", "'temperature' must be a number",
         extra={"generation_config.json": {"temperature": "hot"}})
    expected_errors["no_weights"] = "only safetensors weights are supported"
    w.put("no_weights/config.json", cfg)

    # --- sharded models ---
    split = 6
    expected_errors["index_missing_shard"] = "does not exist"
    write_sharded(w, "index_missing_shard", cfg, good, split,
                  shard_edit=lambda s, h, d: (None, None) if s.startswith("model-00002") else (h, d))
    expected_errors["shard_outside_dir"] = "not a plain file name"
    write_sharded(w, "shard_outside_dir", cfg, good, split, index_edit=lambda t: t.replace(
        b'"model-00002-of-00002.safetensors"', b'"../model-00002-of-00002.safetensors"'))
    expected_errors["shard_absolute_path"] = "not a plain file name"
    write_sharded(w, "shard_absolute_path", cfg, good, split, index_edit=lambda t: t.replace(
        b'"model-00002-of-00002.safetensors"', b'"/etc/model-00002-of-00002.safetensors"'))

    def drop_norm(shard, h, d):  # the index still lists model.norm.weight in shard 2
        if shard.startswith("model-00002"):
            kept = [t for t in good[split:] if t[0] != "model.norm.weight"]
            return safetensors(kept)
        return h, d
    expected_errors["tensor_absent_from_shard"] = "but that shard does not contain it"
    write_sharded(w, "tensor_absent_from_shard", cfg, good, split, shard_edit=drop_norm)

    def norm_in_both(shard, h, d):
        if shard.startswith("model-00001"):
            return safetensors(good[:split] + [t for t in good if t[0] == "model.norm.weight"])
        return h, d
    expected_errors["tensor_in_two_shards"] = "one shard only"
    write_sharded(w, "tensor_in_two_shards", cfg, good, split, shard_edit=norm_in_both)

    def extra_in_shard(shard, h, d):
        if shard.startswith("model-00001"):
            return safetensors(good[:split] + [("not.in.index", "U8", [3], b"abc")])
        return h, d
    expected_errors["shard_tensor_not_in_index"] = "is not listed in"
    write_sharded(w, "shard_tensor_not_in_index", cfg, good, split, shard_edit=extra_in_shard)
    expected_errors["index_duplicate_tensor"] = "listed twice in weight_map"
    write_sharded(w, "index_duplicate_tensor", cfg, good, split, index_edit=lambda t: t.replace(
        b'"weight_map": {', b'"weight_map": {\n    "model.norm.weight": '
        b'"model-00002-of-00002.safetensors",', 1))
    expected_errors["index_not_json"] = "not valid JSON"
    write_sharded(w, "index_not_json", cfg, good, split, index_edit=lambda t: t[:-3])
    expected_errors["index_weight_map_not_object"] = "'weight_map' is missing or not an object"
    write_sharded(w, "index_weight_map_not_object", cfg, good, split,
                  index_edit=lambda t: b'{"weight_map": []}')

    w.put("expected.json", dict(sorted(expected_errors.items())))


def pyref(w):
    # Single-file Llama, BF16, with __metadata__ and an unexpected extra tensor.
    cfg = tiny_config(num_hidden_layers=2)
    tensors = model_tensors(cfg, "BF16") + [
        ("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", [2], pattern(8, 99))]
    w.put("llama_bf16/config.json", cfg)
    w.put("llama_bf16/generation_config.json",
          {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 50,
           "bos_token_id": 1, "eos_token_id": [2, 3], "transformers_version": "4.45.0"})
    w.put("llama_bf16/model.safetensors",
          file_bytes(*safetensors(tensors, {"format": "pt"})))

    # Qwen2 (QKV bias), F16, three shards listed by an index.
    cfg = tiny_config(architectures=["Qwen2ForCausalLM"], model_type="qwen2", num_hidden_layers=2,
                      torch_dtype="float16")
    tensors = model_tensors(cfg, "F16")
    cuts = [0, 7, 20, len(tensors)]
    index = {"metadata": {"total_size": sum(len(t[3]) for t in tensors)}, "weight_map": {}}
    for k in range(3):
        shard = f"model-{k + 1:05d}-of-00003.safetensors"
        part = tensors[cuts[k]:cuts[k + 1]]
        w.put(f"qwen2_f16_sharded/{shard}", file_bytes(*safetensors(part)))
        index["weight_map"].update({t[0]: shard for t in part})
    w.put("qwen2_f16_sharded/config.json", cfg)
    w.put("qwen2_f16_sharded/model.safetensors.index.json", index)

    # Qwen3 (q/k norm), F32, tied embeddings, head_dim set explicitly.
    cfg = tiny_config(architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=6,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                      torch_dtype="float32")
    w.put("qwen3_f32_tied/config.json", cfg)
    w.put("qwen3_f32_tied/model.safetensors", file_bytes(*safetensors(model_tensors(cfg, "F32"))))

    # Every dtype the parser knows, including a scalar and an empty tensor.
    odd = [("bool", "BOOL", [5]), ("u8", "U8", [3, 1]), ("i8", "I8", [2, 3]),
           ("e5m2", "F8_E5M2", [7]), ("e4m3", "F8_E4M3", [1, 9]), ("i16", "I16", [5]),
           ("u16", "U16", [2, 2]), ("f16", "F16", [3]), ("bf16", "BF16", [3, 3]),
           ("i32", "I32", [2]), ("u32", "U32", [1]), ("f32", "F32", [2, 1, 3]),
           ("f64", "F64", []), ("i64", "I64", [2]), ("u64", "U64", [1]), ("empty", "F32", [4, 0])]
    w.put("all_dtypes.safetensors", file_bytes(*safetensors(
        [(n, d, s, pattern(nbytes(d, s), k)) for k, (n, d, s) in enumerate(odd)])))

    # What the C++ writer must reproduce byte for byte (writer_test.cpp declares the same list).
    golden = [("w.f32", "F32", [3, 5]), ("w.bf16", "BF16", [7]), ("w.i8", "I8", [2, 3, 1]),
              ("w.empty", "U8", [0]), ("w.scalar", "F64", []), ("w.bool", "BOOL", [4]),
              ("w.e4m3", "F8_E4M3", [9]), ("w.i64", "I64", [1])]
    w.put("writer_golden.safetensors", file_bytes(*safetensors_aligned(
        [(n, d, s, pattern(nbytes(d, s), k)) for k, (n, d, s) in enumerate(golden)],
        {"format": "pt", "producer": "ceiling-test"})))


def generate(root):
    malformed(Writer(os.path.join(root, "malformed")))
    pyref(Writer(os.path.join(root, "pyref")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="compare a fresh generation with the committed files instead of writing")
    args = ap.parse_args()
    if not args.check:
        for sub in ("malformed", "pyref"):
            shutil.rmtree(os.path.join(HERE, sub), ignore_errors=True)
        generate(HERE)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp)
        bad = []
        for sub in ("malformed", "pyref"):
            bad += compare(os.path.join(tmp, sub), os.path.join(HERE, sub), sub)
        for line in bad:
            print(line, file=sys.stderr)
        if bad:
            print("test data is stale: run tests/model/make_malformed.py", file=sys.stderr)
        return 1 if bad else 0


def compare(fresh, committed, prefix):
    out = []
    cmp = filecmp.dircmp(fresh, committed)
    out += [f"missing: {prefix}/{n}" for n in cmp.left_only]
    out += [f"extra: {prefix}/{n}" for n in cmp.right_only]
    for n in cmp.common_files:
        if not filecmp.cmp(os.path.join(fresh, n), os.path.join(committed, n), shallow=False):
            out.append(f"differs: {prefix}/{n}")
    for d in cmp.common_dirs:
        out += compare(os.path.join(fresh, d), os.path.join(committed, d), f"{prefix}/{d}")
    return out


if __name__ == "__main__":
    sys.exit(main())
