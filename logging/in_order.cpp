// In-order records: every rank's record of one call, in rank order, as one block written by rank 0.
//
// Algorithm: each rank encodes its record (nothing at all when its own level filters the record) and the encodings are
// gathered to rank 0 of the logging communicator, MPI_Gather of their lengths and then MPI_Gatherv of their bytes.
// Rank 0 decodes them in rank order and writes them as one block. That is two collectives per call whatever the
// number of ranks, where taking turns costs one barrier per rank; and the order is made by one writer, not by the
// timing of N pipes merged by the launcher. Every rank joins the gather whatever its level, so ranks that disagree
// about the level still all meet.
//
// The logging communicator is a duplicate of the Runtime's (or, without a Runtime, of MPI_COMM_WORLD), so that its
// messages never match anyone else's. It is cached as an attribute of the communicator whose lifetime bounds it: the
// Runtime's own, which Runtime::finalize frees, or MPI_COMM_SELF for the world, whose attributes MPI_Finalize deletes
// first, while MPI still works. The attribute's delete callback frees the duplicate.
//
// The gather is collective over the job but is not a Communicator collective: logging sits below collectives (which
// report through it), so it has no debug-mode signature and no watchdog board. What protects it instead: its own
// communicator (its messages never match a collective's), every rank joining whatever its level, and a time limit on
// each of its two steps (the runtime's timeout, the watchdog's, 600 s by default; 0: none). The steps are
// nonblocking and polled, and a rank still waiting at the limit (rank 0, when another rank skipped the call) raises a
// TimeoutError naming the record, instead of waiting silently; its later in-order records are then written at once,
// not in rank order, since the abandoned gather can never be matched again.

#include "emission.hpp"

#include <lockstep/errors.hpp>
#include <lockstep/runtime.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

namespace lockstep {

namespace {

// Encoding of one record; the ranks of a job share one byte order. The header is followed by the logger name, the
// host name and the message, without terminators.
struct WireHeader {
    std::int64_t time_ns;  // since the system_clock epoch
    std::int32_t level;
    std::int32_t rank;
    std::int32_t size;
    std::uint32_t logger_bytes;
    std::uint32_t host_bytes;
    std::uint32_t message_bytes;
};

// A bound on one message, so that the sum of all ranks' encodings fits the int counts of MPI_Gatherv.
std::size_t max_message_bytes(int ranks) {
    constexpr std::size_t one_mebibyte = std::size_t{1} << 20;
    return std::min(one_mebibyte, static_cast<std::size_t>(INT_MAX) / (4 * static_cast<std::size_t>(ranks)));
}

std::string encode(const LogRecord& record, std::size_t max_message) {
    std::string message = record.message;
    if (message.size() > max_message) {
        const std::size_t full = message.size();
        message.resize(max_message);
        message += fmt::format(" [in-order record truncated from {} bytes]", full);
    }
    const std::string_view host = std::string_view(record.host).substr(0, 1024);
    const std::string_view logger = std::string_view(record.logger).substr(0, 1024);
    WireHeader header{};
    header.time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(record.time.time_since_epoch()).count();
    header.level = static_cast<std::int32_t>(record.level);
    header.rank = record.rank;
    header.size = record.size;
    header.logger_bytes = static_cast<std::uint32_t>(logger.size());
    header.host_bytes = static_cast<std::uint32_t>(host.size());
    header.message_bytes = static_cast<std::uint32_t>(message.size());
    std::string bytes(sizeof header, '\0');
    std::memcpy(bytes.data(), &header, sizeof header);
    bytes.append(logger).append(host).append(message);
    return bytes;
}

LogRecord decode(std::span<const char> bytes, int from_rank) {
    WireHeader header{};
    const auto malformed = [&] {
        return Error(fmt::format("lockstep logging: the in-order record from rank {} is malformed ({} bytes)",
                                 from_rank, bytes.size()));
    };
    if (bytes.size() < sizeof header) throw malformed();
    std::memcpy(&header, bytes.data(), sizeof header);
    const std::size_t text_bytes =
        std::size_t{header.logger_bytes} + std::size_t{header.host_bytes} + std::size_t{header.message_bytes};
    if (bytes.size() != sizeof header + text_bytes || header.level < static_cast<std::int32_t>(LogLevel::Debug) ||
        header.level > static_cast<std::int32_t>(LogLevel::Critical)) {
        throw malformed();
    }
    const char* text = bytes.data() + sizeof header;
    LogRecord record;
    record.time = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(header.time_ns)));
    record.level = static_cast<LogLevel>(header.level);
    record.rank = header.rank;
    record.size = header.size;
    record.logger.assign(text, header.logger_bytes);
    record.host.assign(text + header.logger_bytes, header.host_bytes);
    record.message.assign(text + header.logger_bytes + header.host_bytes, header.message_bytes);
    return record;
}

MPI_Fint to_attribute(MPI_Comm comm) {
    return MPI_Comm_c2f(comm);
}
MPI_Comm from_attribute(void* value) {
    return MPI_Comm_f2c(static_cast<MPI_Fint>(reinterpret_cast<std::intptr_t>(value)));
}

