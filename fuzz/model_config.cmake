# fuzz_model_config: arbitrary bytes as config.json and as generation_config.json.
ceiling_fuzzer(model_config SOURCES model_config_fuzz.cpp DEPS ceiling_model)
