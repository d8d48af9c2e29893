// SPDX-License-Identifier: Apache-2.0
#include "actors/log_json.h"

#include <cstddef>

namespace troupe {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Returns the length of the well-formed UTF-8 sequence at text[i] (whose first byte is >= 0x80),
// or 0 when there is none. The ranges are those of the Unicode Standard's table 3-7, which rule
// out overlong forms, surrogates and code points above U+10FFFF.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const size_t left = text.size() - i;
  const unsigned char lead = byte(0);
  if (lead >= 0xC2 && lead <= 0xDF) {
    return left >= 2 && IsContinuation(byte(1)) ? 2 : 0;
  }
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (left < 3 || !IsContinuation(byte(1)) || !IsContinuation(byte(2))) {
      return 0;
    }
    const bool overlong = lead == 0xE0 && byte(1) < 0xA0;
    const bool surrogate = lead == 0xED && byte(1) > 0x9F;
    return overlong || surrogate ? 0 : 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (left < 4 || !IsContinuation(byte(1)) || !IsContinuation(byte(2)) ||
        !IsContinuation(byte(3))) {
      return 0;
    }
    const bool overlong = lead == 0xF0 && byte(1) < 0x90;
    const bool too_high = lead == 0xF4 && byte(1) > 0x8F;
    return overlong || too_high ? 0 : 4;
  }
  return 0;
}

void AppendEscapedAscii(unsigned char c, std::string* out) {
  switch (c) {
    case '"':
      out->append("\\\"");
      return;
    case '\\':
      out->append("\\\\");
      return;
    case '\b':
      out->append("\\b");
      return;
    case '\f':
      out->append("\\f");
      return;
    case '\n':
      out->append("\\n");
      return;
    case '\r':
      out->append("\\r");
      return;
    case '\t':
      out->append("\\t");
      return;
    default:
      break;
  }
  constexpr std::string_view kHex = "0123456789abcdef";
  out->append("\\u00");
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 0xF]);
}

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  // [run, i) needs no escaping and is copied in one append.
  size_t run = 0;
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (const size_t length = Utf8SequenceLength(text, i); length != 0) {
        i += length;
        continue;
      }
    }
    out->append(text.substr(run, i - run));
    if (c < 0x80) {
      AppendEscapedAscii(c, out);
    } else {
      out->append(kReplacement);
    }
    ++i;
    run = i;
  }
  out->append(text.substr(run));
  out->push_back('"');
}

}  // namespace troupe
