# One place for compiler warnings: every attnkit target links attnkit_warnings.
# (-Wnull-dereference is left out: with GCC 12 at -O2 it fires inside libstdc++'s
# streambuf for any std::ifstream use.)
add_library(attnkit_warnings INTERFACE)
target_compile_options(attnkit_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wformat=2
    -Wimplicit-fallthrough>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${ATTNKIT_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --Werror=all-warnings>)
