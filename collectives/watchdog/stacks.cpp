// Stacks in the hang report (stacks.hpp).

#include "stacks.hpp"

#include "channel.hpp"

#include <lockstep/base/rank_groups.hpp>
#include <lockstep/base/symbolizer.hpp>
#include <lockstep/config.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace lockstep::detail {

namespace {

pid_t current_tid() noexcept {
    return static_cast<pid_t>(::syscall(SYS_gettid));
}

std::atomic<pid_t> initial_thread{0};

// --- Native frames: the target thread walks its own stack in a signal handler.
//
// The capture's states: idle -> armed (the target's tid set, the signal sent) -> walking (the handler took it) ->
// taken (frames ready, a byte written to the pipe). A waiter that gives up moves armed back to idle, so a handler that
// runs late records nothing.
enum CaptureState : int { idle, armed, walking, taken };
constexpr int most_native_frames = 160;
struct NativeCapture {
    std::atomic<int> state{idle};
    std::atomic<pid_t> target{0};
    std::uintptr_t frames[most_native_frames] = {};
    int count = 0;
    int first = -1;  // the interrupted frame (the first past the signal frame), -1 if the walk did not see it
    int pipe[2] = {-1, -1};
};
NativeCapture capture;  // static storage: the handler allocates nothing

_Unwind_Reason_Code collect_frame(_Unwind_Context* context, void* /*unused*/) {
    if (capture.count >= most_native_frames) return _URC_END_OF_STACK;
    int before_instruction = 0;
    std::uintptr_t ip = _Unwind_GetIPInfo(context, &before_instruction);
    if (ip == 0) return _URC_END_OF_STACK;
    // The interrupted frame's address is the instruction itself, not a return address: one more, for the symbolizer
    // that looks one byte back.
    if (before_instruction != 0) {
        if (capture.first < 0) capture.first = capture.count;
        ip += 1;
    }
    capture.frames[capture.count++] = ip;
    return _URC_NO_REASON;
}

extern "C" void on_capture_signal(int /*signal*/, siginfo_t* info, void* /*context*/) {
    const int saved_errno = errno;
    int expected = armed;
    if (info != nullptr && info->si_code == SI_TKILL && info->si_pid == ::getpid() &&
        capture.target.load(std::memory_order_acquire) == current_tid() &&
        capture.state.compare_exchange_strong(expected, walking, std::memory_order_acq_rel)) {
        capture.count = 0;
        capture.first = -1;
        _Unwind_Backtrace(collect_frame, nullptr);
        capture.state.store(taken, std::memory_order_release);
        const char byte = 1;
        (void)!::write(capture.pipe[1], &byte, 1);
    }
    errno = saved_errno;
}

std::mutex capture_mutex;  // one capture at a time: the serving thread's and the report's
int capture_signal = 0;    // under capture_mutex: the signal whose handler is ours, once chosen

// A real-time signal for the capture, with our handler: the first one, from the top, that the program neither
// handles nor ignores. The handler stays installed afterwards: a signal still pending for a thread that blocks it
// would otherwise meet the default action (the end of the process) once the thread unblocks it.
std::string install_handler() {
    if (capture_signal != 0) {
        struct sigaction current {};
        ::sigaction(capture_signal, nullptr, &current);
        if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == on_capture_signal) return {};
        capture_signal = 0;  // the program took it over since: choose again
    }
    if (capture.pipe[0] < 0 && ::pipe2(capture.pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        return fmt::format("pipe2() failed: {}", std::strerror(errno));
    }
    // The unwinder's first use may allocate or load code: never first inside the handler.
    _Unwind_Backtrace([](_Unwind_Context*, void*) { return _URC_NO_REASON; }, nullptr);
    for (int sig = SIGRTMAX - 2; sig >= SIGRTMIN + 2; --sig) {
        struct sigaction current {};
        if (::sigaction(sig, nullptr, &current) != 0) continue;
        if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler != SIG_DFL) continue;  // the program's
        if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction != on_capture_signal) continue;
        struct sigaction ours {};
        ours.sa_sigaction = on_capture_signal;
        ours.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&ours.sa_mask);
        if (::sigaction(sig, &ours, nullptr) != 0) continue;
        capture_signal = sig;
        return {};
    }
    return "every real-time signal is handled by the program";
}