// Called by MPI when the anchor communicator is freed (or MPI_COMM_SELF at MPI_Finalize).
int free_logging_communicator(MPI_Comm /*anchor*/, int /*keyval*/, void* value, void* /*extra_state*/) {
    MPI_Comm logging = from_attribute(value);
    return MPI_Comm_free(&logging);
}

// One in-order call's gather: the request and every buffer MPI reads or writes until it completes.
struct Gather {
    MPI_Request request = MPI_REQUEST_NULL;
    int length = 0;
    std::string payload;
    std::vector<int> lengths;
    std::vector<int> offsets;
    std::vector<char> gathered;
};

struct InOrderState {
    std::mutex
        mutex;  // one in-order call at a time per process: its two collectives must not interleave with another's
    int keyval = MPI_KEYVAL_INVALID;
    std::uint64_t calls = 0;  // in-order calls made by this process, to name one in an error
    bool abandoned = false;   // a gather timed out: the logging communicator can no longer be used
    // A gather that timed out can be neither cancelled (a collective) nor completed (a rank is missing): it stays here
    // with its buffers, which a late rank's data may still reach, for the life of the process.
    std::vector<std::unique_ptr<Gather>> abandoned_gathers;
};
InOrderState& in_order_state() {
    // Never destroyed: an abandoned gather's buffers must outlive every MPI call, exit included.
    static InOrderState& state = *new InOrderState;
    return state;
}

// Called by MPI at MPI_Finalize (the attribute lives on MPI_COMM_SELF): frees the logging keyval, so that MPI does not
// keep it (and LeakSanitizer does not report it) after the job. MPI frees a key only once no communicator still
// holds an attribute under it.
int free_logging_keyval(MPI_Comm /*self*/, int /*keyval*/, void* /*value*/, void* /*extra_state*/) {
    auto& state = in_order_state();
    if (state.keyval == MPI_KEYVAL_INVALID) return MPI_SUCCESS;
    return MPI_Comm_free_keyval(&state.keyval);
}

// Creates the logging keyval and arranges for its release at MPI_Finalize through a second key on MPI_COMM_SELF,
// which is marked freed at once (MPI keeps it until MPI_COMM_SELF's attributes are deleted).
void create_logging_keyval(InOrderState& state) {
    LOCKSTEP_MPI_CHECK(
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_logging_communicator, &state.keyval, nullptr));
    int cleanup = MPI_KEYVAL_INVALID;
    LOCKSTEP_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_logging_keyval, &cleanup, nullptr));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, cleanup, nullptr));
    LOCKSTEP_MPI_CHECK(MPI_Comm_free_keyval(&cleanup));
}

// The logging communicator, or MPI_COMM_NULL when MPI is not running. Called with the state's mutex held; collective
// over the base communicator the first time (MPI_Comm_dup), which every rank reaches because every rank makes the
// in-order call.
MPI_Comm logging_communicator(InOrderState& state) {
    int initialized = 0;
    int finalized = 0;
    LOCKSTEP_MPI_CHECK(MPI_Initialized(&initialized));
    LOCKSTEP_MPI_CHECK(MPI_Finalized(&finalized));
    if (initialized == 0 || finalized != 0) return MPI_COMM_NULL;

    const MPI_Comm base = Runtime::initialized() ? Runtime::get().comm() : MPI_COMM_WORLD;
    const MPI_Comm anchor = base == MPI_COMM_WORLD ? MPI_COMM_SELF : base;
    if (state.keyval == MPI_KEYVAL_INVALID) create_logging_keyval(state);
    void* value = nullptr;
    int found = 0;
    LOCKSTEP_MPI_CHECK(MPI_Comm_get_attr(anchor, state.keyval, &value, &found));
    if (found != 0) return from_attribute(value);

    MPI_Comm logging = MPI_COMM_NULL;
    LOCKSTEP_MPI_CHECK(MPI_Comm_dup(base, &logging));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(logging, MPI_ERRORS_RETURN));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_name(logging, "lockstep logging"));
    const auto attribute = reinterpret_cast<void*>(static_cast<std::intptr_t>(to_attribute(logging)));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_attr(anchor, state.keyval, attribute));
    return logging;
}

void emit_locally(const std::string& logger, LogLevel level, std::optional<std::string> message, const char* why) {
    std::optional<LogRecord> record;
    if (message) record = detail::local_record(level, logger, std::move(*message));
    if (record && record->size > 1) get_logger("lockstep.logging").warning_once("{}", why);
    if (record) {
        auto block = std::make_shared<LogBlock>();
        block->push_back(std::move(*record));
        detail::push_log_block(std::move(block), log_route::console | log_route::rank_file);
    }
}

constexpr const char* without_mpi =
    "in-order records need MPI, which is not running (the runtime is not initialised yet, or MPI has been "
    "finalised): each rank writes its own in-order records at once, and they are not in rank order";
