// A stand-in for ssh with a fixed latency, for bench_hostcheck: `hostcheck_standin HOST COMMAND...` waits
// LOCKSTEP_STANDIN_LATENCY_MS milliseconds (default 100), as a round trip to a node would take, then prints what
// hostcheck's probe script prints on a healthy node. Both hostcheck and pdsh run this same program, so the
// benchmark compares the tools, not the network. A compiled program rather than a script keeps the cost of starting
// it (one exec, no shell) small next to the latency.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
    const char* latency = std::getenv("LOCKSTEP_STANDIN_LATENCY_MS");
    std::this_thread::sleep_for(std::chrono::milliseconds(latency != nullptr ? std::atoi(latency) : 100));
    std::printf(
        "@@lockstep-hostcheck-begin@@\nhostname %s\npath /usr/bin:/bin\nprogram mpirun /usr/bin/mpirun\n"
        "program orted /usr/bin/orted\n@@lockstep-hostcheck-end@@\n",
        argc > 1 ? argv[1] : "unknown");
    return 0;
}