// Whether thread `tid` blocks `sig`, from its /proc status; nullopt if the thread is gone.
std::optional<bool> blocks_signal(pid_t tid, int sig) {
    std::ifstream status(fmt::format("/proc/self/task/{}/status", tid));
    if (!status) return std::nullopt;
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("SigBlk:", 0) != 0) continue;
        const std::uint64_t mask = std::stoull(line.substr(7), nullptr, 16);
        return ((mask >> (sig - 1)) & 1U) != 0;
    }
    return false;
}

nlohmann::json frame_json(std::uintptr_t address) {
    const base::SourceLocation& where = base::symbolize_return_address(reinterpret_cast<const void*>(address));
    nlohmann::json f = {{"function", where.function},
                        {"module", std::filesystem::path(where.module).filename().string()},
                        {"offset", where.offset}};
    if (!where.file.empty() && where.line != 0) {
        f["file"] = where.file;
        f["line"] = where.line;
    }
    return f;
}

nlohmann::json native_stack() {
    const pid_t tid = initial_thread.load();
    if (tid == 0) return {{"error", "no thread has initialised lockstep"}};
    std::scoped_lock lock(capture_mutex);
    if (std::string failure = install_handler(); !failure.empty()) return {{"error", failure}};
    // A thread that blocks the signal just now (inside the handler of the previous capture, say) takes it when it
    // unblocks it; one that keeps it blocked is named when the wait is over.
    if (!blocks_signal(tid, capture_signal)) {
        return {{"thread", tid}, {"error", "the thread that initialised lockstep has exited"}};
    }
    char drain[16];
    while (::read(capture.pipe[0], drain, sizeof drain) > 0) {
    }
    capture.target.store(tid, std::memory_order_release);
    capture.state.store(armed, std::memory_order_release);
    if (::syscall(SYS_tgkill, ::getpid(), tid, capture_signal) != 0) {
        capture.state.store(idle);
        return {{"thread", tid}, {"error", fmt::format("tgkill() failed: {}", std::strerror(errno))}};
    }
    const auto deadline = Clock::now() + stack_bound;
    while (capture.state.load(std::memory_order_acquire) != taken) {
        const int wait = milliseconds_until(deadline);
        if (wait <= 0) {
            int expected = armed;
            if (capture.state.compare_exchange_strong(expected, idle)) {
                const std::string why =
                    blocks_signal(tid, capture_signal).value_or(false)
                        ? fmt::format(
                              "the thread that initialised lockstep blocks signal {} (SIGRTMIN+{}), by which "
                              "its stack is taken",
                              capture_signal, capture_signal - SIGRTMIN)
                        : fmt::format(
                              "the thread that initialised lockstep did not take signal {} within {} s (in an "
                              "uninterruptible wait, or under ThreadSanitizer, which holds signals back)",
                              capture_signal, std::chrono::seconds(stack_bound).count());
                return {{"thread", tid}, {"error", why}};
            }
            // The handler is walking: it ends soon.
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        pollfd p{capture.pipe[0], POLLIN, 0};
        (void)::poll(&p, 1, wait);
    }
    const int first = std::max(capture.first, 0);
    const std::vector<std::uintptr_t> addresses(capture.frames + first, capture.frames + capture.count);
    capture.state.store(idle, std::memory_order_release);
    nlohmann::json frames = nlohmann::json::array();
    for (const std::uintptr_t a : addresses) frames.push_back(frame_json(a));
    return {{"thread", tid}, {"frames", std::move(frames)}};
}

// --- Python frames: the C API, found in the process (the interpreter, or libpython it loaded).

template <class F>
F python_symbol(const char* name) {
    return reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));  // NOLINT: the C API's own signatures
}

