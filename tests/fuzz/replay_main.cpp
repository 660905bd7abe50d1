// Replays fuzz inputs without libFuzzer: `fuzz_X_replay PATH...` runs LLVMFuzzerTestOneInput once on every file
// given, and on every file under every directory given (in name order), so that the corpus and the regressions run in
// the ordinary test suite with an ordinary compiler. A crash, an uncaught exception or a sanitizer report fails the
// run as it would under libFuzzer; an input that runs past its time limit is named and fails it too, since an endless
// loop is a finding like any other.
//
// The time limit is LOCKSTEP_FUZZ_INPUT_SECONDS (default 10) on a machine as fast as the one it was set for, and
// longer in proportion on a slower one: a sanitizer build, a slower processor, or other work sharing the machine. How
// much slower is measured, not assumed: before the first input the replay times a fixed reference workload (strings
// built, compared, kept in a map and sorted, as a parser does) and compares it with its time on the machine the limit
// was set for (reference_ms_nominal, or LOCKSTEP_FUZZ_REFERENCE_MS). When an input reaches its limit the workload is
// timed again, alongside the input, and the limit grows if the machine has become slower since; only an input past
// the limit at the machine's current pace fails. The limit never falls below LOCKSTEP_FUZZ_INPUT_SECONDS.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// The reference workload's time, fastest of many runs, in a release build on the 2-core machines the project's tests
// run on (an AddressSanitizer build at -O0 takes about 25 times as long).
constexpr double reference_ms_nominal = 2.0;

// A fixed piece of work like a parser's: strings built, compared, kept in a map and sorted. Returns a sum of what it
// built, so that the compiler keeps it.
std::size_t reference_workload() {
    std::map<std::string, std::size_t> seen;
    std::vector<std::string> words;
    words.reserve(5000);
    for (std::size_t i = 0; i < 5000; ++i) {
        std::string word = "node" + std::to_string((i * 7919) % 10007);
        if (i % 3 == 0) word += " slots=" + std::to_string(i % 64);
        seen[word] += i;
        words.push_back(std::move(word));
    }
    std::sort(words.begin(), words.end());
    std::size_t sum = words.front().size() + words.back().size();
    for (const auto& [word, n] : seen) sum += word.size() + n;
    return sum;
}

volatile std::size_t reference_sink = 0;

// The input being run, for the SIGTERM handler (which may only call async-signal-safe functions): when the test
// runner's own timeout ends the replay first, the input that was running is named all the same.
char current_input[4096];

extern "C" void on_term(int signal) {
    constexpr char prefix[] = "fuzz replay: ended while running: ";
    (void)!::write(STDERR_FILENO, prefix, sizeof prefix - 1);
    (void)!::write(STDERR_FILENO, current_input, ::strnlen(current_input, sizeof current_input));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::signal(signal, SIG_DFL);
    ::raise(signal);
}

