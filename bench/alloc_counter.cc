// SPDX-License-Identifier: Apache-2.0
#include "bench/alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace troupe::bench {
namespace {

std::atomic<uint64_t> allocation_count{0};

}  // namespace

uint64_t AllocationCount() { return allocation_count.load(std::memory_order_relaxed); }

}  // namespace troupe::bench

void* operator new(std::size_t size) {
  troupe::bench::allocation_count.fetch_add(1, std::memory_order_relaxed);
  if (void* block = std::malloc(size == 0 ? 1 : size)) {
    return block;
  }
  throw std::bad_alloc();
}
void operator delete(void* block) noexcept { std::free(block); }
void operator delete(void* block, std::size_t /*size*/) noexcept { std::free(block); }