struct PythonApi {
    int (*initialized)() = python_symbol<int (*)()>("Py_IsInitialized");
    int (*finalizing)() = python_symbol<int (*)()>("_Py_IsFinalizing") != nullptr
                              ? python_symbol<int (*)()>("_Py_IsFinalizing")
                              : python_symbol<int (*)()>("Py_IsFinalizing");
    int (*ensure)() = python_symbol<int (*)()>("PyGILState_Ensure");
    void (*release)(int) = python_symbol<void (*)(int)>("PyGILState_Release");
    void* (*this_thread)() = python_symbol<void* (*)()>("PyGILState_GetThisThreadState");
    void* (*main_interpreter)() = python_symbol<void* (*)()>("PyInterpreterState_Main");
    void* (*thread_head)(void*) = python_symbol<void* (*)(void*)>("PyInterpreterState_ThreadHead");
    void* (*thread_next)(void*) = python_symbol<void* (*)(void*)>("PyThreadState_Next");
    std::uint64_t (*thread_id)(void*) = python_symbol<std::uint64_t (*)(void*)>("PyThreadState_GetID");
    void* (*thread_frame)(void*) = python_symbol<void* (*)(void*)>("PyThreadState_GetFrame");
    void* (*frame_code)(void*) = python_symbol<void* (*)(void*)>("PyFrame_GetCode");
    int (*frame_line)(void*) = python_symbol<int (*)(void*)>("PyFrame_GetLineNumber");
    void* (*frame_back)(void*) = python_symbol<void* (*)(void*)>("PyFrame_GetBack");
    void* (*attribute)(void*, const char*) = python_symbol<void* (*)(void*, const char*)>("PyObject_GetAttrString");
    const char* (*utf8)(void*) = python_symbol<const char* (*)(void*)>("PyUnicode_AsUTF8");
    void (*decref)(void*) = python_symbol<void (*)(void*)>("Py_DecRef");
    void (*clear_error)() = python_symbol<void (*)()>("PyErr_Clear");

    [[nodiscard]] bool complete() const {
        return initialized != nullptr && ensure != nullptr && release != nullptr && this_thread != nullptr &&
               main_interpreter != nullptr && thread_head != nullptr && thread_next != nullptr &&
               thread_id != nullptr && thread_frame != nullptr && frame_code != nullptr && frame_line != nullptr &&
               frame_back != nullptr && attribute != nullptr && utf8 != nullptr && decref != nullptr &&
               clear_error != nullptr;
    }

    // A code object's attribute as text (the GIL held).
    [[nodiscard]] std::string text_of(void* code, const char* name) const {
        void* value = attribute(code, name);
        if (value == nullptr) {
            clear_error();
            return "??";
        }
        const char* text = utf8(value);
        std::string out = text != nullptr ? text : "??";
        if (text == nullptr) clear_error();
        decref(value);
        return out;
    }
};

constexpr int most_python_frames = 64;

// Every thread's frames (the GIL held), innermost first; the thread that asks is left out.
nlohmann::json walk_python_threads(const PythonApi& py) {
    nlohmann::json threads = nlohmann::json::array();
    void* self = py.this_thread();
    std::uint64_t lowest = ~std::uint64_t{0};
    for (void* ts = py.thread_head(py.main_interpreter()); ts != nullptr; ts = py.thread_next(ts)) {
        if (ts == self) continue;
        const std::uint64_t id = py.thread_id(ts);
        lowest = std::min(lowest, id);
        nlohmann::json frames = nlohmann::json::array();
        void* frame = py.thread_frame(ts);  // new references from here on
        int taken = 0;
        while (frame != nullptr) {
            if (taken++ < most_python_frames) {
                void* code = py.frame_code(frame);
                std::string function = code != nullptr ? py.text_of(code, "co_qualname") : "??";
                if (function == "??" && code != nullptr) function = py.text_of(code, "co_name");  // before 3.11
                frames.push_back({{"function", function},
                                  {"file", code != nullptr ? py.text_of(code, "co_filename") : "??"},
                                  {"line", py.frame_line(frame)}});
                if (code != nullptr) py.decref(code);
            }
            void* back = py.frame_back(frame);
            py.decref(frame);
            frame = back;
        }
        if (taken > most_python_frames) frames.push_back({{"cut", taken - most_python_frames}});
        threads.push_back({{"id", id}, {"frames", std::move(frames)}});
    }
    // The list holds the newest thread first: the oldest (the main thread) leads the answer.
    std::reverse(threads.begin(), threads.end());
    for (auto& t : threads) t["main"] = t["id"].get<std::uint64_t>() == lowest;
    return threads;
}

