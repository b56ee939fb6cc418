# cmake --install: headers, libduet, and a versioned package config so that
# find_package(duet CONFIG REQUIRED) gives duet::runtime.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS duet duet_core EXPORT duetTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY runtime/include/duet DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/duet/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/duet)
# The public headers include these two kernel headers as "softmax_variants.hpp"
# and "softmax_args.hpp"; a quoted include is looked up next to the including
# header first, so installing them beside it (include/duet/) resolves them
# without putting generic names at the top of the include directory.
install(FILES kernels/softmax_variants.hpp kernels/softmax_args.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/duet)
install(EXPORT duetTargets NAMESPACE duet:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/duet)
configure_package_config_file(cmake/duetConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/duetConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/duet)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/duetConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/duetConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/duetConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/duet)
if(DUET_BUILD_TOOLS)
  # Installed tools find the installed libduet relative to themselves.
  set_target_properties(deviceinfo duet-bench PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS deviceinfo duet-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
