// Fuzz target: Slurm node-list expansion (`node[01-10,12]`). Every input must expand or be refused with a
// NodelistError, within the budget of names and bytes one hostfile may hold.

#include "nodelist.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

using namespace lockstep::hostcheck;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    (void)has_nodelist_brackets(text);
    try {
        const auto names = expand_nodelist(text);
        if (names.size() > max_nodelist_hosts) __builtin_trap();
    } catch (const NodelistError&) {
    }
    return 0;
}