// The helper thread that takes the GIL, and what the watchdog's thread waits for. A helper that waits for the GIL
// past the bound is left to finish alone; while it waits, no other is started.
struct PythonWalk {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool busy = false;  // a helper runs
    bool done = false;  // its result is in `result`
    nlohmann::json result;
    Clock::time_point since;
};
PythonWalk& python_walk() {
    static auto* walk = new PythonWalk;  // never destroyed: a helper may outlive the report
    return *walk;
}

extern "C" void* walk_python_helper(void* /*unused*/) {
    static const PythonApi py;
    nlohmann::json threads;
    if (py.finalizing != nullptr && py.finalizing() != 0) {
        threads = {{"error", "the interpreter is finalizing"}};
    } else {
        const int gil = py.ensure();
        try {
            threads = {{"threads", walk_python_threads(py)}};
        } catch (...) {
            threads = {{"error", "the frames could not be read"}};
        }
        py.release(gil);
    }
    PythonWalk& w = python_walk();
    std::scoped_lock lock(w.mutex);
    w.result = std::move(threads);
    w.done = true;
    w.busy = false;
    w.done_cv.notify_all();
    return nullptr;
}

std::optional<nlohmann::json> python_stacks() {
    static const PythonApi py;
    if (!py.complete() || py.initialized() == 0) return std::nullopt;
    // PyGILState_Ensure must not be called while the interpreter finalizes (the thread would never come back).
    if (py.finalizing != nullptr && py.finalizing() != 0) {
        return nlohmann::json{{"error", "the interpreter is finalizing"}};
    }
    PythonWalk& w = python_walk();
    std::unique_lock lock(w.mutex);
    if (w.busy) {
        return nlohmann::json{
            {"error", fmt::format("the GIL has been held by another thread for {:.1f} s (native code that does not "
                                  "release it?)",
                                  std::chrono::duration<double>(Clock::now() - w.since).count())}};
    }
    w.busy = true;
    w.done = false;
    w.since = Clock::now();
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_t helper;
    const int rc = pthread_create(&helper, &attributes, walk_python_helper, nullptr);
    pthread_attr_destroy(&attributes);
    if (rc != 0) {
        w.busy = false;
        return nlohmann::json{{"error", fmt::format("pthread_create() failed: {}", std::strerror(rc))}};
    }
    if (!w.done_cv.wait_for(lock, stack_bound, [&] { return w.done; })) {
        return nlohmann::json{
            {"error", fmt::format("the GIL was not released within {} s: another thread holds it in native code",
                                  std::chrono::seconds(stack_bound).count())}};
    }
    return std::move(w.result);
}

// --- The tree.

// What a module is, for the frames the report leaves out: "" for the program's own.
std::string internal_kind(const std::string& module) {
    const auto starts = [&](std::string_view prefix) { return module.rfind(prefix, 0) == 0; };
    if (starts("liblockstep") || starts("_lockstep")) return "lockstep";
    if (starts("libmpi") || starts("libopen-") || starts("libpmix") || starts("libevent") || starts("libhwloc") ||
        starts("libuc") || starts("mca_") || starts("libfabric") || starts("libpsm") || starts("libmca")) {
        return "MPI";
    }
    if (starts("python") || starts("libpython")) return "the interpreter";
    if (starts("libc.so") || starts("libc-") || starts("libpthread") || starts("ld-linux") || starts("libgcc_s") ||
        starts("libstdc++") || starts("libm.so") || starts("libdl") || starts("librt") || starts("linux-vdso") ||
        starts("libasan") || starts("libtsan") || starts("libubsan")) {
        return "the system";
    }
    return {};
}

// "step" from "step(int, double)": the parameters make lines long and say little here.
std::string without_parameters(std::string name) {
    if (name.empty() || name.back() != ')') return name;
    int depth = 0;
    for (std::size_t i = name.size(); i-- > 0;) {
        if (name[i] == ')') ++depth;
        if (name[i] == '(' && --depth == 0) return i == 0 ? name : name.substr(0, i);
    }
    return name;
}

