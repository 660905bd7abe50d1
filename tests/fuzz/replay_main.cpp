// Replays fuzz inputs without libFuzzer: `fuzz_X_replay PATH...` runs LLVMFuzzerTestOneInput once on every file
// given, and on every file under every directory given (in name order), so that the corpus and the regressions run in
// the ordinary test suite with an ordinary compiler. A crash, an uncaught exception or a sanitizer report fails the
// run as it would under libFuzzer; an input that runs longer than LOCKSTEP_FUZZ_INPUT_SECONDS (default 10) is named
// and fails it too, since an endless loop is a finding like any other.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

// The input being run, for the alarm handler (which may only call async-signal-safe functions).
char current_input[4096];

extern "C" void on_alarm(int) {
    constexpr char prefix[] = "fuzz replay: input ran past its time limit (an endless loop?): ";
    (void)!::write(STDERR_FILENO, prefix, sizeof prefix - 1);
    (void)!::write(STDERR_FILENO, current_input, std::strlen(current_input));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(1);
}

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
    const char* limit_text = std::getenv("LOCKSTEP_FUZZ_INPUT_SECONDS");
    const unsigned limit = limit_text != nullptr ? static_cast<unsigned>(std::atoi(limit_text)) : 10U;
    struct sigaction action {};
    action.sa_handler = on_alarm;
    ::sigaction(SIGALRM, &action, nullptr);
    for (const auto& path : inputs) {
        std::ifstream in(path, std::ios::binary);
        const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::snprintf(current_input, sizeof current_input, "%s", path.c_str());
        const auto start = std::chrono::steady_clock::now();
        ::alarm(limit);
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
        ::alarm(0);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        std::printf("%s: %zu bytes, %.3f s\n", path.c_str(), data.size(), took.count());
    }
    std::printf("%zu inputs replayed\n", inputs.size());
    return 0;
}
