// The C interface: status codes and last errors, versions, the runtime, agreements and logging.

#include "c_api_internal.hpp"

#include <lockstep/allocator.hpp>
#include <lockstep/batch_size.hpp>
#include <lockstep/build_config.hpp>
#include <lockstep/generator.hpp>
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>
#include <lockstep/signature.hpp>
#include <lockstep/trigger.hpp>

#include <fmt/core.h>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <new>
#include <optional>
#include <stdexcept>
#include <unordered_set>
#include <vector>

namespace lockstep::c_api {

namespace {

struct LastError {
    lockstep_status_t status = LOCKSTEP_OK;
    std::string text;
    bool out_of_memory = false;
};
thread_local LastError last_error;

struct Classified {
    lockstep_status_t status;
    std::string text;
    bool out_of_memory = false;
};

Classified classify_current() noexcept {
    try {
        throw;
    } catch (const StatusError& e) {
        return {e.status(), e.what()};
    } catch (const SignatureMismatchError& e) {
        return {LOCKSTEP_ERROR_SIGNATURE_MISMATCH, e.what()};
    } catch (const CallRejectedError& e) {
        return {LOCKSTEP_ERROR_CALL_REJECTED, e.what(), e.out_of_memory()};
    } catch (const DistributedOperationError& e) {
        return {LOCKSTEP_ERROR_DISTRIBUTED, e.what()};
    } catch (const ConfigError& e) {
        return {LOCKSTEP_ERROR_CONFIG, e.what()};
    } catch (const ShapeError& e) {
        return {LOCKSTEP_ERROR_SHAPE, e.what()};
    } catch (const DTypeError& e) {
        return {LOCKSTEP_ERROR_DTYPE, e.what()};
    } catch (const DeviceError& e) {
        return {LOCKSTEP_ERROR_DEVICE, e.what()};
    } catch (const OutOfMemoryError& e) {
        return {LOCKSTEP_ERROR_OUT_OF_MEMORY, e.what(), true};
    } catch (const MpiError& e) {
        return {LOCKSTEP_ERROR_MPI, e.what()};
    } catch (const CudaError& e) {
        return {LOCKSTEP_ERROR_CUDA, e.what()};
    } catch (const TimeoutError& e) {
        return {LOCKSTEP_ERROR_TIMEOUT, e.what()};
    } catch (const ReadOnlyError& e) {
        return {LOCKSTEP_ERROR_READ_ONLY, e.what()};
    } catch (const UnsupportedError& e) {
        return {LOCKSTEP_ERROR_UNSUPPORTED, e.what()};
    } catch (const InvalidArgumentError& e) {
        return {LOCKSTEP_ERROR_INVALID_ARGUMENT, e.what()};
    } catch (const Error& e) {
        return {LOCKSTEP_ERROR_RUNTIME, e.what()};
    } catch (const std::bad_alloc&) {
        return {LOCKSTEP_ERROR_OUT_OF_MEMORY, "out of host memory (std::bad_alloc)", true};
    } catch (const std::exception& e) {  // std::out_of_range from an .at() too: a bug of lockstep's, not the caller's
        return {LOCKSTEP_ERROR_INTERNAL, fmt::format("internal error ({}); please report it", e.what())};
    } catch (...) {
        return {LOCKSTEP_ERROR_INTERNAL, "internal error: an exception of unknown type; please report it"};
    }
}

}  // namespace

lockstep_status_t record_current_exception(lockstep_comm_s* comm) noexcept {
    try {
        Classified c = classify_current();
        if (is_live(comm)) {
            std::scoped_lock lock(comm->error_mutex);
            comm->last_error = c.text;
        }
        last_error.status = c.status;
        last_error.out_of_memory = c.out_of_memory;
        last_error.text = std::move(c.text);
        return c.status;
    } catch (...) {  // no memory even for the text
        last_error.status = LOCKSTEP_ERROR_OUT_OF_MEMORY;
        last_error.out_of_memory = true;
        return LOCKSTEP_ERROR_OUT_OF_MEMORY;
    }
}

const char* intern_shared(std::string_view text);

void fail(lockstep_status_t status, std::string message) {
    throw StatusError(status, std::move(message));
}

void check_flags(std::uint64_t flags, std::uint64_t known, const char* where) {
    if ((flags & ~known) != 0) {
        fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
             fmt::format("{}: unknown flag bits {:#x} (this library knows {:#x}); a newer header's flags need a newer "
                         "liblockstep_c",
                         where, flags & ~known, known));
    }
}