std::string native_label(const nlohmann::json& f) {
    std::string name = without_parameters(f.value("function", ""));
    if (name.empty()) name = "??";
    if (name.size() > 100) name = name.substr(0, 97) + "...";
    if (f.contains("file")) {
        return fmt::format("{} ({}:{})", name, std::filesystem::path(f.value("file", "")).filename().string(),
                           f.value("line", 0));
    }
    return fmt::format("{} ({}+{:#x})", name, f.value("module", "?"), f.value("offset", std::size_t{0}));
}

// "lockstep, MPI and the system"
std::string kinds_text(const std::vector<std::string>& kinds) {
    if (kinds.empty()) return "";
    if (kinds.size() == 1) return kinds.front();
    std::vector<std::string> head(kinds.begin(), kinds.end() - 1);
    return fmt::format("{} and {}", fmt::join(head, ", "), kinds.back());
}

constexpr std::size_t most_lines_per_stack = 24;
constexpr std::size_t most_section_lines = 240;

// One native stack as the tree's lines, outermost first: the program's frames, and the first frame past the last of
// them (the call into lockstep, say); the frames within lockstep, MPI, the interpreter and the system beyond it in one
// line that says what was left out, and runs of them between the program's frames one line each.
std::vector<std::string> native_lines(const nlohmann::json& frames_innermost_first) {
    std::vector<nlohmann::json> frames(frames_innermost_first.rbegin(), frames_innermost_first.rend());
    // Above main: the C library's start-up.
    while (!frames.empty()) {
        const std::string name = frames.front().value("function", "");
        if (name != "_start" && name.rfind("__libc_start", 0) != 0) break;
        frames.erase(frames.begin());
    }
    std::vector<std::string> kind;
    for (const auto& f : frames) kind.push_back(internal_kind(f.value("module", "")));
    std::optional<std::size_t> last_program;
    for (std::size_t i = 0; i < frames.size(); ++i) {
        if (kind[i].empty()) last_program = i;
    }
    std::vector<std::string> lines;
    const auto left_out = [&](std::size_t from, std::size_t to) {  // [from, to)
        std::vector<std::string> kinds;
        for (std::size_t i = from; i < to; ++i) {
            if (std::find(kinds.begin(), kinds.end(), kind[i]) == kinds.end()) kinds.push_back(kind[i]);
        }
        return fmt::format("... {} left out", kinds_text(kinds) + (to - from == 1 ? " (1 frame)" : " frames"));
    };
    // Without a frame of the program's (a Python program's native stack), every run of one kind is a line or two.
    std::size_t i = 0;
    const std::size_t end = last_program ? *last_program + 1 : frames.size();
    while (i < end) {
        if (kind[i].empty()) {
            lines.push_back(native_label(frames[i++]));
            continue;
        }
        std::size_t j = i;
        while (j < end && kind[j] == kind[i]) ++j;
        lines.push_back(native_label(frames[i]));  // the call into the run
        if (j - i > 1) lines.push_back(left_out(i + 1, j));
        i = j;
    }
    if (i < frames.size()) {
        lines.push_back(native_label(frames[i]));  // the call out of the program (or the outermost frame)
        if (frames.size() - i > 1) lines.push_back(left_out(i + 1, frames.size()));
    }
    if (lines.size() > most_lines_per_stack) {
        const std::size_t cut = lines.size() - most_lines_per_stack + 1;
        lines.erase(lines.begin() + 4, lines.begin() + 4 + static_cast<std::ptrdiff_t>(cut));
        lines.insert(lines.begin() + 4, fmt::format("... {} lines cut", cut));
    }
    return lines;
}

std::vector<std::string> python_lines(const nlohmann::json& thread) {
    std::vector<std::string> lines = {thread.value("main", false)
                                          ? std::string("main thread")
                                          : fmt::format("thread {}", thread.value("id", std::uint64_t{0}))};
    const auto& frames = thread["frames"];
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
        if (it->contains("cut")) {
            lines.push_back(fmt::format("... {} outer frames cut", (*it)["cut"].get<int>()));
            continue;
        }
        lines.push_back(fmt::format("{} ({}:{})", it->value("function", "??"),
                                    std::filesystem::path(it->value("file", "")).filename().string(),
                                    it->value("line", 0)));
    }
    if (lines.size() > most_lines_per_stack) {
        const std::size_t cut = lines.size() - most_lines_per_stack + 1;
        lines.erase(lines.begin() + 3, lines.begin() + 3 + static_cast<std::ptrdiff_t>(cut));
        lines.insert(lines.begin() + 3, fmt::format("... {} frames cut", cut));
    }
    return lines;
}

