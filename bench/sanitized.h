// SPDX-License-Identifier: Apache-2.0
//
// TROUPE_BENCH_SANITIZED is defined when the benchmark is built with AddressSanitizer or
// ThreadSanitizer; benchmarks shrink their sizes and stretch their timeouts then.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TROUPE_BENCH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TROUPE_BENCH_SANITIZED 1
#endif
#endif
