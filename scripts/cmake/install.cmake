# `cmake --install build --prefix P`: the CLI, the runtime library with its public headers,
# CMake package and pkg-config files, and the op library. Every installed path is relative to
# P, so the prefix can move (the runtime finds its registry relative to its own location).
include(CMakePackageConfigHelpers)

install(TARGETS opforge_runtime EXPORT opforgeTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS opforge RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/opforge
                  ${PROJECT_SOURCE_DIR}/registry/format/include/opforge
                  ${PROJECT_BINARY_DIR}/include/opforge
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)

install(EXPORT opforgeTargets NAMESPACE opforge:: DESTINATION ${OPFORGE_INSTALL_CMAKEDIR}
        COMPONENT development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/opforgeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/opforgeConfig.cmake
  INSTALL_DESTINATION ${OPFORGE_INSTALL_CMAKEDIR}
  PATH_VARS OPFORGE_INSTALL_REGISTRYDIR CMAKE_INSTALL_BINDIR)
# 0.x: a minor release may change the ABI (see the runtime's SOVERSION).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/opforgeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/opforgeConfig.cmake
              ${PROJECT_BINARY_DIR}/opforgeConfigVersion.cmake
        DESTINATION ${OPFORGE_INSTALL_CMAKEDIR} COMPONENT development)

# pkg-config: prefix from the .pc file's own location (${pcfiledir}), so it moves with P.
set(pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
file(RELATIVE_PATH OPFORGE_PC_TO_PREFIX "/p/${pc_dir}" "/p")
configure_file(${CMAKE_CURRENT_LIST_DIR}/opforge.pc.in ${PROJECT_BINARY_DIR}/opforge.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/opforge.pc DESTINATION ${pc_dir} COMPONENT development)

if(OPFORGE_BUILD_OPLIB)
  # The registry as `opforge build` left it; refuse to install a half-built one.
  install(CODE "
    if(NOT EXISTS \"${OPFORGE_DEFAULT_REGISTRY}/index.json\")
      message(FATAL_ERROR \"no op library at ${OPFORGE_DEFAULT_REGISTRY}: run 'cmake --build ${PROJECT_BINARY_DIR}' first\")
    endif()" COMPONENT registry)
  install(DIRECTORY ${OPFORGE_DEFAULT_REGISTRY}/ DESTINATION ${OPFORGE_INSTALL_REGISTRYDIR}
          COMPONENT registry USE_SOURCE_PERMISSIONS)
endif()
