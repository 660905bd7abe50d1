// The life cycle of a Communicator: creation (MPI duplicates, the watchdog's view, the agreed id), splitting and
// duplication, accessors, and freeing. The operations are in ops/, the funnel in communicator_impl.hpp, the world
// communicator's bootstrap in world.cpp.

#include "communicator_impl.hpp"
#include "rank_groups.hpp"
#include "recorder/dump.hpp"
#include "wait_statistics.hpp"
#include "watchdog/report.hpp"

#include <lockstep/build_config.hpp>
#include <lockstep/config.hpp>
#include <lockstep/logging.hpp>

#include <fmt/ranges.h>

namespace lockstep {

namespace {

// What every process of a communicator must agree on before its first call, because it changes the protocol: debug
// mode adds an exchange to every collective, the timeout decides when a wait is a hang, and the signature's size
// tells apart builds of lockstep whose records would not compare.
struct SettingsRecord {
    std::uint64_t signature_bytes;
    double timeout;
    std::uint8_t debug;
    std::uint8_t unused[7];
    detail::FixedText<64> debug_source;
    detail::FixedText<64> timeout_source;
    detail::FixedText<32> version;
};

std::string source_of(const Config& cfg, const char* key, bool explicit_option) {
    if (explicit_option) return "CommunicatorOptions";
    const auto it = cfg.sources.find(key);
    return it == cfg.sources.end() ? "default" : it->second;
}

SettingsRecord settings_record(const CommunicatorOptions& options, bool debug, double timeout) {
    const Config& cfg = config();
    SettingsRecord r{};
    r.signature_bytes = sizeof(detail::WireSignature);
    r.timeout = timeout;
    r.debug = debug ? 1 : 0;
    r.debug_source.assign(source_of(cfg, "debug", options.debug.has_value()), /*keep_end=*/true);
    r.timeout_source.assign(source_of(cfg, "timeout", options.timeout.has_value()), /*keep_end=*/true);
    r.version.assign(LOCKSTEP_VERSION);
    return r;
}

// What each process contributes when it joins a communicator: its watchdog endpoint and its settings.
struct JoinRecord {
    detail::Endpoint endpoint;
    SettingsRecord settings;
    detail::ShmJoin shm;
};

// Every process compares the same records, so either all go on or all throw the same ConfigError.
void check_settings_agree(const std::vector<JoinRecord>& all) {
    std::string differences;
    const auto compare = [&](std::string_view what, auto&& value) {
        std::vector<std::string> values;
        for (const auto& j : all) values.push_back(value(j.settings));
        if (std::any_of(values.begin(), values.end(), [&](const auto& v) { return v != values.front(); })) {
            differences += fmt::format("{}:\n{}", what, detail::grouped_by_value(values));
        }
    };
    compare("Debug mode (LOCKSTEP_DEBUG_MODE)", [](const SettingsRecord& r) {
        return fmt::format("{} ({})", r.debug != 0 ? "on" : "off", r.debug_source.str());
    });
    compare("Watchdog timeout (LOCKSTEP_TIMEOUT)", [](const SettingsRecord& r) {
        return fmt::format("{} ({})", r.timeout > 0 ? fmt::format("{:g} s", r.timeout) : "off", r.timeout_source.str());
    });
    compare("lockstep build", [](const SettingsRecord& r) {
        return fmt::format("{} (signature of {} bytes)", r.version.str(), r.signature_bytes);
    });
    if (differences.empty()) return;
    throw ConfigError("the processes of a communicator",
                      fmt::format("they disagree on settings that every process must share, so their collectives "
                                  "could not match:\n{}Give every process the same settings: `lockstep launch` "
                                  "forwards LOCKSTEP_* variables to every rank (with mpirun, use -x VARIABLE), and "
                                  "every rank must run the same lockstep build.",
                                  differences));
}

// The most entries a communicator's ring may have (as the setting trace_calls takes).
constexpr std::size_t max_trace_calls = std::size_t{1} << 20;

// The next communicator id this process would give; a new communicator takes the largest over its members.
std::uint64_t& communicator_counter() {
    static std::uint64_t counter = 0;
    return counter;
}
}  // namespace

Communicator::Impl::Impl(MPI_Comm base, const CommunicatorOptions& options) {
    const Config& cfg = config();
    debug = options.debug.value_or(cfg.debug);
    timeout = options.timeout.value_or(cfg.timeout);
    const std::size_t trace_calls = options.trace_calls.value_or(cfg.trace_calls);
    if (trace_calls > max_trace_calls) {
        throw InvalidArgumentError(
            fmt::format("CommunicatorOptions::trace_calls {} is more than {} calls per communicator", trace_calls,
                        max_trace_calls));
    }
    tsc = detail::ticks_are_tsc();
    LOCKSTEP_MPI_CHECK(MPI_Query_thread(&thread_level));
    // A progress thread calls MPI while the program's threads do: only with MPI_THREAD_MULTIPLE.
    progress_thread = options.progress_thread.value_or(cfg.progress_thread) && thread_level == MPI_THREAD_MULTIPLE;
    // Raise mode runs the collectives on the progress thread: refused without one (before any MPI call, so that every
    // process, given the same settings, refuses alike).
    raising = options.on_timeout.value_or(cfg.on_timeout) == OnTimeout::Raise && timeout > 0.0;
    if (raising && !progress_thread) {
        throw ConfigError(
            source_of(cfg, "on_timeout", options.on_timeout.has_value()),
            fmt::format("on_timeout 'raise' needs the communicator's progress thread, and it has none "
                        "({}); use on_timeout 'end', or run with MPI_THREAD_MULTIPLE "
                        "(LOCKSTEP_MPI_THREAD_LEVEL=multiple) and progress_thread on",
                        thread_level != MPI_THREAD_MULTIPLE ? "MPI gives a thread level below MPI_THREAD_MULTIPLE"
                                                            : "progress_thread is off"));
    }
    LOCKSTEP_MPI_CHECK(MPI_Comm_dup(base, &comm));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    LOCKSTEP_MPI_CHECK(MPI_Comm_dup(comm, &control));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN));
    LOCKSTEP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    LOCKSTEP_MPI_CHECK(MPI_Comm_size(comm, &size));
    // One exchange checks the settings that must agree, sets up the watchdog's view of this communicator and agrees
    // on its id.
    auto& watchdog = detail::Watchdog::instance();
    watchdog.ensure_started(thread_level);
    JoinRecord mine{watchdog.endpoint(), settings_record(options, debug, timeout),
                    detail::prepare_shm_join(options.shared_memory.value_or(true))};
    mine.endpoint.next_comm_id = communicator_counter();
    std::vector<JoinRecord> joined;
    try {
        LOCKSTEP_MPI_CHECK(detail::allgather_fixed(mine, joined, control, size));
        check_settings_agree(joined);
        std::vector<detail::ShmJoin> shm_joins;
        for (const auto& j : joined) shm_joins.push_back(j.shm);
        shm = detail::ShmGroup::create(comm, rank, shm_joins, &mpi_calls);
    } catch (...) {
        MPI_Comm_free(&control);
        MPI_Comm_free(&comm);
        throw;
    }
    std::vector<detail::Endpoint> members;
    for (const auto& j : joined) {
        members.push_back(j.endpoint);
        id = std::max(id, j.endpoint.next_comm_id);
        world_ranks.push_back(j.endpoint.world_rank);
    }
    communicator_counter() = id + 1;
    detail::set_recorded_process(world_ranks[static_cast<std::size_t>(rank)], mine.endpoint.host.str());
    recorded =
        detail::record_communicator(id, fmt::format("communicator {}", id), size, rank, world_ranks, trace_calls);
    if (recorded != nullptr) ring = &recorded->calls;
    detail::TimeoutAction on_timed_out;
    if (raising) on_timed_out = [this](const std::string& report) { timed_out(report); };
    const detail::Boards boards =
        watchdog.register_communicator(id, std::move(members), timeout, std::move(on_timed_out));
    if (timeout > 0.0) {
        board = boards.collectives;
        p2p_board = boards.point_to_point;
        if (shm != nullptr) shm->watched = true;
    }
    detail::attach_wait_counter(&wait_ticks);
}

