// SPDX-License-Identifier: Apache-2.0
//
// Counts calls of the global operator new in a benchmark binary, on every thread.
//
// Link bench/alloc_counter.cc into the benchmark: it replaces the global operator new and delete
// with malloc and free plus one relaxed increment. `AllocationCount()` read before and after a
// run, divided by the items handled, gives the allocations per item. Blocks from the event pool
// (actors/internal/small_alloc.h) do not go through operator new once the pool is warm, so they
// are not counted; that is the point.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>

namespace troupe::bench {

// Returns the number of global operator new calls so far.
uint64_t AllocationCount();

}  // namespace troupe::bench