// A prefix tree of stacks: each node one line, with the ranks whose stacks pass through it.
struct Node {
    std::string line;
    std::set<int> ranks;
    std::set<int> ending;  // ranks whose stack ends here
    std::vector<Node> children;
    void add(const std::vector<std::string>& lines, std::size_t depth, int rank) {
        ranks.insert(rank);
        if (depth == lines.size()) {
            ending.insert(rank);
            return;
        }
        auto it = std::find_if(children.begin(), children.end(), [&](const Node& c) { return c.line == lines[depth]; });
        if (it == children.end()) {
            children.push_back({lines[depth], {}, {}, {}});
            it = children.end() - 1;
        }
        it->add(lines, depth + 1, rank);
    }
};

std::string ranks_header(const std::set<int>& ranks) {
    return base::processes_text(std::vector<int>(ranks.begin(), ranks.end())) + ":";
}

// A node's children under it: one child that every rank of the node goes on to follows at the same indent; where the
// ranks part, each branch gets its ranks as a header and goes one step in.
void print_children(const Node& node, const std::string& indent, std::string& out) {
    const bool parts = node.children.size() > 1 || (!node.ending.empty() && !node.children.empty());
    for (const Node& child : node.children) {
        if (parts) {
            out += indent + ranks_header(child.ranks) + "\n";
            out += indent + "  " + child.line + "\n";
            print_children(child, indent + "  ", out);
        } else {
            out += indent + child.line + "\n";
            print_children(child, indent, out);
        }
    }
    if (parts && !node.ending.empty()) out += indent + ranks_header(node.ending) + " (no more frames)\n";
}

std::string tree_text(const Node& root, const std::string& indent) {
    std::string out;
    if (root.children.size() == 1) {  // one way in: the ranks once, above it
        out += indent + ranks_header(root.ranks) + "\n";
        print_children(root, indent + "  ", out);
    } else {
        print_children(root, indent, out);
    }
    return out;
}

}  // namespace

void remember_initial_thread() noexcept {
    pid_t none = 0;
    initial_thread.compare_exchange_strong(none, current_tid());
}

nlohmann::json take_stacks() {
    static std::mutex taking;  // the serving thread's STACK and the report's own stacks, one after the other
    std::scoped_lock lock(taking);
    nlohmann::json j = nlohmann::json::object();
    const HangStacks which = config().hang_stacks;
    if (which == HangStacks::Off) {
        j["native"] = {{"skipped", "hang_stacks is off in this process"}};
        return j;
    }
    // Python first: the signal that takes the native frames ends a sleep early (a system call that SA_RESTART does not
    // restart), which would let a thread that holds the GIL across it give the GIL up and hide that it holds it.
    try {
        if (auto python = python_stacks()) j["python"] = std::move(*python);
    } catch (const std::exception& e) {
        j["python"] = {{"error", e.what()}};
    }
    if (which == HangStacks::Python) {
        j["native"] = {{"skipped", "hang_stacks is python: no signal interrupts the program"}};
        return j;
    }
    try {
        j["native"] = native_stack();
    } catch (const std::exception& e) {
        j["native"] = {{"error", e.what()}};
    }
    return j;
}

void answer_stack_request(Fd connection) {
    if (!connection.valid()) return;
    std::thread([fd = std::move(connection)] {
        const std::string out = take_stacks().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                "\n";  // names may be any bytes
        const auto deadline = Clock::now() + ask_deadline;
        for (std::size_t sent = 0; sent < out.size();) {
            const ssize_t n = ::send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
            if (n > 0) {
                sent += static_cast<std::size_t>(n);
                continue;
            }
            if (n < 0 && errno != EAGAIN && errno != EINTR) return;
            pollfd p{fd.get(), POLLOUT, 0};
            if (const int wait = milliseconds_until(deadline); wait <= 0 || ::poll(&p, 1, wait) <= 0) return;
        }
    }).detach();
}

