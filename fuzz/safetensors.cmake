# fuzz_safetensors: arbitrary bytes through the safetensors header/file parser and the index parser.
ceiling_fuzzer(safetensors SOURCES safetensors_fuzz.cpp DEPS ceiling_model)
