// SPDX-License-Identifier: Apache-2.0
//
// JSON string escaping as the JSON log format writes it (actors/log.h), for code that writes JSON
// next to it, such as a monitoring server's answers, so that both escape alike.
//
// The output is always valid JSON and valid UTF-8, whatever the input bytes: '"' and '\' are
// escaped, control characters (U+0000 to U+001F) become \b \f \n \r \t or \u00XX, well-formed UTF-8
// is copied as is, and each byte that does not begin a well-formed UTF-8 sequence (a stray
// continuation byte, a truncated or overlong sequence, a surrogate, a code point above U+10FFFF)
// becomes U+FFFD. Input that needs no escaping is copied in runs, so a plain ASCII message costs
// one scan and one copy.
//
// Thread-safety: thread-safe (no shared state).
//
// Example:
//
//   std::string out = "{\"name\":";
//   troupe::AppendJsonString("say \"hi\"\n", &out);  // {"name":"say \"hi\"\n"
#pragma once

#include <string>
#include <string_view>

namespace troupe {

// Appends `text` to `out` as a JSON string literal, quotes included (see above).
void AppendJsonString(std::string_view text, std::string* out);

}  // namespace troupe
