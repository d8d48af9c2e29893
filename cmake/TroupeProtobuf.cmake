# SPDX-License-Identifier: Apache-2.0
# troupe_protobuf_library(NAME target PROTOS a.proto b.proto ...)
# Generates C++ for .proto files given relative to the source tree root into the build tree root,
# so "proto/config.proto" becomes "proto/config.pb.h" (the include path users write), and builds
# them as a static library that carries the include directory and the protobuf runtime. Sets
# <NAME>_HEADERS in the caller's scope. Generated code gets none of the project's warning flags.
function(troupe_protobuf_library)
  cmake_parse_arguments(ARG "" "NAME" "PROTOS" ${ARGN})
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
    COMMAND protobuf::protoc --cpp_out=${PROJECT_BINARY_DIR} -I ${PROJECT_SOURCE_DIR} ${protos}
    DEPENDS ${protos} protobuf::protoc
    COMMENT "Generating C++ for ${ARG_NAME}"
    VERBATIM)
  add_library(${ARG_NAME} STATIC ${sources} ${headers})
  target_include_directories(${ARG_NAME} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${ARG_NAME} PUBLIC protobuf::libprotobuf)
  target_compile_features(${ARG_NAME} PUBLIC cxx_std_20)
  set(${ARG_NAME}_HEADERS ${headers} PARENT_SCOPE)
endfunction()