const char* intern(std::string_view text) {
    // A caller passes the same few places again and again (a training loop's lines): a small per-thread cache of the
    // last ones answers without the lock or a hash.
    struct Recent {
        std::string text;
        const char* kept = nullptr;
    };
    thread_local std::array<Recent, 8> recent;
    thread_local std::size_t next = 0;
    for (const Recent& r : recent) {
        if (r.kept != nullptr && r.text == text) return r.kept;
    }
    const char* kept = intern_shared(text);
    recent[next] = {std::string(text), kept};
    next = (next + 1) % recent.size();
    return kept;
}

const char* intern_shared(std::string_view text) {
    static std::mutex mutex;
    static std::unordered_set<std::string>* strings = new std::unordered_set<std::string>();  // never freed
    std::scoped_lock lock(mutex);
    return strings->emplace(text).first->c_str();
}

CallSite call_site(const lockstep_call_options_t* options, const char* entry, lockstep_call_options_t* parsed) {
    static const lockstep_call_options_t defaults = LOCKSTEP_CALL_OPTIONS_INIT;
    *parsed = read_options(options, defaults, "lockstep_call_options_t");
    check_flags(parsed->flags, 0, entry);
    CallSite site;
    if (parsed->tag != nullptr) site.tag = parsed->tag;
    if (parsed->file != nullptr) {
        site.file_name = intern(parsed->file);
        site.line_number = parsed->line > 0 ? static_cast<unsigned>(parsed->line) : 0U;
        site.function_name = parsed->function != nullptr ? intern(parsed->function) : entry;
    } else {
        site.file_name = "<C caller>";
        site.line_number = 0;
        site.function_name = entry;
    }
    return site;
}

// The communicator handles alive, for lockstep_finalize, which frees their communicators while MPI still runs.
std::mutex& comm_handles_mutex() {
    static std::mutex m;
    return m;
}
// In creation order, which is the same on every process: lockstep_finalize frees them in it (MPI_Comm_free is
// collective).
std::vector<lockstep_comm_s*>& comm_handles_in_order() {
    static std::vector<lockstep_comm_s*> s;
    return s;
}

lockstep_comm_s* new_comm_handle(std::unique_ptr<Communicator> owned, bool world) {
    auto handle = std::make_unique<lockstep_comm_s>();
    handle->comm = world ? &Communicator::world() : owned.get();
    handle->owned = std::move(owned);
    handle->world = world;
    std::scoped_lock lock(comm_handles_mutex());
    auto& all = comm_handles_in_order();
    all.reserve(all.size() + 1);  // nothing fails after the insertion into the set
    live_handles_set().insert(handle.get(), HandleKind::Communicator);
    all.push_back(handle.get());
    return handle.release();
}

bool forget_comm_handle(lockstep_comm_s* handle) noexcept {
    std::scoped_lock lock(comm_handles_mutex());
    if (!live_handles_set().erase(handle, HandleKind::Communicator)) return false;
    auto& all = comm_handles_in_order();
    all.erase(std::find(all.begin(), all.end(), handle));
    return true;
}

bool is_live(const lockstep_comm_s* handle) noexcept {
    return live_handles_set().contains(handle, HandleKind::Communicator);
}

Communicator& communicator(lockstep_comm_s* handle, const char* entry, const char* argument) {
    if (!is_live(handle)) {
        if (handle == nullptr) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, fmt::format("{}: {} is NULL", entry, argument));
        fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
             fmt::format("{}: {} is not a live communicator handle (freed by lockstep_comm_free already, or never "
                         "made by lockstep)",
                         entry, argument));
    }
    if (handle->comm == nullptr) {
        fail(LOCKSTEP_ERROR_INVALID_USAGE,
             fmt::format("{}: the communicator {} was freed by lockstep_finalize; create communicators after "
                         "lockstep_init",
                         entry, argument));
    }
    return *handle->comm;
}

std::string build_info_text() {
    return fmt::format("C interface {}.{}.{} (lockstep {}, commit {}, CUDA {})", LOCKSTEP_C_VERSION_MAJOR,
                       LOCKSTEP_C_VERSION_MINOR, LOCKSTEP_C_VERSION_PATCH, LOCKSTEP_VERSION, LOCKSTEP_GIT_COMMIT,
                       cuda_built() ? "yes" : "no");
}

}  // namespace lockstep::c_api

