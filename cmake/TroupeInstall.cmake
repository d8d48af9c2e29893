# SPDX-License-Identifier: Apache-2.0
# Installs the libraries, public headers, .proto files, the programs, a CMake package and
# pkg-config files, so that a program outside the tree can `find_package(Troupe)` or
# `pkg-config --cflags --libs troupe`.
#
# Everything under <prefix>/include is inside include/troupe/ (the targets' include directory), so
# users keep writing "actors/actor.h" and "proto/config.pb.h" without a proto/ of ours colliding
# with other projects in a shared prefix such as /usr/local. The generated actors/version.h goes
# there too.
#
# One export set a library, named after its component (the library's EXPORT_NAME), so that
# find_package(Troupe COMPONENTS actors) loads troupe::actors and what it links, and finds only
# their dependencies: TroupeConfig.cmake gets, for each component, the components and the packages
# it needs, read here from the targets' own link lists. A library's PUBLIC dependencies are needed
# by every consumer; its PRIVATE ones only when it is static (the archive's link line names them),
# never when it is shared. troupe::testing (GoogleTest) and troupe::scenario are loaded only when
# asked for. The same lists give each component's pkg-config file (troupe-<component>.pc) its
# Requires; troupe.pc requires the runtime's four (proto, actors, interconnect, node).
# cmake/TroupeProtobuf.cmake is installed too: troupe_protobuf_library() for users' own schemas.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_troupe_include "${CMAKE_INSTALL_INCLUDEDIR}/troupe")
set(_troupe_cmake "${CMAKE_INSTALL_LIBDIR}/cmake/Troupe")
set(_troupe_pkgconfig "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
# A 0.x release may change the ABI in any minor version, so the SONAME carries both then.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_troupe_soversion "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
else()
  set(_troupe_soversion "${PROJECT_VERSION_MAJOR}")
endif()

# _troupe_classify_dependency(item): what a link item of one of our libraries is, in the caller's
# _component (a Troupe component), _packages (what TroupeConfig.cmake finds: a CMake package, or
# xxhash, asio, httplib, which it imports itself), _pc (pkg-config modules) and _libs (flags).
# A dependency without an entry here fails the configure: add its find and its .pc.
function(_troupe_classify_dependency item)
  set(component "")
  set(packages "")
  set(pc "")
  set(libs "")
  if(TARGET ${item})
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      set(item ${aliased})
    endif()
  endif()
  if(item IN_LIST _troupe_libraries)
    get_target_property(component ${item} EXPORT_NAME)
    set(pc "troupe-${component}")
  elseif(item MATCHES "^absl::(.+)$")
    set(packages absl)
    set(pc "absl_${CMAKE_MATCH_1}")
  elseif(item STREQUAL "protobuf::libprotobuf")
    set(packages Protobuf)
    set(pc protobuf)
  elseif(item STREQUAL "Threads::Threads")
    set(packages Threads)
    set(libs -pthread)
  elseif(item STREQUAL "OpenSSL::SSL")
    set(packages OpenSSL)
    set(pc libssl)
  elseif(item STREQUAL "OpenSSL::Crypto")
    set(packages OpenSSL)
    set(pc libcrypto)
  elseif(item STREQUAL "troupe_xxhash")
    set(packages xxhash)
    set(pc libxxhash)
  elseif(item STREQUAL "troupe_asio")
    # Header-only: nothing to link but threads.
    set(packages Threads asio)
    set(libs -pthread)
  elseif(item STREQUAL "PkgConfig::TROUPE_HTTPLIB")
    set(packages httplib)
    set(pc cpp-httplib)
  elseif(item MATCHES "^GTest::(gtest|gmock)$")
    set(packages GTest)
    set(pc ${CMAKE_MATCH_1})
  else()
    message(FATAL_ERROR "cmake/TroupeInstall.cmake: an installed library links '${item}', which "
                        "has no entry in _troupe_classify_dependency (its find and its .pc)")
  endif()
  set(_component "${component}" PARENT_SCOPE)
  set(_packages "${packages}" PARENT_SCOPE)
  set(_pc "${pc}" PARENT_SCOPE)
  set(_libs "${libs}" PARENT_SCOPE)
endfunction()

# _troupe_dependencies(target): the target's dependencies, in the caller's _public_* and
# _private_* lists (components, packages, pc, libs). $<BUILD_INTERFACE:...> items (the tree's
# warnings) are nobody's business outside.
function(_troupe_dependencies target)
  get_target_property(type ${target} TYPE)
  get_target_property(public ${target} INTERFACE_LINK_LIBRARIES)
  set(all)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(all ${target} LINK_LIBRARIES)
  endif()
  foreach(kind public private)
    foreach(field components packages pc libs)
      set(${kind}_${field})
    endforeach()
  endforeach()
  foreach(item IN LISTS public all)
    if(NOT item OR item MATCHES "^\\$<")
      continue()
    endif()
    set(kind private)
    if(item IN_LIST public)
      set(kind public)
    endif()
    _troupe_classify_dependency(${item})
    list(APPEND ${kind}_components ${_component})
    list(APPEND ${kind}_packages ${_packages})
    list(APPEND ${kind}_pc ${_pc})
    list(APPEND ${kind}_libs ${_libs})
  endforeach()
  foreach(kind public private)
    foreach(field components packages pc libs)
      list(REMOVE_DUPLICATES ${kind}_${field})
      set(_${kind}_${field} "${${kind}_${field}}" PARENT_SCOPE)
    endforeach()
  endforeach()
endfunction()

# -- libraries ------------------------------------------------------------------------------------
# In dependency order (TroupeConfig.cmake loads them in this order). testing and scenario exist
# when GoogleTest was found; interconnect_testing and test_actors need no GoogleTest.
set(_troupe_libraries)
foreach(_target troupe_proto troupe_actors troupe_test_actors troupe_interconnect
                troupe_interconnect_testing troupe_node_lib troupe_testing troupe_scenario)
  if(TARGET ${_target})
    list(APPEND _troupe_libraries ${_target})
  endif()
endforeach()
set(_troupe_descriptions
    proto "generated classes of Troupe's protobuf schemas"
    actors "the single-node actor runtime"
    test_actors "shared test actors: echo, ping/pong, recorder"
    interconnect "the transport between nodes: TCP and mutual TLS, sessions, nameservice"
    interconnect_testing "in-memory transport with fault injection, free loopback ports"
    node "a whole node: config, etcd membership, monitoring server"
    testing "the deterministic test runtime (GoogleTest)"
    scenario "simulation campaigns over the real interconnect (GoogleTest)")

file(RELATIVE_PATH _troupe_pc_to_prefix "/prefix/${_troupe_pkgconfig}" "/prefix")
string(REGEX REPLACE "/$" "" _troupe_pc_to_prefix "${_troupe_pc_to_prefix}")
set(TROUPE_COMPONENTS)
set(TROUPE_COMPONENT_TABLE "")
foreach(_target ${_troupe_libraries})
  get_target_property(_component ${_target} EXPORT_NAME)
  get_target_property(_type ${_target} TYPE)
  list(APPEND TROUPE_COMPONENTS ${_component})
  if(_type STREQUAL "SHARED_LIBRARY")
    # No <target>_EXPORTS define: nothing reads it, and without it a shared build compiles the
    # same command lines as a static one (ccache hits).
    set_target_properties(${_target} PROPERTIES VERSION ${PROJECT_VERSION}
                                                SOVERSION ${_troupe_soversion} DEFINE_SYMBOL "")
    if(CMAKE_INSTALL_RPATH)
      # Each other's directory: a library's RUNPATH serves its own dependencies.
      set_target_properties(${_target} PROPERTIES INSTALL_RPATH "$ORIGIN")
    endif()
  endif()
  install(TARGETS ${_target} EXPORT Troupe_${_component}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${_troupe_include})
  install(EXPORT Troupe_${_component} NAMESPACE troupe:: FILE TroupeTargets-${_component}.cmake
          DESTINATION ${_troupe_cmake})

  _troupe_dependencies(${_target})
  set(_needs ${_public_components})
  set(_packages ${_public_packages})
  if(_type STREQUAL "STATIC_LIBRARY")
    list(APPEND _needs ${_private_components})
    list(APPEND _packages ${_private_packages})
  endif()
  list(REMOVE_DUPLICATES _needs)
  list(REMOVE_DUPLICATES _packages)
  string(APPEND TROUPE_COMPONENT_TABLE
         "set(_troupe_needs_${_component} \"${_needs}\")\n"
         "set(_troupe_packages_${_component} \"${_packages}\")\n")

  # pkg-config: a static library's private dependencies are needed to link it, so they are its
  # Requires and Libs (a plain `pkg-config --libs` works); a shared library's are .private.
  if(_type STREQUAL "STATIC_LIBRARY")
    list(APPEND _public_pc ${_private_pc})
    list(APPEND _public_libs ${_private_libs})
    set(_private_pc)
    set(_private_libs)
  endif()
  foreach(_field pc libs)
    list(REMOVE_DUPLICATES _public_${_field})
    list(REMOVE_ITEM _private_${_field} ${_public_${_field}})
    list(JOIN _public_${_field} " " _public_${_field})
    list(JOIN _private_${_field} " " _private_${_field})
  endforeach()
  set(_libs "")
  if(NOT _type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(_output ${_target} OUTPUT_NAME)
    if(NOT _output)
      set(_output ${_target})
    endif()
    set(_libs "-L\${libdir} -l${_output}")
  endif()
  set(_cflags "-I\${includedir}/troupe")
  get_target_property(_definitions ${_target} INTERFACE_COMPILE_DEFINITIONS)
  foreach(_definition IN LISTS _definitions)
    if(_definition AND NOT _definition MATCHES "^\\$<")
      string(APPEND _cflags " -D${_definition}")
    endif()
  endforeach()
  list(FIND _troupe_descriptions ${_component} _index)
  math(EXPR _index "${_index} + 1")
  list(GET _troupe_descriptions ${_index} _description)
  set(_pc "prefix=\${pcfiledir}/${_troupe_pc_to_prefix}\n"
          "libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}\n"
          "includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}\n\n"
          "Name: troupe-${_component}\n"
          "Description: Troupe ${_component}, ${_description}\n"
          "Version: ${PROJECT_VERSION}\n")
  foreach(_field "Requires:${_public_pc}" "Requires.private:${_private_pc}"
                 "Libs:${_libs} ${_public_libs}" "Libs.private:${_private_libs}" "Cflags:${_cflags}")
    string(STRIP "${_field}" _field)
    if(NOT _field MATCHES ":$")
      string(REPLACE ":" ": " _field "${_field}")
      list(APPEND _pc "${_field}\n")
    endif()
  endforeach()
  string(CONCAT _pc ${_pc})
  file(WRITE "${PROJECT_BINARY_DIR}/pkgconfig/troupe-${_component}.pc" "${_pc}")
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/troupe-${_component}.pc"
          DESTINATION ${_troupe_pkgconfig})
endforeach()
file(WRITE "${PROJECT_BINARY_DIR}/pkgconfig/troupe.pc"
     "Name: troupe\n"
     "Description: Troupe, a distributed actor framework for C++20: the actor runtime, the "
     "interconnect and the node\n"
     "Version: ${PROJECT_VERSION}\n"
     "Requires: troupe-proto troupe-actors troupe-interconnect troupe-node\n")
install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/troupe.pc" DESTINATION ${_troupe_pkgconfig})

# -- programs -------------------------------------------------------------------------------------
# The example cluster's programs (examples/README.md): troupe_cluster runs the troupe_node and
# troupe_loadgen next to it, so all three go to bin/. The other examples are demos, not tools.
if(TARGET troupe_cluster)
  install(TARGETS troupe_node troupe_loadgen troupe_cluster
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
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
install(FILES "${PROJECT_BINARY_DIR}/generated/actors/version.h"
        DESTINATION ${_troupe_include}/actors)
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