Communicator::Impl::~Impl() {
    if (async != nullptr) {
        async->shutdown();  // runs what is queued (every rank's queue holds the same collectives), joins the thread
        async.reset();
    }
    detail::retire_unsettled(id, fmt::format("a communicator (id {}) was freed", id));
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        if (control != MPI_COMM_NULL) MPI_Comm_free(&control);
        if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
    detail::Watchdog::instance().forget_communicator(id);
    detail::detach_wait_counter(&wait_ticks);
    detail::retire_recorded(recorded);
}

detail::AsyncQueue& Communicator::Impl::queue() {
    if (async == nullptr) {
        // The queue's view shares this Impl without owning it; the queue goes first (in ~Impl).
        async = std::make_unique<detail::AsyncQueue>(
            Communicator(std::unique_ptr<Impl>(this)), [](Communicator& view) { (void)view.impl_.release(); },
            progress_thread, /*caller_runs=*/!raising);
    }
    return *async;
}

// The watchdog found a collective of this communicator stuck past its timeout, in raise mode: the waiting calls (the
// one on the progress thread and those queued behind it) fail with a TimeoutError that carries the report, and the
// communicator is broken from now on. The stuck MPI call stays on the progress thread: MPI cannot cancel it.
void Communicator::Impl::timed_out(const std::string& report) {
    // The report's first line and the line that names the call ("Operation: `lockstep::allreduce` #2 ...").
    std::string headline = report.substr(0, report.find('\n'));
    if (const auto at = report.find("\nOperation: "); at != std::string::npos) {
        headline += "; " + report.substr(at + 1, report.find('\n', at + 1) - at - 1);
    }
    {
        std::scoped_lock lock(broken_mutex);
        broken_headline = headline;
    }
    broken.store(true, std::memory_order_release);
    get_logger("lockstep.watchdog")
        .error(every_rank, "{}; the calls waiting on this communicator (id {}) raise a TimeoutError (on_timeout raise)",
               headline, id);
    const auto error = std::make_exception_ptr(TimeoutError(
        fmt::format("{}\nThis communicator can no longer be used (on_timeout raise): MPI cannot cancel the call, which "
                    "stays pending on the communicator's progress thread. Free the communicator and go on with "
                    "others (e.g. the world's), or end the process.",
                    report)));
    if (async != nullptr) async->fail(error);
}