using namespace lockstep;
using namespace lockstep::c_api;

extern "C" {

const char* lockstep_status_string(lockstep_status_t status) {
    switch (status) {
        case LOCKSTEP_OK:
            return "LOCKSTEP_OK";
        case LOCKSTEP_ERROR_SIGNATURE_MISMATCH:
            return "LOCKSTEP_ERROR_SIGNATURE_MISMATCH";
        case LOCKSTEP_ERROR_SHAPE:
            return "LOCKSTEP_ERROR_SHAPE";
        case LOCKSTEP_ERROR_DTYPE:
            return "LOCKSTEP_ERROR_DTYPE";
        case LOCKSTEP_ERROR_DEVICE:
            return "LOCKSTEP_ERROR_DEVICE";
        case LOCKSTEP_ERROR_OUT_OF_MEMORY:
            return "LOCKSTEP_ERROR_OUT_OF_MEMORY";
        case LOCKSTEP_ERROR_MPI:
            return "LOCKSTEP_ERROR_MPI";
        case LOCKSTEP_ERROR_CUDA:
            return "LOCKSTEP_ERROR_CUDA";
        case LOCKSTEP_ERROR_TIMEOUT:
            return "LOCKSTEP_ERROR_TIMEOUT";
        case LOCKSTEP_ERROR_READ_ONLY:
            return "LOCKSTEP_ERROR_READ_ONLY";
        case LOCKSTEP_ERROR_UNSUPPORTED:
            return "LOCKSTEP_ERROR_UNSUPPORTED";
        case LOCKSTEP_ERROR_VERSION:
            return "LOCKSTEP_ERROR_VERSION";
        case LOCKSTEP_ERROR_INVALID_ARGUMENT:
            return "LOCKSTEP_ERROR_INVALID_ARGUMENT";
        case LOCKSTEP_ERROR_INVALID_USAGE:
            return "LOCKSTEP_ERROR_INVALID_USAGE";
        case LOCKSTEP_ERROR_INTERNAL:
            return "LOCKSTEP_ERROR_INTERNAL";
        case LOCKSTEP_ERROR_CALL_REJECTED:
            return "LOCKSTEP_ERROR_CALL_REJECTED";
        case LOCKSTEP_ERROR_DISTRIBUTED:
            return "LOCKSTEP_ERROR_DISTRIBUTED";
        case LOCKSTEP_ERROR_CONFIG:
            return "LOCKSTEP_ERROR_CONFIG";
        case LOCKSTEP_ERROR_RUNTIME:
            return "LOCKSTEP_ERROR_RUNTIME";
        case LOCKSTEP_ERROR_CALLBACK:
            return "LOCKSTEP_ERROR_CALLBACK";
        default:
            return "LOCKSTEP_ERROR_UNKNOWN";
    }
}

const char* lockstep_last_error(void) {
    return last_error.text.c_str();
}
lockstep_status_t lockstep_last_error_status(void) {
    return last_error.status;
}
int32_t lockstep_last_error_is_out_of_memory(void) {
    return last_error.out_of_memory ? 1 : 0;
}
void lockstep_clear_last_error(void) {
    last_error.status = LOCKSTEP_OK;
    last_error.out_of_memory = false;
    last_error.text.clear();
}

int32_t lockstep_get_version(int32_t* major, int32_t* minor, int32_t* patch) {
    if (major != nullptr) *major = LOCKSTEP_C_VERSION_MAJOR;
    if (minor != nullptr) *minor = LOCKSTEP_C_VERSION_MINOR;
    if (patch != nullptr) *patch = LOCKSTEP_C_VERSION_PATCH;
    return LOCKSTEP_C_VERSION;
}

const char* lockstep_get_build_info(void) {
    static const std::string text = []() noexcept -> std::string {
        try {
            return build_info_text();
        } catch (...) {
            return "C interface (build information unavailable: out of memory)";
        }
    }();
    return text.c_str();
}

lockstep_status_t lockstep_init_versioned(int32_t header_version, const lockstep_init_options_t* options,
                                          lockstep_runtime_t* runtime) {
    return guarded(nullptr, [&] {
        const int32_t header_major = header_version / 10000;
        if (header_major != LOCKSTEP_C_VERSION_MAJOR || header_version > LOCKSTEP_C_VERSION) {
            fail(LOCKSTEP_ERROR_VERSION,
                 fmt::format("lockstep.h version {}.{}.{} does not fit liblockstep_c {}.{}.{}: the library must have "
                             "the header's major version and be at least as new; rebuild against the installed "
                             "header or install a newer library",
                             header_major, header_version / 100 % 100, header_version % 100, LOCKSTEP_C_VERSION_MAJOR,
                             LOCKSTEP_C_VERSION_MINOR, LOCKSTEP_C_VERSION_PATCH));
        }
        static const lockstep_init_options_t defaults = LOCKSTEP_INIT_OPTIONS_INIT;
        const lockstep_init_options_t o = read_options(options, defaults, "lockstep_init_options_t");
        check_flags(o.flags, 0, "lockstep_init");
        if (o.debug < -1 || o.debug > 1) {
            fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 fmt::format("lockstep_init: debug is {}; use -1 (configuration), 0 (off) or 1 (on)", o.debug));
        }
        if (o.on_timeout < -1 || o.on_timeout > LOCKSTEP_ON_TIMEOUT_RAISE) {
            fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 fmt::format("lockstep_init: on_timeout {} is not -1 (from the configuration), LOCKSTEP_ON_TIMEOUT_END "
                             "or LOCKSTEP_ON_TIMEOUT_RAISE",
                             o.on_timeout));
        }
        if (!Runtime::initialized()) {
            int finalized = 0;
            MPI_Finalized(&finalized);
            if (finalized != 0) {
                fail(LOCKSTEP_ERROR_INVALID_USAGE,
                     "lockstep_init: MPI was finalised in this process (by lockstep_finalize or MPI_Finalize) and "
                     "cannot start again; initialise lockstep once, before MPI_Finalize");
            }
        }
        RuntimeOptions ro;
        if (o.debug >= 0) ro.config.debug = o.debug == 1;
        if (o.timeout >= 0.0) ro.config.timeout = o.timeout;
        if (o.on_timeout >= 0) {
            ro.config.on_timeout = o.on_timeout == LOCKSTEP_ON_TIMEOUT_RAISE ? OnTimeout::Raise : OnTimeout::End;
        }
        if (o.config_file != nullptr) ro.config.config_file = std::string(o.config_file);
        Runtime::init(ro);
        // The world communicator now, while every process is in this collective call: its first use runs the
        // start-up checks (collective), which must not happen later on one rank only (lockstep_comm_world).
        (void)Communicator::world();
        static lockstep_runtime_s the_runtime;
        if (runtime != nullptr) *runtime = &the_runtime;
    });
}

