#define BOOST_TEST_MODULE stacks_python
#include <boost/test/unit_test.hpp>

// White-box: the Python frames of every thread, taken 100 times from a thread of its own while an embedded
// interpreter runs Python on two threads; the interpreter works on undisturbed and finalizes, after which a stack has
// no Python part. The interpreter is loaded with dlopen (libpython, RTLD_GLOBAL), as a program that embeds it does;
// the test is skipped where libpython is not installed.

#include <collectives/watchdog/stacks.hpp>

#include <dlfcn.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <thread>

using nlohmann::json;

namespace {

template <class F>
F python_function(void* library, const char* name) {
    return reinterpret_cast<F>(::dlsym(library, name));  // NOLINT: the C API's own signatures
}

// Whether some thread's frames include `function`.
bool has_frame(const json& stacks, const std::string& function) {
    for (const auto& thread : stacks["python"].value("threads", json::array())) {
        for (const auto& f : thread["frames"]) {
            if (f.value("function", "") == function) return true;
        }
    }
    return false;
}

constexpr const char* program = R"(
import threading

stop = False
worked = 0


def busy_worker():
    global worked
    while not stop:
        worked += sum(range(100))


def main_spin():
    total = 0
    while not stop:
        total += len(str(total))
    return total


threading.Thread(target=busy_worker, daemon=True).start()
main_spin()
)";

}  // namespace

BOOST_AUTO_TEST_CASE(every_thread_taken_again_and_again) {
#if defined(__SANITIZE_ADDRESS__)
    BOOST_TEST_MESSAGE("skipped under AddressSanitizer: the interpreter's own leaks would be reported at exit");
    return;
#endif
    void* library = ::dlopen("libpython3.11.so.1.0", RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) library = ::dlopen("libpython3.so", RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) {
        BOOST_TEST_MESSAGE("skipped: no libpython to embed");
        return;
    }
    const auto initialize = python_function<void (*)(int)>(library, "Py_InitializeEx");
    const auto run = python_function<int (*)(const char*)>(library, "PyRun_SimpleString");
    const auto ensure = python_function<int (*)()>(library, "PyGILState_Ensure");
    const auto release = python_function<void (*)(int)>(library, "PyGILState_Release");
    const auto finalize = python_function<int (*)()>(library, "Py_FinalizeEx");
    BOOST_REQUIRE(initialize != nullptr && run != nullptr && ensure != nullptr && release != nullptr &&
                  finalize != nullptr);
    initialize(0);
    lockstep::detail::remember_initial_thread();

    bool started = false;
    int taken_with_both = 0;
    std::string last;
    std::thread taker([&] {
        // Until both threads run their functions (a loaded machine may take a while to start them); then 100 times.
        for (int i = 0; i < 3000 && !started; ++i) {
            const json s = lockstep::detail::take_stacks();
            started = s.contains("python") && has_frame(s, "main_spin") && has_frame(s, "busy_worker");
            if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        for (int i = 0; started && i < 100; ++i) {
            const json s = lockstep::detail::take_stacks();
            last = s.dump();
            if (s.contains("python") && has_frame(s, "main_spin") && has_frame(s, "busy_worker")) ++taken_with_both;
        }
        const int gil = ensure();
        run("import __main__; __main__.stop = True");
        release(gil);
    });
    BOOST_TEST(run(program) == 0);  // main_spin() returns once the taker sets stop
    taker.join();
    BOOST_TEST(started);
    // Each take waits at most a second for the GIL, which two threads of pure Python pass on every 5 ms.
    BOOST_TEST(taken_with_both >= 90, taken_with_both << " of 100; the last: " << last);
    BOOST_TEST(run("assert worked > 0") == 0);
    BOOST_TEST(finalize() == 0);
    const json after = lockstep::detail::take_stacks();
    BOOST_TEST(!after.contains("python"), after.dump());
    BOOST_TEST(after["native"].contains("frames"), after.dump());  // the main thread, from this thread itself
}
