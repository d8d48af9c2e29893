# SPDX-License-Identifier: Apache-2.0
# troupe_protobuf_library(NAME target PROTOS a.proto b.proto ... [DEPS target ...]
#                         [TYPE STATIC|SHARED])
#
# Generates C++ for .proto files given relative to the calling project's source root into its
# build root, so "proto/config.proto" becomes "proto/config.pb.h" (the include path users write),
# and builds them as a library (static unless TYPE SHARED) that carries that include directory and
# the protobuf runtime. Sets <NAME>_HEADERS in the caller's scope. Generated code gets none of the project's
# warning flags.
#
# Troupe's own schemas are on protoc's import path, so a .proto may `import "proto/events.proto";`
# (then pass DEPS troupe::proto, whose generated classes the import needs). DEPS are linked
# PUBLIC. Installed with the package: TroupeConfig.cmake includes this file, so projects that
# find_package(Troupe) call it the same way (README.md, "Using Troupe from your project").
#
# A library meant to be installed adds its own $<INSTALL_INTERFACE:...> include directory.

# Where Troupe's .proto files are rooted ("proto/events.proto" is found under it): the source tree
# when building Troupe, <prefix>/include/troupe when TroupeConfig.cmake set it before including us.
if(NOT TROUPE_PROTO_IMPORT_DIR)
  set(TROUPE_PROTO_IMPORT_DIR "${PROJECT_SOURCE_DIR}")
endif()
# A global property, because the function may run in any directory of the calling project.
set_property(GLOBAL PROPERTY TROUPE_PROTO_IMPORT_DIR "${TROUPE_PROTO_IMPORT_DIR}")

function(troupe_protobuf_library)
  cmake_parse_arguments(ARG "" "NAME;TYPE" "PROTOS;DEPS" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_PROTOS)
    message(FATAL_ERROR "troupe_protobuf_library: NAME and PROTOS are required")
  endif()
  if(NOT ARG_TYPE)
    set(ARG_TYPE STATIC)
  elseif(NOT ARG_TYPE MATCHES "^(STATIC|SHARED)$")
    message(FATAL_ERROR "troupe_protobuf_library(${ARG_NAME}): TYPE is STATIC or SHARED, got "
                        "'${ARG_TYPE}'")
  endif()
  set(import_dirs "${PROJECT_SOURCE_DIR}")
  get_property(troupe_dir GLOBAL PROPERTY TROUPE_PROTO_IMPORT_DIR)
  if(troupe_dir AND NOT troupe_dir STREQUAL PROJECT_SOURCE_DIR)
    list(APPEND import_dirs "${troupe_dir}")
  endif()
  list(TRANSFORM import_dirs PREPEND "-I" OUTPUT_VARIABLE import_flags)
  set(protos)
  set(sources)
  set(headers)
  foreach(proto ${ARG_PROTOS})
    get_filename_component(dir "${proto}" DIRECTORY)
    get_filename_component(name "${proto}" NAME_WE)
    list(APPEND protos "${PROJECT_SOURCE_DIR}/${proto}")
    list(APPEND sources "${PROJECT_BINARY_DIR}/${dir}/${name}.pb.cc")
    list(APPEND headers "${PROJECT_BINARY_DIR}/${dir}/${name}.pb.h")
  endforeach()
  add_custom_command(
    OUTPUT ${sources} ${headers}
    COMMAND protobuf::protoc --cpp_out=${PROJECT_BINARY_DIR} ${import_flags} ${protos}
    DEPENDS ${protos} protobuf::protoc
    COMMENT "Generating C++ for ${ARG_NAME}"
    VERBATIM)
  add_library(${ARG_NAME} ${ARG_TYPE} ${sources} ${headers})
  target_include_directories(${ARG_NAME} PUBLIC $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}>)
  target_link_libraries(${ARG_NAME} PUBLIC protobuf::libprotobuf ${ARG_DEPS})
  target_compile_features(${ARG_NAME} PUBLIC cxx_std_20)
  # Never batched into a unity build: every generated .pb.cc defines file-static tables of the same
  # names (schemas, file_default_instances).
  set_target_properties(${ARG_NAME} PROPERTIES UNITY_BUILD OFF)
  set(${ARG_NAME}_HEADERS ${headers} PARENT_SCOPE)
endfunction()