void Communicator::Impl::throw_broken() const {
    std::string headline;
    {
        std::scoped_lock lock(broken_mutex);
        headline = broken_headline;
    }
    throw TimeoutError(fmt::format(
        "this communicator (id {}) timed out earlier and can no longer be used (on_timeout raise): {}\nMPI cannot "
        "cancel the call that timed out; free this communicator and go on with another one (e.g. the world's), or end "
        "the process.",
        id, headline));
}

thread_local const Communicator::Impl* Communicator::Impl::blocking_via_queue = nullptr;

std::shared_ptr<detail::WorkState> Communicator::Impl::new_work(const detail::CallInfo& call) {
    const bool blocking_caller = std::exchange(blocking_via_queue, nullptr) == this;
    check_usable();
    auto w = std::make_shared<detail::WorkState>();
    w->blocking_caller = blocking_caller;
    w->id = detail::next_work_id();
    w->record = detail::board_record(call, 0);
    w->record.comm_id = id;
    w->record.timeout = timeout;
    w->issued = std::chrono::steady_clock::now();
    w->issued_ticks = detail::ticks(tsc);
    w->debug = debug;
    w->step = step;
    if (recorded != nullptr) {
        w->recorded = recorded;
        if (const bool send = call.op == OpKind::Send; send || call.op == OpKind::Recv) {
            // A send or receive: its entry now, in the shared ring (its completion and wait come as updates).
            std::uint64_t number = 0;
            detail::RecordWord* entry = recorded->shared.open_shared(number);
            detail::write_call(entry, call, number + 1, w->issued_ticks, step,
                               send ? detail::RecordedKind::send : detail::RecordedKind::recv, true);
            detail::put_word(entry, offsetof(detail::RecordedCall, payload), w->issued_ticks);
            detail::CallRing::close(entry);
            w->recorded_sequence = number + 1;
        }
    }
    return w;
}

Work Communicator::Impl::submit(const detail::CallInfo& call,
                                std::function<void(Communicator&, detail::WorkState&)> body) {
    auto w = new_work(call);
    w->body = std::move(body);
    detail::register_work(w);
    Work handle(w);
    queue().submit(std::move(w));
    return handle;
}

