// SPDX-License-Identifier: Apache-2.0
//
// Invariant checks for framework bugs (never for user input or bytes from the network).
//
// `TROUPE_CHECK(cond) << "context";` prints the condition, location and message to stderr and
// aborts in every build when `cond` is false. `TROUPE_DCHECK` does the same in debug builds only
// and does not evaluate its condition otherwise.
//
// Thread-safety: thread-safe.
#pragma once

#include <sstream>

namespace troupe::internal {

// Collects the message of a failed check and aborts when destroyed.
class CheckFailure {
 public:
  CheckFailure(const char* condition, const char* file, int line);
  [[noreturn]] ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  CheckFailure(CheckFailure&&) = delete;
  CheckFailure& operator=(CheckFailure&&) = delete;

  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

struct CheckVoidify {
  void operator&(std::ostream& /*unused*/) {}
};

}  // namespace troupe::internal

// Aborts with a message when `cond` is false, in every build.
// The expansion is the left operand of the caller's <<, so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define TROUPE_CHECK(cond)                      \
  (cond) ? (void)0                              \
         : ::troupe::internal::CheckVoidify() & \
               ::troupe::internal::CheckFailure(#cond, __FILE__, __LINE__).stream()
// NOLINTEND(bugprone-macro-parentheses)

#ifdef NDEBUG
namespace troupe::internal {
inline std::ostream& NullStream() {
  static std::ostringstream sink;
  return sink;
}
}  // namespace troupe::internal

// Checks `cond` in debug builds only; the condition is not evaluated in release builds.
// Not parenthesized, as TROUPE_CHECK.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define TROUPE_DCHECK(cond) \
  true ? (void)0 : ::troupe::internal::CheckVoidify() & ::troupe::internal::NullStream()
// NOLINTEND(bugprone-macro-parentheses)
#else
#define TROUPE_DCHECK(cond) TROUPE_CHECK(cond)
#endif
