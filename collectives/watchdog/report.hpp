#pragma once
// The text of the watchdog's reports (internal): how a call, its site and a process's board read. The reports
// themselves are built by Watchdog::State::build (report.cpp), which asks the boards of every process involved.

#include "../call_info.hpp"

#include <string>

namespace lockstep::detail {

bool is_send(const CallRecord& r);

std::string record_text(const CallRecord& r);

std::string site_text(const CallRecord& r);

}  // namespace lockstep::detail
