# Install rules, the CMake package, pkg-config files, the man page and the
# Debian package (CPack). tests/install/ consumes what this installs.
include(CMakePackageConfigHelpers)

install(TARGETS pm pm_shared kvstore kvstore_shared EXPORT libpmTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY libpm/include/ kvstore/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS pm_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS tools/pmfs DESTINATION ${CMAKE_INSTALL_BINDIR})  # mount -t fuse.pmfs
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})

# CMake package: find_package(libpm CONFIG REQUIRED), then libpm::pm,
# libpm::kv (shared) or libpm::pm_static, libpm::kv_static.
set(PM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/libpm)
install(EXPORT libpmTargets NAMESPACE libpm:: DESTINATION ${PM_CMAKE_DIR})
configure_package_config_file(cmake/libpmConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/libpmConfig.cmake INSTALL_DESTINATION ${PM_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/libpmConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/libpmConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/libpmConfigVersion.cmake DESTINATION ${PM_CMAKE_DIR})

# pkg-config: libpm (containers, pm.h) and libpm-kv (the store, kv/kv.h).
# The prefix is found from the .pc file's own place, so a tree installed with
# --prefix or DESTDIR anywhere works as it is.
file(RELATIVE_PATH PM_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" PM_PC_TO_PREFIX "${PM_PC_TO_PREFIX}")
foreach(pc libpm libpm-kv)
  configure_file(cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# The man page, from `pm --help` and `pm --version` (Debian's help2man).
find_program(HELP2MAN help2man)
if(HELP2MAN)
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/pm.1
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section=1
      "--name=persistent containers, the kvstore and its mount"
      --output=${CMAKE_CURRENT_BINARY_DIR}/pm.1 $<TARGET_FILE:pm_cli>
    DEPENDS pm_cli VERBATIM)
  add_custom_target(pm_man ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/pm.1)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pm.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man page for pm (tools/install-deps.sh installs it)")
endif()

# Debian package: cpack -G DEB in the build directory.
set(CPACK_PACKAGE_NAME libpm)
set(CPACK_PACKAGE_VENDOR "libpm developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "persistent containers and a crash-safe key-value store on persistent memory or mapped files")
set(CPACK_PACKAGE_CONTACT "libpm developers <libpm@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # libpmem1, libxxhash0, libfuse3-3, ... from the binaries
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # shlibs file and the ldconfig trigger
# For building against it: the headers use Boost's; the CMake package and
# the static libraries find libpmem and xxhash through pkg-config.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libboost-dev, libpmem-dev, libxxhash-dev, pkg-config")
set(CPACK_GENERATOR DEB)
include(CPack)
