// Fuzz target: the hostfile parser, in every form, and the report that shows its lines (text and JSON). A hostfile is
// whatever the user's editor, script or colleague wrote; every input must end in a Hostfile or a HostfileError,
// quickly and in bounded memory.

#include "hostcheck.hpp"
#include "hostfile.hpp"
#include "report.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string_view>

using namespace lockstep::hostcheck;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    // The first byte also picks a forced form for a second reading: what --format would do with the same text.
    const std::optional<HostfileFormat> forms[] = {std::nullopt, HostfileFormat::OpenMpi, HostfileFormat::Hydra,
                                                   HostfileFormat::Plain, HostfileFormat::Slurm};
    const auto forced = size > 0 ? forms[data[0] % 5] : std::nullopt;
    for (const auto& format : {std::optional<HostfileFormat>{}, forced}) {
        try {
            Report r;
            r.hostfile = parse_hostfile(text, "fuzz.hosts", format);
            r.add_hostfile_targets();
            std::ostringstream table;
            print_text(table, r, TextStyle{false, true});
            std::ostringstream json;
            write_json(json, r);
        } catch (const HostfileError& e) {
            // As the command prints it: bytes that are not UTF-8 replaced, not thrown on.
            (void)error_json("hostfile", e.what(), e.errors())
                .dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
        }
        if (!forced) break;
    }
    return 0;
}
