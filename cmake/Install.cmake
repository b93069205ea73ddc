# `cmake --install <build> --prefix P` installs:
#   P/lib/libattnkit.so.<version> (+ SONAME and development links), or libattnkit.a
#   P/include/attnkit/...             the public headers (+ build_config.h, export.h)
#   P/bin/attnkit                     the CLI
#   P/lib/cmake/attnkit/              attnkitConfig.cmake, attnkitConfigVersion.cmake,
#                                     attnkitTargets*.cmake: find_package(attnkit) gives
#                                     attnkit::attnkit
#   P/lib/pkgconfig/attnkit.pc        pkg-config --cflags --libs attnkit
include(CMakePackageConfigHelpers)

set(ATTNKIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/attnkit)

install(TARGETS attnkit EXPORT attnkitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS attnkit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/attnkit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/generated/attnkit/build_config.h
              ${CMAKE_BINARY_DIR}/generated/attnkit/export.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnkit)
install(EXPORT attnkitTargets NAMESPACE attnkit:: DESTINATION ${ATTNKIT_INSTALL_CMAKEDIR})

# A static libattnkit.a carries its private dependencies to the consumer's link line, so
# the package must find them too.
if(ATTNKIT_BUILD_SHARED)
  set(ATTNKIT_STATIC_PACKAGE OFF)
else()
  set(ATTNKIT_STATIC_PACKAGE ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attnkitConfig.cmake.in
  ${CMAKE_BINARY_DIR}/attnkitConfig.cmake INSTALL_DESTINATION ${ATTNKIT_INSTALL_CMAKEDIR})
# 0.x: only the same minor version is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/attnkitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/attnkitConfig.cmake ${CMAKE_BINARY_DIR}/attnkitConfigVersion.cmake
        DESTINATION ${ATTNKIT_INSTALL_CMAKEDIR})

# pkg-config: a shared library needs only itself (and nlohmann_json's headers); a static
# one lists its private dependencies in Libs.private.
if(ATTNKIT_BUILD_SHARED)
  set(ATTNKIT_PC_STATIC_CFLAGS "")
else()
  set(ATTNKIT_PC_STATIC_CFLAGS " -DATTNKIT_STATIC_DEFINE")
endif()
set(ATTNKIT_PC_LIBS_PRIVATE "-lspdlog -lfmt -lgomp -ldl")
if(ATTNKIT_HAS_CUDA)
  if(ATTNKIT_CUDA_RUNTIME STREQUAL "Static")
    string(APPEND ATTNKIT_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt -lpthread")
  else()
    string(APPEND ATTNKIT_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
  endif()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/attnkit.pc.in ${CMAKE_BINARY_DIR}/attnkit.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/attnkit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
