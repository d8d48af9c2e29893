# SPDX-License-Identifier: Apache-2.0
# TROUPE_GIT_COMMIT: the commit actors/version.h reports (TROUPE_GIT_COMMIT, troupe::Version(),
# `--version` of the installed binaries). Read from git when Troupe is configured, unless given
# with -DTROUPE_GIT_COMMIT=<hash> (a distribution building from a tarball); "unknown" when
# neither. Configure time only, so that a commit does not relink every binary of a build tree:
# re-run cmake after checking out another commit.
set(TROUPE_GIT_COMMIT "" CACHE STRING
    "Git commit the version header reports (empty: read from git at configure time)")
set(_troupe_commit "${TROUPE_GIT_COMMIT}")
if(NOT _troupe_commit)
  set(_troupe_commit "unknown")
  find_package(Git QUIET)
  if(GIT_FOUND)
    # Only Troupe's own checkout: sources copied into another project's repository (a vendored
    # tree, a tarball unpacked inside one) are at no commit of ours.
    execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --show-toplevel --verify -q HEAD
                    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                    RESULT_VARIABLE _troupe_git_result OUTPUT_VARIABLE _troupe_git_out
                    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(REPLACE "\n" ";" _troupe_git_out "${_troupe_git_out}")
    list(LENGTH _troupe_git_out _troupe_git_lines)
    if(_troupe_git_result EQUAL 0 AND _troupe_git_lines EQUAL 2)
      list(GET _troupe_git_out 0 _troupe_git_top)
      list(GET _troupe_git_out 1 _troupe_git_head)
      file(REAL_PATH "${_troupe_git_top}" _troupe_git_top)
      file(REAL_PATH "${PROJECT_SOURCE_DIR}" _troupe_source)
      if(_troupe_git_top STREQUAL _troupe_source AND _troupe_git_head MATCHES "^[0-9a-f]+$")
        set(_troupe_commit "${_troupe_git_head}")
      endif()
    endif()
  endif()
elseif(NOT _troupe_commit MATCHES "^[0-9a-f]+$")
  message(FATAL_ERROR "TROUPE_GIT_COMMIT='${TROUPE_GIT_COMMIT}': want a hex commit hash")
endif()
message(STATUS "Troupe ${PROJECT_VERSION}, commit ${_troupe_commit}")

# configure_file's @VAR@ names for actors/version.h.in.
set(TROUPE_VERSION_COMMIT "${_troupe_commit}")
