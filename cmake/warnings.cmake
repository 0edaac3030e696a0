# Warning discipline for kiln's own code (not for users of the headers).
add_library(kn_warnings INTERFACE)
target_compile_options(kn_warnings INTERFACE
  -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
  -Wconversion -Wno-sign-conversion -Wundef -Wwrite-strings
  -Wold-style-definition -Wvla)
if(KN_WERROR)
  target_compile_options(kn_warnings INTERFACE -Werror)
endif()
if(KN_SANITIZE)
  target_compile_options(kn_warnings INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(kn_warnings INTERFACE -fsanitize=address,undefined)
endif()
if(KN_TSAN)
  target_compile_options(kn_warnings INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(kn_warnings INTERFACE -fsanitize=thread)
endif()