// The reference workload's time now, in milliseconds: the median of three runs, so that one run that the scheduler
// happened to favour or delay does not decide.
double reference_ms() {
    double runs[3];
    for (double& ms : runs) {
        const auto start = Clock::now();
        reference_sink = reference_sink + reference_workload();
        ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    std::sort(std::begin(runs), std::end(runs));
    return runs[1];
}

double positive_number(const char* name, double fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (*end != '\0' || !(value > 0)) {
        std::fprintf(stderr, "fuzz replay: %s must be a positive number (got '%s')\n", name, text);
        std::exit(2);
    }
    return value;
}

// Watches the input being run from a second thread and ends the process, naming the input, when it runs past its
// limit at the machine's current pace.
class Deadline {
public:
    Deadline(double base_seconds, double nominal_ms) : base_seconds_(base_seconds), nominal_ms_(nominal_ms) {
        const double measured_ms = reference_ms();
        slowdown_ = std::max(1.0, measured_ms / nominal_ms_);
        std::printf(
            "fuzz replay: reference workload %.2f ms here, %.3g ms where the limit was set: time limit per "
            "input %.1f s (%.1f s scaled by %.1f)\n",
            measured_ms, nominal_ms_, limit().count(), base_seconds_, slowdown_);
        watcher_ = std::thread([this] { watch(); });
    }
    Deadline(const Deadline&) = delete;
    Deadline& operator=(const Deadline&) = delete;
    ~Deadline() {
        {
            const std::lock_guard lock(mutex_);
            quit_ = true;
        }
        changed_.notify_all();
        watcher_.join();
    }

    void start(const std::string& input) {
        {
            const std::lock_guard lock(mutex_);
            input_ = input;
            started_ = Clock::now();
            running_ = true;
            ++serial_;
        }
        changed_.notify_all();
    }
    void stop() {
        {
            const std::lock_guard lock(mutex_);
            running_ = false;
        }
        changed_.notify_all();
    }

private:
    Seconds limit() const { return Seconds(base_seconds_ * slowdown_); }

    void watch() {
        std::unique_lock lock(mutex_);
        while (!quit_) {
            if (!running_) {
                changed_.wait(lock);
                continue;
            }
            const std::uint64_t serial = serial_;
            const auto done = [&] { return quit_ || !running_ || serial_ != serial; };
            if (changed_.wait_until(lock, started_ + limit(), done)) continue;
            // At the limit: time the reference workload again, alongside the input, as the machine runs now.
            lock.unlock();
            const double slowdown = reference_ms() / nominal_ms_;
            lock.lock();
            if (done()) continue;
            if (slowdown > slowdown_) {
                slowdown_ = slowdown;
                std::printf("fuzz replay: the machine is %.1fx slower than the limit's now: %s may run %.1f s\n",
                            slowdown_, input_.c_str(), limit().count());
                continue;
            }
            std::fprintf(stderr,
                         "fuzz replay: input ran past its time limit of %.1f s (%.1f s at the reference pace, the "
                         "machine %.1fx slower; an endless loop?): %s\n",
                         limit().count(), base_seconds_, slowdown_, input_.c_str());
            std::fflush(stdout);
            ::_exit(1);
        }
    }

    const double base_seconds_;
    const double nominal_ms_;
    std::mutex mutex_;
    std::condition_variable changed_;
    double slowdown_ = 1.0;  // how much slower than nominal the reference workload ran, at least 1
    std::string input_;
    Clock::time_point started_;
    bool running_ = false;
    bool quit_ = false;
    std::uint64_t serial_ = 0;
    std::thread watcher_;  // last: started once the rest is set
};

}  // namespace

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    std::vector<fs::path> inputs;
    for (int i = 1; i < argc; ++i) {
        const fs::path arg(argv[i]);
        if (fs::is_directory(arg)) {
            for (const auto& entry : fs::recursive_directory_iterator(arg)) {
                if (entry.is_regular_file() && entry.path().filename().string().front() != '.') {
                    inputs.push_back(entry.path());
                }
            }
        } else if (fs::exists(arg)) {
            inputs.push_back(arg);
        } else {
            std::fprintf(stderr, "fuzz replay: no such file or directory: %s\n", argv[i]);
            return 2;
        }
    }
    std::sort(inputs.begin(), inputs.end());
    if (inputs.empty()) {
        std::fprintf(stderr, "fuzz replay: no inputs\n");
        return 2;
    }
    struct sigaction action {};
    action.sa_handler = on_term;
    ::sigaction(SIGTERM, &action, nullptr);
    Deadline deadline(positive_number("LOCKSTEP_FUZZ_INPUT_SECONDS", 10),
                      positive_number("LOCKSTEP_FUZZ_REFERENCE_MS", reference_ms_nominal));
    for (const auto& path : inputs) {
        std::ifstream in(path, std::ios::binary);
        const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::snprintf(current_input, sizeof current_input, "%s", path.c_str());
        const auto start = Clock::now();
        deadline.start(path.string());
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
        deadline.stop();
        current_input[0] = '\0';
        const Seconds took = Clock::now() - start;
        std::printf("%s: %zu bytes, %.3f s\n", path.c_str(), data.size(), took.count());
    }
    std::printf("%zu inputs replayed\n", inputs.size());
    return 0;
}
