// bench_hostcheck: how long `lockstep hostcheck` takes against the number of hosts, next to pdsh doing the same work
// and next to the ideal. Every host is "reached" through a stand-in for ssh with a fixed latency (bench_hostcheck_
// standin), so the only cost that differs is each tool's own. Both tools run in the same invocation, alternately, at
// the same fan-out:
//   lockstep hostcheck HOSTFILE --ssh-command STANDIN --fanout F --skip resolve,mesh,mpirun --json
//   pdsh -R exec -f F -w ^HOSTFILE STANDIN %h true
// The ideal is ceil(hosts / fanout) x latency: the rounds a perfect fan-out needs, with processes that cost nothing
// to start. What starting them does cost on this machine shows in a third reference, the leanest runner there is:
//   xargs -P F -I{} STANDIN {} true < HOSTFILE
// Targets: within 1.1x of pdsh and 1.2x of the ideal. The table goes to stdout, the numbers to RESULTS/hostcheck.json.

#include "mpi_launcher/child_process.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <stdlib.h>
#include <sys/utsname.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

namespace ml = lockstep::mpi_launcher;
using nlohmann::json;

namespace {

struct Timing {
    double seconds = 0;
    bool ok = false;
    std::string failure;
};

Timing time_command(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                    const std::function<std::string(const ml::CommandResult&)>& check, const std::string& input = {}) {
    ml::Command c;
    c.argv = argv;
    c.input = input;
    c.environment = env;
    c.timeout = std::chrono::minutes(10);
    // The whole output is checked: a 5000-host JSON report is megabytes.
    ml::FanoutOptions options;
    options.fanout = 1;
    options.output_limit = std::size_t{1} << 30;
    const auto r = std::move(ml::run_fanout(std::span<const ml::Command>(&c, 1), options).front());
    Timing t;
    t.seconds = r.elapsed.count();
    t.failure = check(r);
    t.ok = t.failure.empty();
    return t;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return fmt::format("{} {} {}", a, b, c);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Time lockstep hostcheck against pdsh with a fixed-latency ssh stand-in"};
    std::string lockstep = LOCKSTEP_BENCH_LOCKSTEP;
    std::string standin = LOCKSTEP_BENCH_STANDIN;
    std::vector<std::size_t> host_counts{100, 1000, 5000};
    int latency_ms = 100;
    std::size_t fanout = 64;
    int repeat = 3;
    std::string results = "bench/results";
    app.add_option("--lockstep", lockstep, "The lockstep program")->capture_default_str();
    app.add_option("--standin", standin, "The ssh stand-in")->capture_default_str();
    app.add_option("--hosts", host_counts, "Host counts")->delimiter(',')->capture_default_str();
    app.add_option("--latency-ms", latency_ms, "Latency of one stand-in ssh")->capture_default_str();
    app.add_option("--fanout", fanout, "Fan-out of both tools")->capture_default_str();
    app.add_option("--repeat", repeat, "Runs per tool and host count; the median is reported")->capture_default_str();
    app.add_option("--results", results, "Folder for hostcheck.json")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    const std::string pdsh = ml::find_program("pdsh");
    if (pdsh.empty()) {
        fmt::print(stderr, "bench_hostcheck: pdsh is not installed (apt-get install pdsh)\n");
        return 2;
    }
    std::string work = (std::filesystem::temp_directory_path() / "lockstep-bench-hostcheck-XXXXXX").string();
    if (::mkdtemp(work.data()) == nullptr) {
        fmt::print(stderr, "bench_hostcheck: cannot create a temporary directory\n");
        return 2;
    }
    const std::vector<std::pair<std::string, std::string>> env{
        {"LOCKSTEP_STANDIN_LATENCY_MS", std::to_string(latency_ms)}};
    const double latency = latency_ms / 1000.0;

    fmt::print("hostcheck vs pdsh: stand-in ssh of {} ms, fan-out {}, median of {} runs; {} cores, load {}\n\n",
               latency_ms, fanout, repeat, std::thread::hardware_concurrency(), load_average());
    fmt::print("{:>6} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>9}  {}\n", "hosts", "ideal s", "xargs s", "pdsh s",
               "hostcheck s", "vs pdsh", "vs ideal", "vs xargs", "targets (1.1x pdsh, 1.2x ideal)");
    json rows = json::array();
    bool all_ok = true;
    for (const std::size_t n : host_counts) {
        const std::string hostfile = fmt::format("{}/hosts{}", work, n);
        {
            std::ofstream out(hostfile);
            for (std::size_t i = 1; i <= n; ++i) out << fmt::format("host{:05}\n", i);
        }
        const std::vector<std::string> hostcheck_argv{
            lockstep, "hostcheck",           hostfile, "--ssh-command", standin, "--fanout", std::to_string(fanout),
            "--skip", "resolve,mesh,mpirun", "--json"};
        const std::vector<std::string> pdsh_argv{pdsh, "-R",           "exec",  "-f", std::to_string(fanout),
                                                 "-w", "^" + hostfile, standin, "%h", "true"};
        auto hostcheck_check = [n](const ml::CommandResult& r) -> std::string {
            if (r.exit_code != 0) return fmt::format("exit {}: {}", r.exit_code, r.err.substr(0, 500));
            const auto doc = json::parse(r.out, nullptr, false);
            if (doc.is_discarded()) return "not JSON";
            if (doc["summary"]["ok"] != n) return fmt::format("not every host was ok: {}", doc["summary"].dump());
            return {};
        };
        // xargs reads the host names from stdin; the command's input is the hostfile itself.
        std::string names;
        {
            std::ifstream in(hostfile);
            names.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        }
        const std::vector<std::string> xargs_argv{"xargs", "-P", std::to_string(fanout), "-I{}", standin, "{}", "true"};
        auto pdsh_check = [n](const ml::CommandResult& r) -> std::string {
            const auto lines = static_cast<std::size_t>(std::count(r.out.begin(), r.out.end(), '\n'));
            if (r.exit_code != 0 || lines != 6 * n) return fmt::format("exit {}, {} lines", r.exit_code, lines);
            return {};
        };
        std::vector<double> hostcheck_times;
        std::vector<double> pdsh_times;
        std::vector<double> xargs_times;
        std::string failure;
        for (int i = 0; i < repeat; ++i) {
            const auto x = time_command(xargs_argv, env, pdsh_check, names);
            if (!x.ok) failure = "xargs: " + x.failure;
            xargs_times.push_back(x.seconds);
            const auto p = time_command(pdsh_argv, env, pdsh_check);
            const auto h = time_command(hostcheck_argv, env, hostcheck_check);
            if (!p.ok) failure = "pdsh: " + p.failure;
            if (!h.ok) failure = "hostcheck: " + h.failure;
            pdsh_times.push_back(p.seconds);
            hostcheck_times.push_back(h.seconds);
        }
        const double ideal = std::ceil(static_cast<double>(n) / static_cast<double>(fanout)) * latency;
        const double p = median(pdsh_times);
        const double x = median(xargs_times);
        const double h = median(hostcheck_times);
        const bool met = h <= 1.1 * p && h <= 1.2 * ideal;
        all_ok = all_ok && failure.empty();
        fmt::print("{:>6} {:>9.2f} {:>9.2f} {:>9.2f} {:>11.2f} {:>8.2f}x {:>8.2f}x {:>8.2f}x  {}{}\n", n, ideal, x, p,
                   h, h / p, h / ideal, h / x, met ? "met" : (h <= 1.1 * p ? "pdsh met, ideal missed" : "missed"),
                   failure.empty() ? "" : " (" + failure + ")");
        std::fflush(stdout);
        rows.push_back(json{{"hosts", n},
                            {"ideal_s", ideal},
                            {"xargs_s", x},
                            {"pdsh_s", p},
                            {"xargs_runs_s", xargs_times},
                            {"hostcheck_s", h},
                            {"pdsh_runs_s", pdsh_times},
                            {"hostcheck_runs_s", hostcheck_times},
                            {"ratio_pdsh", h / p},
                            {"ratio_ideal", h / ideal},
                            {"ratio_xargs", h / x},
                            {"targets_met", met},
                            {"failure", failure}});
    }
    std::error_code ignored;
    std::filesystem::remove_all(work, ignored);
    std::filesystem::create_directories(results, ignored);
    utsname u{};
    ::uname(&u);
    const json doc{{"benchmark", "hostcheck"},
                   {"latency_ms", latency_ms},
                   {"fanout", fanout},
                   {"repeat", repeat},
                   {"cores", std::thread::hardware_concurrency()},
                   {"load_average_end", load_average()},
                   {"kernel", u.release},
                   {"rows", rows}};
    std::ofstream(results + "/hostcheck.json") << doc.dump(2) << '\n';
    fmt::print("\nresults: {}/hostcheck.json\n", results);
    return all_ok ? 0 : 1;
}
