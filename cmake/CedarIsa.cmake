# Per-ISA kernel translation units (the CTranslate2 pattern, EXAMPLES.md §7): src/kernels/<isa>/*.cpp
# are compiled with that ISA's flags and nothing else is, so the binary runs on any x86-64 (or
# other) CPU and src/kernels/select.cpp picks the best table the CPU supports at start-up.
# CEDAR_KERNEL_ISAS lists the ISAs compiled in; each defines CEDAR_HAVE_<ISA>=1 for select.cpp.
include(CheckCXXCompilerFlag)

set(CEDAR_ISA_FLAGS_avx2 -O3 -mavx2 -mfma -mf16c)
set(CEDAR_ISA_FLAGS_avx512 -O3 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c)
set(CEDAR_ISA_FLAGS_avx512bf16 ${CEDAR_ISA_FLAGS_avx512} -mavx512bf16 -mavx512vbmi)

set(CEDAR_KERNEL_ISAS "")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  foreach(isa avx2 avx512 avx512bf16)
    set(ok TRUE)
    foreach(flag ${CEDAR_ISA_FLAGS_${isa}})
      string(MAKE_C_IDENTIFIER "CEDAR_FLAG${flag}" var)
      check_cxx_compiler_flag(${flag} ${var})
      if(NOT ${var})
        set(ok FALSE)
      endif()
    endforeach()
    if(ok)
      list(APPEND CEDAR_KERNEL_ISAS ${isa})
    endif()
  endforeach()
endif()

# cedar_kernel_sources(OUT): every kernel source, with the ISA flags set on the ISA directories.
function(cedar_kernel_sources out)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/kernels/*.cpp
       ${CMAKE_SOURCE_DIR}/src/kernels/ref/*.cpp)
  foreach(isa ${CEDAR_KERNEL_ISAS})
    file(GLOB isrcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/kernels/${isa}/*.cpp)
    set_source_files_properties(${isrcs} PROPERTIES COMPILE_OPTIONS "${CEDAR_ISA_FLAGS_${isa}}")
    list(APPEND srcs ${isrcs})
  endforeach()
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()
