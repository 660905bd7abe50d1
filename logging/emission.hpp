#pragma once
// The steps that local and in-order emission share: stamping a record with this process's identity, and handing a
// block of records to the Boost.Log core, where lockstep's sinks pick it up by its route.

#include <lockstep/logging.hpp>

#include <memory>
#include <string>

namespace lockstep::detail {

// A record of this process, stamped now with its rank, size and host name (the Runtime's identity once initialised,
// else the launcher's variables).
[[nodiscard]] LogRecord local_record(LogLevel level, const std::string& logger, std::string message);

// Sets the sinks up from the environment unless configure_logging() already did.
void ensure_logging_configured();
// Whether a per-rank file sink is installed: records meant only for it are not built otherwise.
[[nodiscard]] bool rank_files_enabled() noexcept;
// Pushes one Boost.Log record holding `block` (non-empty, all records of one level) with the given log_route bits.
void push_log_block(std::shared_ptr<const LogBlock> block, unsigned route);

}  // namespace lockstep::detail
