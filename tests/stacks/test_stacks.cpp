#define BOOST_TEST_MODULE stacks
#include <boost/test/unit_test.hpp>

// White-box: the tree of the hang report's stacks from made-up answers, and this process's own stack taken from
// another thread (built with -g -O0, so that the frames have names and lines).

#include <collectives/watchdog/stacks.hpp>

#include <nlohmann/json.hpp>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>

using lockstep::detail::stacks_text;
using nlohmann::json;

namespace {

json frame(const std::string& function, const std::string& module, const std::string& file = "", int line = 0) {
    json f = {{"function", function}, {"module", module}, {"offset", 16}};
    if (!file.empty()) {
        f["file"] = "/src/" + file;
        f["line"] = line;
    }
    return f;
}

// Innermost first, as a process answers.
json waiting_in_allreduce() {
    return {{"native",
             {{"thread", 1},
              {"frames",
               {frame("poll", "libc.so.6"), frame("opal_progress", "libopen-pal.so.40"),
                frame("lockstep::Communicator::allreduce_(lockstep::Tensor&, lockstep::ReduceOp)", "liblockstep.so.0"),
                frame("step(int)", "app", "train.cpp", 40), frame("main", "app", "train.cpp", 90),
                frame("__libc_start_call_main", "libc.so.6"), frame("_start", "app")}}}}};
}

json computing() {
    return {
        {"native",
         {{"thread", 1},
          {"frames",
           {frame("compute()", "app", "model.cpp", 12), frame("step(int)", "app", "train.cpp", 38),
            frame("main", "app", "train.cpp", 90), frame("__libc_start_main", "libc.so.6"), frame("_start", "app")}}}}};
}

std::atomic<bool> main_waits{false};
std::atomic<bool> release_main{false};

[[gnu::noinline]] void wait_here() {
    main_waits = true;
    while (!release_main.load()) std::this_thread::yield();
}

// Takes this process's stacks from another thread once the main thread waits in wait_here().
json stacks_of_waiting_main() {
    main_waits = false;
    release_main = false;
    auto taken = std::async(std::launch::async, [] {
        while (!main_waits.load()) std::this_thread::yield();
        json s = lockstep::detail::take_stacks();
        release_main = true;
        return s;
    });
    wait_here();
    return taken.get();
}

}  // namespace

BOOST_AUTO_TEST_CASE(ranks_with_the_same_frames_are_one_branch) {
    json stacks = {{"0", waiting_in_allreduce()},
                   {"1", waiting_in_allreduce()},
                   {"2", waiting_in_allreduce()},
                   {"3", computing()},
                   {"4", {{"unreachable", "Connection refused"}}},
                   {"10", {{"native", {{"error", "the thread that initialised lockstep has exited"}}}}}};
    const std::string text = stacks_text(stacks);
    BOOST_TEST(text ==
               "\nStacks (outermost call first; processes with the same frames together):\n"
               "Native, the thread that initialised lockstep:\n"
               "  Processes 0-3:\n"
               "    main (train.cpp:90)\n"
               "    Processes 0-2:\n"
               "      step (train.cpp:40)\n"
               "      lockstep::Communicator::allreduce_ (liblockstep.so.0+0x10)\n"
               "      ... MPI and the system frames left out\n"
               "    Process 3:\n"
               "      step (train.cpp:38)\n"
               "      compute (model.cpp:12)\n"
               "  Process 10: the stack could not be taken: the thread that initialised lockstep has exited\n"
               "  Process 4: no answer (Connection refused)\n");
}

BOOST_AUTO_TEST_CASE(python_threads_are_branches_of_their_own) {
    const json threads = {
        {{"id", 1},
         {"main", true},
         {"frames",
          {{{"function", "spin"}, {"file", "/x/train.py"}, {"line", 16}},
           {{"function", "<module>"}, {"file", "/x/train.py"}, {"line", 30}}}}},
        {{"id", 2}, {"main", false}, {"frames", {{{"function", "run"}, {"file", "/x/t.py"}, {"line", 3}}}}}};
    json stacks = {{"0", {{"python", {{"threads", threads}}}, {"native", {{"error", "x"}}}}},
                   {"1", {{"python", {{"error", "the interpreter is finalizing"}}}, {"native", {{"error", "x"}}}}}};
    const std::string text = stacks_text(stacks);
    BOOST_TEST(text.find("Python, every thread:\n"
                         "  Process 0:\n"
                         "    main thread\n"
                         "    <module> (train.py:30)\n"
                         "    spin (train.py:16)\n"
                         "  Process 0:\n"
                         "    thread 2\n"
                         "    run (t.py:3)\n"
                         "  Process 1: the Python stack could not be taken: the interpreter is finalizing\n") !=
                   std::string::npos,
               text);
}

BOOST_AUTO_TEST_CASE(long_stacks_and_many_processes_are_cut_and_say_so) {
    json deep = json::array();
    for (int i = 0; i < 40; ++i) deep.push_back(frame("f" + std::to_string(i), "app", "deep.cpp", i + 1));
    const std::string one = stacks_text({{"0", {{"native", {{"frames", deep}}}}}});
    BOOST_TEST(one.find("... 17 lines cut") != std::string::npos, one);
    BOOST_TEST(one.find("f39 (deep.cpp:40)") != std::string::npos, one);  // the outermost kept
    BOOST_TEST(one.find("f0 (deep.cpp:1)") != std::string::npos, one);    // and the innermost

    json many = json::object();
    for (int r = 0; r < 300; ++r) {
        many[std::to_string(r)] = {{"native", {{"frames", {frame("f" + std::to_string(r), "app", "a.cpp", r + 1)}}}}};
    }
    const std::string text = stacks_text(many);
    BOOST_TEST(text.find("more lines of stacks cut") != std::string::npos);
    BOOST_TEST(std::count(text.begin(), text.end(), '\n') < 250);
}

BOOST_AUTO_TEST_CASE(this_process_main_thread_frames) {
    lockstep::detail::remember_initial_thread();
    // Many times: the thread is interrupted each time and goes on.
    for (int i = 0; i < 50; ++i) {
        const json s = stacks_of_waiting_main();
        BOOST_TEST(!s.contains("python"));  // not a Python program
        BOOST_REQUIRE_MESSAGE(s["native"].contains("frames"), s.dump());
        bool found = false;
        for (const auto& f : s["native"]["frames"]) {
            found = found || (f.value("function", "").find("wait_here") != std::string::npos &&
                              f.value("file", "").find("test_stacks.cpp") != std::string::npos);
        }
        BOOST_TEST(found, s.dump());
    }
}

BOOST_AUTO_TEST_CASE(a_thread_that_blocks_the_signal_is_named_not_waited_for) {
    lockstep::detail::remember_initial_thread();
    sigset_t all_realtime, previous;
    sigemptyset(&all_realtime);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&all_realtime, sig);
    pthread_sigmask(SIG_BLOCK, &all_realtime, &previous);
    const json s = stacks_of_waiting_main();
    BOOST_TEST(s["native"].value("error", "").find("blocks signal") != std::string::npos, s.dump());
    // The signal left pending meets the handler, not the default action, when the thread unblocks it.
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    const json again = stacks_of_waiting_main();
    BOOST_TEST(again["native"].contains("frames"), again.dump());
}
