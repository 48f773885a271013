# Tokenizer fuzzer: the tokenizer.json loader on arbitrary bytes, and encode/decode/stream-decode
# with real tokenizers (GPT-2 byte-level, TinyLlama byte-fallback) on arbitrary input.
ceiling_fuzzer(tokenizer SOURCES tokenizer_fuzz.cpp DEPS ceiling_tokenizer)
target_compile_definitions(fuzz_tokenizer PRIVATE
  CEILING_DATA_DIR="${PROJECT_SOURCE_DIR}/data")
