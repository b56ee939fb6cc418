# cmake --install: headers, libduet, a versioned package config that gives
# duet::runtime (find_package(duet CONFIG REQUIRED)), and duet.pc for
# pkg-config. Included when DUET_INSTALL is on (the default at top level).
include(CMakePackageConfigHelpers)
install(TARGETS duet EXPORT duetTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY runtime/include/duet DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/duet/config.hpp ${CMAKE_CURRENT_BINARY_DIR}/include/duet/export.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/duet)
# The public headers include these kernel headers as "softmax_variants.hpp",
# "softmax_args.hpp" (which includes "host_device.hpp") and "fused_args.hpp"
# (which includes "row_divisor.hpp");
# a quoted include is looked up next to the including header first, so
# installing them beside it (include/duet/) resolves them without putting
# generic names at the top of the include directory.
install(FILES kernels/softmax_variants.hpp kernels/softmax_args.hpp kernels/host_device.hpp kernels/row_divisor.hpp
              kernels/fused_args.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/duet)
install(EXPORT duetTargets NAMESPACE duet:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/duet)

# What a consumer must find: nothing for a shared libduet (its dependencies
# are inside it or linked by it); for a static one, the libraries its
# objects call into (hwy, the CUDA or HIP runtime).
set(DUET_CONFIG_DEPENDENCIES "")
set(DUET_PC_PRIVATE_LIBS "")
set(DUET_PC_PRIVATE_REQUIRES "")
if(DUET_LIBRARY_TYPE STREQUAL STATIC)
  string(APPEND DUET_CONFIG_DEPENDENCIES "find_dependency(Threads)\n")
  string(APPEND DUET_PC_PRIVATE_LIBS " -lpthread")
  if(hwy::hwy IN_LIST DUET_STATIC_LINK_DEPENDENCIES)
    string(APPEND DUET_CONFIG_DEPENDENCIES "find_dependency(hwy)\n")
    string(APPEND DUET_PC_PRIVATE_REQUIRES " libhwy")
  endif()
  if(CUDA::cudart_static IN_LIST DUET_STATIC_LINK_DEPENDENCIES)
    string(APPEND DUET_CONFIG_DEPENDENCIES "find_dependency(CUDAToolkit)\n")
    string(APPEND DUET_PC_PRIVATE_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
  endif()
  if(DUET_ENABLE_HIP)
    get_filename_component(_amdhip_dir ${DUET_AMDHIP64} DIRECTORY)
    string(APPEND DUET_PC_PRIVATE_LIBS " -L${_amdhip_dir} -lamdhip64")
  endif()
  # The C++ runtime, for C programs that link the static library.
  string(APPEND DUET_PC_PRIVATE_LIBS " -lstdc++ -lm")
endif()

configure_package_config_file(cmake/duetConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/duetConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/duet)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/duetConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/duetConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/duetConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/duet)

# pkg-config: the prefix is found from the .pc file's own place, so the
# file is right whatever --prefix the install is given (and after a move).
file(RELATIVE_PATH DUET_PC_PREFIX_FROM_PCFILEDIR /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" DUET_PC_PREFIX_FROM_PCFILEDIR "${DUET_PC_PREFIX_FROM_PCFILEDIR}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(DUET_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(DUET_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(DUET_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(DUET_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/duet.pc.in ${CMAKE_CURRENT_BINARY_DIR}/duet.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/duet.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(DUET_BUILD_TOOLS)
  # Installed tools find the installed libduet relative to themselves.
  set_target_properties(deviceinfo duet-bench PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS deviceinfo duet-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# cmake --build <dir> --target uninstall: removes what the last install put
# in place (install_manifest.txt), and the folders it leaves empty.
if(NOT TARGET uninstall)
  add_custom_target(uninstall
    COMMAND ${CMAKE_COMMAND} -DMANIFEST=${CMAKE_CURRENT_BINARY_DIR}/install_manifest.txt
            -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/uninstall.cmake
    COMMENT "removing the files of the last install"
    VERBATIM)
endif()