nlohmann::json ask_stacks(const std::vector<Endpoint>& endpoints, const Endpoint& self) {
    const auto is_self = [&](const Endpoint& e) {
        return e.pid == self.pid && e.host.str() == self.host.str() && e.port == self.port;
    };
    std::vector<Endpoint> remote;
    for (const Endpoint& e : endpoints) {
        if (!is_self(e)) remote.push_back(e);
    }
    // Each process may wait the bound twice (its thread, then the GIL), and answers after that.
    const std::vector<Query> answers = ask_all(remote, "STACK", Clock::now() + 2 * stack_bound + ask_deadline);
    nlohmann::json stacks = nlohmann::json::object();
    std::size_t next = 0;
    for (const Endpoint& e : endpoints) {
        nlohmann::json s;
        if (is_self(e)) {
            s = take_stacks();
        } else if (const Query& q = answers[next++]; q.answer) {
            s = nlohmann::json::parse(*q.answer, nullptr, false);
            if (!s.is_object()) s = {{"unreachable", "malformed answer"}};
        } else {
            s = {{"unreachable", q.failure}};
        }
        stacks[std::to_string(e.world_rank)] = std::move(s);
    }
    return stacks;
}

std::string stacks_text(const nlohmann::json& stacks) {
    if (!stacks.is_object() || stacks.empty()) return {};
    std::map<int, nlohmann::json> by_rank;  // in rank order, not the keys' text order
    for (const auto& [key, s] : stacks.items()) by_rank[std::stoi(key)] = s;
    Node native, python;
    std::map<std::string, std::vector<int>> native_errors, native_skipped, python_errors, unreachable;
    for (const auto& [rank, s] : by_rank) {
        if (s.contains("unreachable")) {
            unreachable[s.value("unreachable", "")].push_back(rank);
            continue;
        }
        if (const auto& n = s.value("native", nlohmann::json::object()); n.contains("frames")) {
            native.add(native_lines(n["frames"]), 0, rank);
        } else if (n.contains("skipped")) {
            native_skipped[n.value("skipped", "")].push_back(rank);
        } else {
            native_errors[n.value("error", "no answer")].push_back(rank);
        }
        if (!s.contains("python")) continue;
        if (const auto& p = s["python"]; p.contains("threads")) {
            for (const auto& t : p["threads"]) python.add(python_lines(t), 0, rank);
        } else {
            python_errors[p.value("error", "no answer")].push_back(rank);
        }
    }
    std::string out = "\nStacks (outermost call first; processes with the same frames together):\n";
    const auto errors = [&](const std::map<std::string, std::vector<int>>& by_text, const char* what) {
        for (const auto& [text, ranks] : by_text) {
            out += fmt::format("  {}: {} could not be taken: {}\n", base::processes_text(ranks), what, text);
        }
    };
    if (!python.children.empty() || !python_errors.empty()) {
        out += "Python, every thread:\n" + tree_text(python, "  ");
        errors(python_errors, "the Python stack");
    }
    out += "Native, the thread that initialised lockstep:\n" + tree_text(native, "  ");
    errors(native_errors, "the stack");
    for (const auto& [text, ranks] : native_skipped) {
        out += fmt::format("  {}: not taken ({})\n", base::processes_text(ranks), text);
    }
    for (const auto& [text, ranks] : unreachable) {
        out += fmt::format("  {}: no answer ({})\n", base::processes_text(ranks), text);
    }
    // Many processes that all differ: the report stays readable, and says what it cut.
    if (const auto lines = static_cast<std::size_t>(std::count(out.begin(), out.end(), '\n'));
        lines > most_section_lines) {
        std::size_t end = 0;
        for (std::size_t kept = 0; kept < most_section_lines; ++kept) end = out.find('\n', end) + 1;
        out.resize(end);
        out += fmt::format("  ... {} more lines of stacks cut\n", lines - most_section_lines);
    }
    return out;
}

}  // namespace lockstep::detail
