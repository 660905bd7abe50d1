#pragma once
// Straggler report: where each rank's time went, compute against waiting in collectives.
//
// Every collective adds its duration (two readings of the time-stamp counter) to its communicator's wait counter; the
// report sums them over the process. A rank that computes longer than the others makes them wait in the next
// collective, so the rank that waits least is the one the others wait for. The report gathers every rank's host,
// time since start and wait in one allgather.

#include <lockstep/communicator.hpp>
#include <lockstep/export.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace lockstep {

struct StragglerRow {
    int rank = 0;
    std::string host;
    double elapsed_seconds = 0.0;  // since Communicator::world() was created
    double wait_seconds = 0.0;     // inside collectives
    [[nodiscard]] double compute_seconds() const { return elapsed_seconds - wait_seconds; }
};

// This process's totals: seconds since the world communicator was created, and seconds inside collectives of any
// communicator.
[[nodiscard]] LOCKSTEP_API StragglerRow local_straggler_row();
// Collective over `comm`: every rank's row, in rank order.
[[nodiscard]] LOCKSTEP_API std::vector<StragglerRow> gather_straggler_rows(Communicator& comm);
// Someone really waits when the median wait of the other ranks exceeds the wait of the rank that waits least by more
// than straggler_share of that rank's time since start and by at least straggler_floor_seconds: 5 % is where moving
// work off one rank starts to pay, and the floor keeps a short job's start-up jitter from counting. With one rank,
// nobody waits.
inline constexpr double straggler_share = 0.05;
inline constexpr double straggler_floor_seconds = 0.5;
[[nodiscard]] LOCKSTEP_API bool someone_waits(const std::vector<StragglerRow>& rows);
// The table and the verdict naming the rank the others wait for (balanced unless someone_waits).
[[nodiscard]] LOCKSTEP_API std::string format_straggler_report(const std::vector<StragglerRow>& rows);
// Collective over `comm`: gathers, formats, and logs the report on the main process, at WARNING when someone_waits,
// else at INFO; returns it on every rank.
LOCKSTEP_API std::string straggler_report(Communicator& comm = Communicator::world());
// Collective over `comm`: the report above, and the picture of the whole run behind it: every rank's flight-recorder
// snapshot (its last calls and its run-long wait profile) gathered to the main process, which writes them as one
// trace file (reason "straggler") to `trace_file` and its text summary beside it. `lockstep trace show FILE
// --whole-run` draws from it each rank's share of time spent waiting, bin by bin, and names the rank the others wait
// for; without --whole-run, the last calls. The library writes the file only (it never runs the renderer). Returns
// the report on every rank, on the main process followed by a line naming the file. Throws lockstep::Error on the
// main process when the file cannot be written (after every rank's part is done, so nobody is left waiting).
LOCKSTEP_API std::string straggler_report(Communicator& comm, const std::filesystem::path& trace_file);

}  // namespace lockstep
