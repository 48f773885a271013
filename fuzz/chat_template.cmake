# Chat template renderer: arbitrary template text rendered against a fixed conversation.
if(TARGET ceiling_chat_template)
  target_compile_options(ceiling_chat_template PRIVATE -fsanitize=fuzzer-no-link ${_san})
  ceiling_fuzzer(chat_template SOURCES chat_template_fuzz.cpp DEPS ceiling_chat_template)
endif()
