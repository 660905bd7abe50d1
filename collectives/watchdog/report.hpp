#pragma once
// The text of the watchdog's reports (internal): how a call, its site and a process's board read. The reports
// themselves are built by Watchdog::State::build (report.cpp), which asks the boards of every process involved.

#include "../call_info.hpp"

#include <string>

namespace lockstep::detail {

bool is_send(const CallRecord& r);

// The operation's name: lockstep's ("lockstep::allreduce"), or the function of a call lockstep does not carry.
std::string call_name(const CallRecord& r);

std::string record_text(const CallRecord& r);

// Where the call was made: file:line, or its caller's return address symbolised.
std::string site_text(const CallRecord& r);

// A return address as a place in the program ("app+0x1a2b (main)"): the module it lies in, the offset and the nearest
// exported symbol.
std::string code_address_text(const void* address);
// What code_address_text asks first, when set (lockstep/foreign_watch.hpp's set_symbolizer): a symbolizer that knows
// the program's debug information.
void set_code_address_namer(std::string (*namer)(const void* address)) noexcept;

}  // namespace lockstep::detail