constexpr const char* after_timeout =
    "an in-order record timed out waiting for the other ranks (see the error above): each rank now writes its own "
    "in-order records at once, and they are not in rank order";

// The limit on each step of the gather: the runtime's collective timeout, or the default one without a runtime.
double gather_timeout() {
    return Runtime::initialized() ? Runtime::get().config().timeout : Config{}.timeout;
}

// What an error says about the call that waited.
struct CallDescription {
    std::uint64_t number;
    const std::string& logger;
    LogLevel level;
    const std::optional<LogRecord>& own;
};

// Waits for one step of the gather, polling, until the limit; at the limit marks the state abandoned and throws.
void wait_for(MPI_Request& request, InOrderState& state, double timeout, const CallDescription& call) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    auto pause = std::chrono::microseconds(10);
    for (;;) {
        int done = 0;
        LOCKSTEP_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        if (done != 0) return;
        const double waited = std::chrono::duration<double>(clock::now() - start).count();
        if (timeout > 0 && waited >= timeout) break;
        // The first millisecond polls as a blocking call would (a record's usual wait is a few microseconds); after
        // it, sleeps growing to a millisecond keep a long wait cheap.
        if (waited < 1e-3) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(1000));
        }
    }
    state.abandoned = true;
    std::string what = call.own ? fmt::format("\"{}\"", call.own->message.substr(0, 120)) : "filtered on this rank";
    throw TimeoutError(fmt::format(
        "lockstep logging: in-order record {} of this process (logger '{}', {}: {}) waited {} s for the other ranks of "
        "the job. Every rank must make every in-order call, in the same order, even one its level filters out: a rank "
        "that skipped this call, or is stuck elsewhere, keeps the others here (this gather is not a collective of a "
        "Communicator, so the watchdog does not report it). Later in-order records of this process are written at "
        "once, not in rank order.",
        call.number, call.logger, log_level_name(call.level), what, timeout));
}

}  // namespace

void Logger::emit_in_order(LogLevel level, std::optional<std::string> message) const {
    auto& state = in_order_state();
    std::unique_lock lock(state.mutex);
    const MPI_Comm comm = logging_communicator(state);
    if (comm == MPI_COMM_NULL || state.abandoned) {
        const char* why = comm == MPI_COMM_NULL ? without_mpi : after_timeout;
        lock.unlock();
        emit_locally(name(), level, std::move(message), why);
        return;
    }
    const std::uint64_t number = ++state.calls;
    const double timeout = gather_timeout();
    int rank = 0;
    int size = 1;
    LOCKSTEP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    LOCKSTEP_MPI_CHECK(MPI_Comm_size(comm, &size));

    std::optional<LogRecord> own;
    std::string payload;
    if (message) {
        own = detail::local_record(level, name(), std::move(*message));
        own->rank = rank;  // the communicator's numbering is the order of the block
        own->size = size;
        payload = encode(*own, max_message_bytes(size));
    }

    constexpr int writer = 0;
    auto gather = std::make_unique<Gather>();
    gather->payload = std::move(payload);
    gather->length = static_cast<int>(gather->payload.size());
    gather->lengths.resize(rank == writer ? static_cast<std::size_t>(size) : 0);
    const CallDescription call{number, name(), level, own};
    const auto wait = [&] {
        try {
            wait_for(gather->request, state, timeout, call);
        } catch (const TimeoutError&) {
            state.abandoned_gathers.push_back(std::move(gather));
            throw;
        }
    };
    LOCKSTEP_MPI_CHECK(
        MPI_Igather(&gather->length, 1, MPI_INT, gather->lengths.data(), 1, MPI_INT, writer, comm, &gather->request));
    wait();
    std::vector<int>& lengths = gather->lengths;
    std::vector<int>& offsets = gather->offsets;
    std::vector<char>& gathered = gather->gathered;
    offsets.resize(lengths.size());
    if (rank == writer) {
        std::size_t total = 0;
        for (std::size_t r = 0; r < lengths.size(); ++r) {
            offsets[r] = static_cast<int>(total);
            total += static_cast<std::size_t>(lengths[r]);
        }
        gathered.resize(total);
    }
    LOCKSTEP_MPI_CHECK(MPI_Igatherv(gather->payload.data(), gather->length, MPI_BYTE, gathered.data(), lengths.data(),
                                    offsets.data(), MPI_BYTE, writer, comm, &gather->request));
    wait();
    lock.unlock();

    if (rank == writer) {
        auto block = std::make_shared<LogBlock>();
        for (std::size_t r = 0; r < lengths.size(); ++r) {
            if (lengths[r] == 0) continue;
            block->push_back(
                decode(std::span<const char>(gathered.data() + offsets[r], lengths[r]), static_cast<int>(r)));
        }
        if (!block->empty()) detail::push_log_block(std::move(block), log_route::console);
    }
    if (own && detail::rank_files_enabled()) {
        auto block = std::make_shared<LogBlock>();
        block->push_back(std::move(*own));
        detail::push_log_block(std::move(block), log_route::rank_file);
    }
}

}  // namespace lockstep
