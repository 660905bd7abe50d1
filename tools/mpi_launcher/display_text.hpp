#pragma once
// Text from outside (hostfile lines, what a remote node or ssh printed) made safe to show on a terminal and short
// enough for a message, under the names the launcher toolkit and hostcheck use: the escaping is lockstep/base's.

#include <lockstep/base/escape.hpp>

#include <string>
#include <string_view>

namespace lockstep::mpi_launcher {

using base::cut_value;
using base::message_value_limit;
using base::shown_value;

// Every control character (C0, DEL, C1) and every byte that is not part of valid UTF-8 as `\xNN`; a backslash stays
// as it is. Newlines are kept when `keep_newlines` (a multi-line message), tabs always.
[[nodiscard]] inline std::string escape_control(std::string_view text, bool keep_newlines = false) {
    return base::escape_control(text, keep_newlines ? base::EscapeStyle::lines : base::EscapeStyle::one_line);
}

}  // namespace lockstep::mpi_launcher
