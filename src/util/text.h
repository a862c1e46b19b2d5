#pragma once
// User text inside error messages. Anything a user or a file controls (a JSON
// key, a tensor name, a zip member name, a value) can hold any bytes and be
// any length; an error must stay one short printable line, so such text goes
// through printable() before it joins a message.
#include <cstddef>
#include <string>
#include <string_view>

namespace mha {

// Default cut for a name, key or value echoed in an error.
constexpr std::size_t kEchoMax = 80;

// `s` escaped and cut: control bytes (C0, DEL, C1 such as the 8-bit CSI) and
// bytes that are not valid UTF-8 become \xNN, a backslash becomes \\, so
// nothing reaches the terminal as a control sequence or a line break. Text
// longer than `max_chars` printable characters is cut there with "...".
std::string printable(std::string_view s, std::size_t max_chars = kEchoMax);

// A whole error message made one safe line, the CLI's last net for text that
// did not go through printable(): control and invalid bytes escaped as above,
// but backslashes kept (the message may already hold printable()'s escapes).
std::string printable_line(std::string_view s, std::size_t max_chars = 4000);

}  // namespace mha
