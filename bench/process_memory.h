// SPDX-License-Identifier: Apache-2.0
//
// The memory of a benchmark's own process, for footprint figures (bytes per actor, per node):
// its resident set size, and a trim of the heap before it is read, so the figure does not hide
// freed memory the allocator could give back.
//
// Thread-safety: thread-safe.
#pragma once

#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdint>
#include <cstdio>

namespace troupe::bench {

// Resident set size of this process in bytes (/proc/self/statm), or -1 when it cannot be read.
inline int64_t ResidentBytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) {
    return -1;
  }
  long size = 0;
  long resident = -1;
  if (std::fscanf(statm, "%ld %ld", &size, &resident) != 2) {
    resident = -1;
  }
  std::fclose(statm);
  return resident < 0 ? -1 : static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

// Returns freed heap memory to the system (glibc's malloc_trim; nothing elsewhere).
inline void TrimHeap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace troupe::bench
