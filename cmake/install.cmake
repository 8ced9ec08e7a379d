# `cmake --install`: the four tools, libkiln, its public headers, a CMake package (find_package(kiln)
# gives kiln::kiln) and a pkg-config file; `cpack` packs the same tree as two .deb packages, the
# runtime `kiln` (tools, libkiln.so.0) and the development `kiln-dev` (headers, CMake package,
# pkg-config file, the libkiln.so link), each with a DEP-5 copyright and a Debian changelog.

# What kiln::kiln's interface needs from other packages: the find_package name kilnConfig.cmake
# hands to find_dependency() = the Debian -dev package kiln-dev depends on for it. One table, so
# the CMake package and the .deb cannot disagree.
set(KILN_PUBLIC_DEPENDENCIES
  ONNX=libonnx-dev
  Protobuf=libprotobuf-dev
  fmt=libfmt-dev
  spdlog=libspdlog-dev
  nlohmann_json=nlohmann-json3-dev)
set(KILN_FIND_DEPENDENCIES "")
set(KILN_DEV_DEPENDS "")
foreach(entry IN LISTS KILN_PUBLIC_DEPENDENCIES)
  string(REPLACE "=" ";" entry "${entry}")
  list(GET entry 0 cmake_package)
  list(GET entry 1 debian_package)
  string(APPEND KILN_FIND_DEPENDENCIES "find_dependency(${cmake_package})\n")
  list(APPEND KILN_DEV_DEPENDS ${debian_package})
endforeach()

install(TARGETS kiln ${KILN_TOOL_TARGETS} EXPORT kilnTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kiln DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT dev)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln
  COMPONENT dev)

include(CMakePackageConfigHelpers)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln COMPONENT dev)

configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
  COMPONENT dev)

# The Debian revision comes from cmake/debian/changelog's latest entry, whose upstream version must
# be the project's: a version bump without a changelog entry stops here rather than shipping a
# package whose changelog names another version.
set(KILN_DEBIAN_CHANGELOG ${PROJECT_SOURCE_DIR}/cmake/debian/changelog)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${KILN_DEBIAN_CHANGELOG})
file(STRINGS ${KILN_DEBIAN_CHANGELOG} KILN_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT KILN_CHANGELOG_TOP MATCHES "^kiln \\(([^)]+)-([^)-]+)\\) ")
  message(FATAL_ERROR "cmake/debian/changelog: the first line '${KILN_CHANGELOG_TOP}' is not "
                      "'kiln (VERSION-REVISION) DISTRIBUTION; urgency=...'")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "cmake/debian/changelog: the latest entry is for ${CMAKE_MATCH_1}, the "
                      "project is ${PROJECT_VERSION}: add an entry for ${PROJECT_VERSION}-1 on top")
endif()
set(KILN_DEBIAN_REVISION ${CMAKE_MATCH_2})
# Compressed as Debian policy asks (gzip -9, no name or time stamp in the header).
execute_process(COMMAND gzip -9nc INPUT_FILE ${KILN_DEBIAN_CHANGELOG}
  OUTPUT_FILE ${PROJECT_BINARY_DIR}/changelog.Debian.gz COMMAND_ERROR_IS_FATAL ANY)
foreach(component_package runtime=kiln dev=kiln-dev)
  string(REPLACE "=" ";" component_package "${component_package}")
  list(GET component_package 0 component)
  list(GET component_package 1 package)
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/debian/copyright ${PROJECT_BINARY_DIR}/changelog.Debian.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
endforeach()

set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VENDOR "kiln maintainers")
set(CPACK_PACKAGE_CONTACT "kiln maintainers <kiln@example.org>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${KILN_DEBIAN_REVISION})
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(KILN_DEBIAN_VERSION ${PROJECT_VERSION}-${KILN_DEBIAN_REVISION})

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kiln)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION science)
# Runtime dependencies read off the binaries (dpkg-shlibdeps), so the .deb installs with apt; the
# shlibs file lets packages built against libkiln.so.0 depend on this one.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# dpkg's ldconfig trigger (cmake/debian/triggers) refreshes the linker cache for libkiln.so.0.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/debian/triggers)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "ONNX to Ascend .om and MindSpore Lite .ms model converter
kiln converts ONNX models to Ascend offline models (.om) and MindSpore Lite
models (.ms) without CANN or MindSpore installed. It ships drop-in atc,
converter_lite and benchmark tools, the kiln tool (inspect, run, compare,
convert) with a CPU reference executor, and the libkiln.so.0 library.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME kiln-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
list(PREPEND KILN_DEV_DEPENDS "kiln (= ${KILN_DEBIAN_VERSION})")
list(JOIN KILN_DEV_DEPENDS ", " CPACK_DEBIAN_DEV_PACKAGE_DEPENDS)
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "ONNX to .om and .ms model converter - development files
kiln converts ONNX models to Ascend offline models (.om) and MindSpore Lite
models (.ms). This package holds the C++20 headers of libkiln, its CMake
package (find_package(kiln) gives kiln::kiln) and its pkg-config file.")
include(CPack)
