// A harness for the replay's own test (replay_limit_test.sh): an input `sleep MS` stands for one that runs away, and
// sleeps that long, first creating the file LOCKSTEP_FUZZ_SELFTEST_MARK names (so that the test knows it is running);
// any other input returns at once.

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (!text.starts_with("sleep ")) return 0;
    if (const char* mark = std::getenv("LOCKSTEP_FUZZ_SELFTEST_MARK")) std::ofstream{mark} << "running\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(std::string(text.substr(6)).c_str())));
    return 0;
}
