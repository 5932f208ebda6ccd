# Compiler warnings for onnxamp's own targets (call onnxamp_warnings(target)).
function(onnxamp_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
endfunction()
