# SPDX-License-Identifier: Apache-2.0
# Installs the libraries, public headers and a package config so that a program outside the tree
# can `find_package(Troupe)` and link `troupe::actors` and `troupe::interconnect`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_troupe_targets troupe_proto troupe_actors troupe_interconnect)
set(TROUPE_INSTALL_TESTING OFF)
if(TARGET troupe_testing)
  list(APPEND _troupe_targets troupe_testing)
  set(TROUPE_INSTALL_TESTING ON)
endif()
install(TARGETS ${_troupe_targets} EXPORT TroupeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/actors/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/actors
        FILES_MATCHING PATTERN "*.h"
        PATTERN "internal" EXCLUDE)
# The internal headers public ones include (EventHandle's intrusive link and allocator).
install(FILES "${PROJECT_SOURCE_DIR}/actors/internal/mailbox_node.h"
              "${PROJECT_SOURCE_DIR}/actors/internal/small_alloc.h"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/actors/internal)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/interconnect/"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/interconnect
        FILES_MATCHING PATTERN "*.h"
        PATTERN "internal" EXCLUDE)
install(FILES ${TROUPE_PROTO_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/proto)
install(FILES ${TROUPE_PROTO_FILES} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/proto)

install(EXPORT TroupeTargets NAMESPACE troupe:: FILE TroupeTargets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Troupe)
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/TroupeConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/TroupeConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Troupe)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/TroupeConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/TroupeConfig.cmake"
              "${PROJECT_BINARY_DIR}/TroupeConfigVersion.cmake"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Troupe)
