// SPDX-License-Identifier: Apache-2.0
//
// CpuRelax: the spin-wait hint (x86 `pause`, Arm `yield`) for loops that poll a shared word, so a
// spinning thread yields pipeline resources to its sibling hyperthread and leaves the bus alone.
#pragma once

namespace troupe::internal {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace troupe::internal