void Communicator::Impl::exchange_and_check(const detail::WireSignature& mine, const std::exception_ptr& error,
                                            bool foreign) {
    ++signature_checks;
    // On a node, through the arena's small-message path (shm_group.hpp): when every process's key is the same, the
    // signatures agree and no process reads another's.
    std::optional<bool> agreed;
    if (detail::ShmGroup* group = shm_for(0); group != nullptr) {
        exchanged.resize(static_cast<std::size_t>(size));
        agreed = group->exchange_record(&mine, sizeof mine, detail::agreement_key(mine), exchanged.data(), foreign);
        if (agreed == true) return;
    }
    if (!agreed) mpi(detail::allgather_fixed(mine, exchanged, control, size), "MPI_Allgather");
    if (detail::wire_signatures_agree(exchanged)) return;
    std::vector<Signature> sigs;
    sigs.reserve(exchanged.size());
    for (const auto& w : exchanged) sigs.push_back(detail::decode_signature(w));
    // A sub-communicator's process numbers are not the job's: say which world ranks they are.
    std::string world_note;
    for (std::size_t r = 0; r < world_ranks.size(); ++r) {
        if (world_ranks[r] != static_cast<int>(r)) {
            std::vector<std::string> pairs;
            for (std::size_t q = 0; q < world_ranks.size(); ++q)
                pairs.push_back(fmt::format("{}={}", q, world_ranks[q]));
            world_note = fmt::format("World ranks of this communicator's processes: {}\n", fmt::join(pairs, ", "));
            break;
        }
    }
    if (auto report = detail::rejected_report(sigs)) {
        *report += world_note;
        get_logger("lockstep.debug").error("{}", *report);  // the main process logs it; every rank throws it
        detail::throw_shared_failure(sigs, *report, error);
        *report += detail::collective_error_trace(id, mine.sequence);  // not for an error every process shared
        std::vector<CallRejectedError::Failure> failures;
        for (std::size_t r = 0; r < sigs.size(); ++r) {
            if (!sigs[r].failure_type.empty())
                failures.push_back({static_cast<int>(r), sigs[r].failure_type, sigs[r].failure});
        }
        throw CallRejectedError(std::move(*report), std::move(failures));
    }
    if (auto report = check_signatures(sigs)) {
        *report += world_note + detail::collective_error_trace(id, mine.sequence);
        get_logger("lockstep.debug").error("{}", *report);  // the main process logs it; every rank throws it
        throw SignatureMismatchError(std::move(*report), std::move(sigs));
    }
}

Communicator::Communicator(MPI_Comm comm, CommunicatorOptions options) : impl_(std::make_unique<Impl>(comm, options)) {}
Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
// A communicator broken by a timeout (on_timeout raise) is abandoned, not freed: its progress thread is still inside
// the MPI call that timed out, on this Impl, its queue and its MPI communicators, and would use them if that call ever
// returned; freeing the MPI communicators could wait for it too.
Communicator::~Communicator() {
    if (impl_ != nullptr && impl_->broken.load(std::memory_order_acquire)) (void)impl_.release();
}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&& other) noexcept {
    if (this != &other) {
        Communicator old(std::move(*this));
        impl_ = std::move(other.impl_);
    }
    return *this;
}

int Communicator::rank() const noexcept {
    return impl_->rank;
}
int Communicator::size() const noexcept {
    return impl_->size;
}
MPI_Comm Communicator::mpi_comm() const noexcept {
    return impl_->comm;
}
bool Communicator::debug() const noexcept {
    return impl_->debug;
}
double Communicator::timeout() const noexcept {
    return impl_->timeout;
}
void Communicator::set_step(std::uint64_t step) noexcept {
    impl_->step = step;
}
std::uint64_t Communicator::step() const noexcept {
    return impl_->step;
}
void Communicator::set_debug(bool on) noexcept {
    impl_->debug = on;
}
CommunicatorStats Communicator::stats() const noexcept {
    CommunicatorStats s;
    s.collectives = impl_->collectives;
    s.signature_checks = impl_->signature_checks;
    s.mpi_calls = impl_->mpi_calls;
    s.wait_seconds = detail::ticks_to_seconds(impl_->wait_ticks.load(std::memory_order_relaxed));
    if (impl_->shm != nullptr) {
        s.shm_calls = impl_->shm->calls;
        s.hierarchical_calls = impl_->shm->hierarchical_calls;
        s.small_calls = impl_->shm->small_calls;
        s.shm_exchanges = impl_->shm->exchanges;
    }
    return s;
}

void Communicator::set_shared_memory(bool on) noexcept {
    if (impl_->shm != nullptr) impl_->shm->enabled = on;
}
bool Communicator::shared_memory() const noexcept {
    return impl_->shm != nullptr && impl_->shm->enabled;
}

OnTimeout Communicator::on_timeout() const noexcept {
    return impl_->raising ? OnTimeout::Raise : OnTimeout::End;
}

bool Communicator::timed_out() const noexcept {
    return impl_->broken.load(std::memory_order_acquire);
}

namespace {
// What a new communicator made from `parent` gets: `given`, and the parent's settings where it leaves them unset.
CommunicatorOptions inherited_options(const Communicator& parent, std::optional<bool> shared_memory,
                                      const CommunicatorOptions& given) {
    CommunicatorOptions o = given;
    if (!o.debug) o.debug = parent.debug();
    if (!o.timeout) o.timeout = parent.timeout();
    if (!o.shared_memory) o.shared_memory = shared_memory;
    if (!o.on_timeout) o.on_timeout = parent.on_timeout();
    return o;
}
}  // namespace

