# SPDX-License-Identifier: Apache-2.0
# Installs the libraries, public headers, .proto files and a package config so that a program
# outside the tree can `find_package(Troupe)`.
#
# Everything under <prefix>/include is inside include/troupe/ (the targets' include directory), so
# users keep writing "actors/actor.h" and "proto/config.pb.h" without a proto/ of ours colliding
# with other projects in a shared prefix such as /usr/local.
#
# Two export sets, so a consumer of troupe::actors alone never needs GoogleTest:
# - TroupeTargets.cmake, always loaded: proto, actors, interconnect, node, and the GoogleTest-free
#   test helpers interconnect_testing (PipeNetwork, FreeLoopbackPorts) and test_actors when this
#   build has them;
# - TroupeTestingTargets.cmake, loaded for `COMPONENTS testing` only: troupe::testing, which
#   reports through GoogleTest, and troupe::scenario (simulation campaigns) on top of it.
# cmake/TroupeProtobuf.cmake is installed too: troupe_protobuf_library() for users' own schemas.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_troupe_include "${CMAKE_INSTALL_INCLUDEDIR}/troupe")
set(_troupe_cmake "${CMAKE_INSTALL_LIBDIR}/cmake/Troupe")

# -- libraries ------------------------------------------------------------------------------------
set(_troupe_core troupe_proto troupe_actors troupe_interconnect troupe_node_lib)
foreach(_target troupe_interconnect_testing troupe_test_actors)
  if(TARGET ${_target})
    list(APPEND _troupe_core ${_target})
  endif()
endforeach()
# Component names a consumer may list in find_package(Troupe COMPONENTS ...): the export names.
set(TROUPE_CORE_COMPONENTS)
foreach(_target ${_troupe_core})
  get_target_property(_name ${_target} EXPORT_NAME)
  list(APPEND TROUPE_CORE_COMPONENTS ${_name})
endforeach()
install(TARGETS ${_troupe_core} EXPORT TroupeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${_troupe_include})
install(EXPORT TroupeTargets NAMESPACE troupe:: FILE TroupeTargets.cmake
        DESTINATION ${_troupe_cmake})

set(TROUPE_INSTALL_TESTING OFF)
if(TARGET troupe_testing)
  set(TROUPE_INSTALL_TESTING ON)
  set(_troupe_testing troupe_testing)
  if(TARGET troupe_scenario)
    list(APPEND _troupe_testing troupe_scenario)
  endif()
  install(TARGETS ${_troupe_testing} EXPORT TroupeTestingTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${_troupe_include})
  install(EXPORT TroupeTestingTargets NAMESPACE troupe:: FILE TroupeTestingTargets.cmake
          DESTINATION ${_troupe_cmake})
endif()

# -- headers --------------------------------------------------------------------------------------
# Public headers of a folder; internal/ (private) and testing/ (installed with its target below)
# stay out.
foreach(_folder actors interconnect node)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/${_folder}/" DESTINATION ${_troupe_include}/${_folder}
          FILES_MATCHING PATTERN "*.h"
          PATTERN "internal" EXCLUDE
          PATTERN "testing" EXCLUDE)
endforeach()
# The internal headers public ones include (EventHandle's intrusive link and allocator); see
# actors/internal/README.md. Nothing else under an internal/ folder is installed.
install(FILES "${PROJECT_SOURCE_DIR}/actors/internal/mailbox_node.h"
              "${PROJECT_SOURCE_DIR}/actors/internal/small_alloc.h"
        DESTINATION ${_troupe_include}/actors/internal)
# The testing/ headers, each with the target that provides it.
set(_troupe_testing_headers
    troupe_testing actors/testing/test_runtime.h
    troupe_test_actors actors/testing/actors.h
    troupe_interconnect_testing interconnect/testing/free_ports.h
    troupe_interconnect_testing interconnect/testing/pipe_network.h
    troupe_scenario interconnect/testing/scenario.h)
while(_troupe_testing_headers)
  list(POP_FRONT _troupe_testing_headers _target _header)
  if(TARGET ${_target})
    get_filename_component(_dir "${_header}" DIRECTORY)
    install(FILES "${PROJECT_SOURCE_DIR}/${_header}" DESTINATION ${_troupe_include}/${_dir})
  endif()
endwhile()
# Generated classes and their schemas, so users' .proto files can import ours.
install(FILES ${TROUPE_PROTO_HEADERS} ${TROUPE_PROTO_FILES} DESTINATION ${_troupe_include}/proto)

# -- package config -------------------------------------------------------------------------------
set(TROUPE_INSTALL_INCLUDEDIR "${_troupe_include}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/TroupeConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/TroupeConfig.cmake"
  INSTALL_DESTINATION ${_troupe_cmake}
  PATH_VARS TROUPE_INSTALL_INCLUDEDIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/TroupeConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/TroupeConfig.cmake"
              "${PROJECT_BINARY_DIR}/TroupeConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/TroupeProtobuf.cmake"
        DESTINATION ${_troupe_cmake})