int32_t lockstep_is_initialized(void) {
    return Runtime::initialized() ? 1 : 0;
}

lockstep_status_t lockstep_finalize(void) {
    return guarded(nullptr, [&] {
        {
            std::scoped_lock lock(comm_handles_mutex());
            for (lockstep_comm_s* h : comm_handles_in_order()) {
                h->owned.reset();  // MPI_Comm_free while MPI still runs
                h->comm = nullptr;
            }
        }
        Runtime::finalize();
    });
}

lockstep_status_t lockstep_runtime_identity(lockstep_runtime_t /*runtime*/, int32_t* rank, int32_t* size,
                                            int32_t* local_rank, int32_t* local_size) {
    return guarded(nullptr, [&] {
        if (!Runtime::initialized()) {
            fail(LOCKSTEP_ERROR_INVALID_USAGE, "lockstep_runtime_identity: call lockstep_init first");
        }
        const ProcessIdentity id = current_identity();
        if (rank != nullptr) *rank = id.rank;
        if (size != nullptr) *size = id.size;
        if (local_rank != nullptr) *local_rank = id.local_rank;
        if (local_size != nullptr) *local_size = id.local_size;
    });
}

int32_t lockstep_runtime_owns_mpi(lockstep_runtime_t /*runtime*/) {
    try {
        return Runtime::initialized() && Runtime::get().owns_mpi() ? 1 : 0;
    } catch (...) {  // finalised by another thread in between
        return 0;
    }
}

// ---------------------------------------------------------------- agreements

lockstep_status_t lockstep_set_trigger(lockstep_comm_t comm) {
    return guarded(comm, [&] { set_trigger(communicator(comm, "lockstep_set_trigger")); });
}

