# CUDA is optional. AUTO enables it when a CUDA compiler is found (nvcc in /usr/local/cuda
# or on PATH); a build without it still registers the CUDA backends' capabilities, marked
# "not built into this binary".
set(ATTNKIT_HAS_CUDA OFF)
if(NOT ATTNKIT_ENABLE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80;90")
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag (the kernels include the C++20 core
    # headers): tell it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(ATTNKIT_HAS_CUDA ON)
    # One CUDA runtime for every target: the shared libcudart (the C++ default, as
    # PyTorch's), or cudart_static linked in (the Python wheel, which must not need the
    # toolkit's libcudart.so.13 at run time). Streams and the current device are the
    # driver's, so either runtime works on a caller's stream.
    set(ATTNKIT_CUDA_RUNTIME "Shared" CACHE STRING "The CUDA runtime: Shared (libcudart.so) or Static (cudart_static)")
    set_property(CACHE ATTNKIT_CUDA_RUNTIME PROPERTY STRINGS Shared Static)
    if(ATTNKIT_CUDA_RUNTIME STREQUAL "Shared")
      set(ATTNKIT_CUDART CUDA::cudart)
    elseif(ATTNKIT_CUDA_RUNTIME STREQUAL "Static")
      set(ATTNKIT_CUDART CUDA::cudart_static)
    else()
      message(FATAL_ERROR "ATTNKIT_CUDA_RUNTIME is '${ATTNKIT_CUDA_RUNTIME}'; valid: Shared, Static")
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY ${ATTNKIT_CUDA_RUNTIME})
  elseif(ATTNKIT_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ATTNKIT_ENABLE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
if(ATTNKIT_HAS_CUDA)
  message(STATUS "attnkit: CUDA backends ON, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  set(ATTNKIT_CUDA_ARCHS_STRING "${CMAKE_CUDA_ARCHITECTURES}")
  # Architecture 90 also gets the sm_90a-only kernels (wgmma, setmaxnreg): see
  # src/CMakeLists.txt.
  set(ATTNKIT_CUDA_SM90A OFF)
  if("90" IN_LIST CMAKE_CUDA_ARCHITECTURES OR "90-real" IN_LIST CMAKE_CUDA_ARCHITECTURES)
    set(ATTNKIT_CUDA_SM90A ON)
  endif()
else()
  set(ATTNKIT_CUDA_SM90A OFF)
  message(STATUS "attnkit: CUDA backends OFF (capabilities still registered)")
  set(ATTNKIT_CUDA_ARCHS_STRING "")
endif()