Communicator Communicator::split(int color, int key, const CommunicatorOptions& options) const {
    if (color < 0) {
        throw InvalidArgumentError(fmt::format("split: color {} must be >= 0 (every rank joins one sub-group)", color));
    }
    impl_->check_usable();
    impl_->drain();
    const CommunicatorOptions made_options = inherited_options(*this, impl_->inherited_shared_memory(), options);
    MPI_Comm part = MPI_COMM_NULL;
    LOCKSTEP_MPI_CHECK(MPI_Comm_split(impl_->comm, color, key, &part));
    std::unique_ptr<Impl> impl;
    try {
        impl = std::make_unique<Impl>(part, made_options);
    } catch (...) {
        MPI_Comm_free(&part);
        throw;
    }
    LOCKSTEP_MPI_CHECK(MPI_Comm_free(&part));
    return Communicator(std::move(impl));
}

Communicator Communicator::dup(const CommunicatorOptions& options) const {
    impl_->check_usable();
    impl_->drain();
    return Communicator(
        std::make_unique<Impl>(impl_->comm, inherited_options(*this, impl_->inherited_shared_memory(), options)));
}

Communicator Communicator::create_group(std::span<const int> ranks, int tag, const CommunicatorOptions& given) const {
    std::vector<bool> seen(static_cast<std::size_t>(impl_->size), false);
    bool member = false;
    for (const int r : ranks) {
        if (r < 0 || r >= impl_->size) {
            throw InvalidArgumentError(fmt::format("create_group: rank {} is not a rank of this communicator of {}", r,
                                                   detail::count_text(impl_->size, "process", "processes")));
        }
        if (seen[static_cast<std::size_t>(r)]) {
            throw InvalidArgumentError(
                fmt::format("create_group: rank {} is listed twice in [{}]", r, fmt::join(ranks, ", ")));
        }
        seen[static_cast<std::size_t>(r)] = true;
        member = member || r == impl_->rank;
    }
    if (!member) {
        throw InvalidArgumentError(fmt::format(
            "create_group: process {} is not in [{}]; only the listed processes call create_group (the others "
            "skip it)",
            impl_->rank, fmt::join(ranks, ", ")));
    }
    if (tag < 0) throw InvalidArgumentError(fmt::format("create_group: tag {} must be >= 0", tag));
    impl_->check_usable();
    impl_->drain();
    MPI_Group all = MPI_GROUP_NULL;
    MPI_Group part = MPI_GROUP_NULL;
    MPI_Comm made = MPI_COMM_NULL;
    LOCKSTEP_MPI_CHECK(MPI_Comm_group(impl_->control, &all));
    const int rc_incl = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(), &part);
    MPI_Group_free(&all);
    detail::check_mpi(rc_incl, "MPI_Group_incl");
    // On the control communicator: its collective traffic never meets the program's sends and receives, which use
    // the payload communicator with tags of their own.
    const int rc_create = MPI_Comm_create_group(impl_->control, part, tag, &made);
    MPI_Group_free(&part);
    detail::check_mpi(rc_create, "MPI_Comm_create_group");
    const CommunicatorOptions options = inherited_options(*this, impl_->inherited_shared_memory(), given);
    std::unique_ptr<Impl> impl;
    try {
        impl = std::make_unique<Impl>(made, options);
    } catch (...) {
        MPI_Comm_free(&made);
        throw;
    }
    LOCKSTEP_MPI_CHECK(MPI_Comm_free(&made));
    return Communicator(std::move(impl));
}

void Communicator::reject_call(OpKind op, const Tensor* input, int root, std::optional<ReduceOp> reduce_op,
                               std::exception_ptr error, CallSite site) {
    if (impl_->via_queue()) {
        ireject_call(op, input, root, reduce_op, error, site).wait();
        std::rethrow_exception(error);
    }
    impl_->run(
        {.op = op, .input = input, .root = root, .reduce_op = reduce_op, .site = site},
        [&] { std::rethrow_exception(error); }, [] {});
    std::rethrow_exception(error);  // not reached: the failure above ends the call on every path
}

std::size_t Communicator::outstanding() const noexcept {
    return impl_->async != nullptr ? impl_->async->outstanding() : 0;
}

bool Communicator::progress_thread() const noexcept {
    return impl_->progress_thread;
}

std::optional<std::string> Communicator::async_error() const {
    return detail::watchdog_verdict();
}

}  // namespace lockstep