lockstep_status_t lockstep_check_trigger(lockstep_comm_t comm, int32_t* triggered,
                                         const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        Communicator& c = communicator(comm, "lockstep_check_trigger");
        CallSite site;
        try {
            require_out(triggered, "triggered");
            lockstep_call_options_t parsed;
            site = call_site(options, "lockstep_check_trigger", &parsed);
        } catch (...) {         // joins the trigger's allreduce as a rejection: the other ranks are in it already
            site = CallSite{};  // whole again: not relied on after the assigning call threw (see comm_c.cpp)
            site.file_name = "<C caller>";
            site.function_name = "lockstep_check_trigger";
            c.reject_call(OpKind::Allreduce, nullptr, -1, ReduceOp::Max, std::current_exception(), site);
        }
        *triggered = check_trigger(c, site) ? 1 : 0;
    });
}

namespace {
// A failure of the caller's batch function other than running out of memory, carried through the C++ search.
class CallbackFailed : public Error {
public:
    CallbackFailed(lockstep_status_t status)
        : Error(fmt::format("the batch-size function returned {}", lockstep_status_string(status))) {}
};
}  // namespace

lockstep_status_t lockstep_find_executable_batch_size(lockstep_comm_t comm, int64_t starting_batch_size,
                                                      lockstep_batch_fn fn, void* user_data,
                                                      const lockstep_batch_size_options_t* options,
                                                      int64_t* batch_size) {
    return guarded(comm, [&] {
        require(fn, "the batch function");
        require_out(batch_size, "batch_size");
        static const lockstep_batch_size_options_t defaults = LOCKSTEP_BATCH_SIZE_OPTIONS_INIT;
        const lockstep_batch_size_options_t o = read_options(options, defaults, "lockstep_batch_size_options_t");
        check_flags(o.flags, LOCKSTEP_BATCH_REFINE_UPWARD, "lockstep_find_executable_batch_size");
        BatchSizeOptions bo;
        bo.factor = o.factor;
        bo.minimum = o.minimum;
        bo.refine_upward = (o.flags & LOCKSTEP_BATCH_REFINE_UPWARD) != 0;
        Communicator& c = communicator(comm, "lockstep_find_executable_batch_size");
        try {
            const BatchSizeResult r = find_executable_batch_size(
                starting_batch_size,
                [&](std::int64_t size) {
                    const lockstep_status_t s = fn(size, user_data);
                    if (s == LOCKSTEP_OK) return;
                    if (s == LOCKSTEP_ERROR_OUT_OF_MEMORY) {
                        throw OutOfMemoryError(Device::cpu(), 0, AllocatorStats{},
                                               "the batch-size function reported running out of memory");
                    }
                    throw CallbackFailed(s);
                },
                bo, c);
            *batch_size = r.batch_size;
        } catch (const CallbackFailed& e) {
            fail(LOCKSTEP_ERROR_CALLBACK, e.what());
        }
    });
}

lockstep_status_t lockstep_free_memory(void) {
    return guarded(nullptr, [&] { free_memory(); });
}

lockstep_status_t lockstep_set_seed(uint64_t seed, int32_t device_specific) {
    return guarded(nullptr, [&] { set_seed(seed, device_specific != 0); });
}

// ---------------------------------------------------------------- logging

lockstep_status_t lockstep_log(const char* logger, lockstep_log_level_t level, lockstep_log_scope_t scope,
                               const char* message) {
    return guarded(nullptr, [&] {
        require(message, "the message");
        LogLevel l{};
        switch (level) {
            case LOCKSTEP_LOG_DEBUG:
                l = LogLevel::Debug;
                break;
            case LOCKSTEP_LOG_INFO:
                l = LogLevel::Info;
                break;
            case LOCKSTEP_LOG_WARNING:
                l = LogLevel::Warning;
                break;
            case LOCKSTEP_LOG_ERROR:
                l = LogLevel::Error;
                break;
            case LOCKSTEP_LOG_CRITICAL:
                l = LogLevel::Critical;
                break;
            default:
                fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, fmt::format("lockstep_log: unknown level {}", level));
        }
        LogOptions lo;
        switch (scope) {
            case LOCKSTEP_LOG_MAIN_PROCESS:
                lo = main_process_only;
                break;
            case LOCKSTEP_LOG_EVERY_RANK:
                lo = every_rank;
                break;
            case LOCKSTEP_LOG_IN_RANK_ORDER:
                lo = in_rank_order;
                break;
            default:
                fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, fmt::format("lockstep_log: unknown scope {}", scope));
        }
        get_logger(logger != nullptr ? logger : "lockstep.c").log(l, lo, "{}", message);
    });
}

}  // extern "C"
