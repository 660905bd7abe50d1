#include "rank_groups.hpp"
#include "wire_signature.hpp"

#include <lockstep/allocator.hpp>
#include <lockstep/signature.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <span>

namespace lockstep {

namespace {
std::uint64_t dims_hash(std::span<const std::int64_t> shape, int skip_dim) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    auto mix = [&](std::uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= 0x100000001b3ULL;
        }
    };
    mix(shape.size());
    for (std::size_t d = 0; d < shape.size(); ++d) {
        mix(static_cast<int>(d) == skip_dim ? ~std::uint64_t{0} : static_cast<std::uint64_t>(shape[d]));
    }
    return h;
}
}  // namespace

std::uint64_t shape_hash(const Shape& shape, int skip_dim) {
    return dims_hash(shape, skip_dim);
}

std::string Signature::shape_text() const {
    if (static_cast<std::size_t>(rank_of_shape) <= shape.size()) return shape_str(shape);
    return fmt::format("[{}, ... ({} dims, hash {:016x})]", fmt::join(shape, ", "), rank_of_shape, shape_hash);
}

std::string Signature::call_site() const {
    return line == 0 ? file : fmt::format("{}:{}", file, line);
}

std::string Signature::describe() const {
    std::string s = fmt::format("`{}` #{}", op_name(op), sequence);
    if (dtype) s += fmt::format(" {}{}", dtype_name(*dtype), shape_text());
    if (root >= 0) s += fmt::format(" root={}", root);
    if (reduce_op) s += fmt::format(" op={}", reduce_op_name(*reduce_op));
    if (!tag.empty()) s += fmt::format(" tag='{}'", tag);
    s += fmt::format(" at {}", call_site());
    return s;
}

namespace detail {

namespace {
constexpr std::uint8_t none = 0xff;
}  // namespace

LocalFailure current_failure() {
    // The most specific type first: OutOfMemoryError and the other Error subclasses by name, so that every rank can
    // name them; anything else as what it is.
    try {
        throw;
    } catch (const OutOfMemoryError& e) {
        return {"OutOfMemoryError", e.what()};
    } catch (const ShapeError& e) {
        return {"ShapeError", e.what()};
    } catch (const DTypeError& e) {
        return {"DTypeError", e.what()};
    } catch (const DeviceError& e) {
        return {"DeviceError", e.what()};
    } catch (const InvalidArgumentError& e) {
        return {"InvalidArgumentError", e.what()};
    } catch (const ReadOnlyError& e) {
        return {"ReadOnlyError", e.what()};
    } catch (const UnsupportedError& e) {
        return {"UnsupportedError", e.what()};
    } catch (const Error& e) {
        return {"Error", e.what()};
    } catch (const std::bad_alloc& e) {
        return {"std::bad_alloc", e.what()};
    } catch (const std::exception& e) {
        return {"std::exception", e.what()};
    }
}

WireSignature encode_signature(const CallInfo& call, std::uint64_t sequence, std::uint64_t step,
                               const LocalFailure* failure) {
    WireSignature w;
    std::memset(&w, 0, sizeof w);
    w.sequence = sequence;
    w.root = call.root;
    w.varying_dim = call.varying_dim;
    w.op = static_cast<std::uint8_t>(call.op);
    w.dtype = none;
    w.device_type = none;
    w.reduce_op = call.reduce_op ? static_cast<std::uint8_t>(*call.reduce_op) : none;
    if (const ForeignCall* f = call.foreign; f != nullptr) {
        w.dtype = f->dtype ? static_cast<std::uint8_t>(*f->dtype) : none;
        w.device_type = static_cast<std::uint8_t>(f->device);
        w.rank_of_shape = static_cast<std::int32_t>(f->shape.size());
        w.shape_hash = dims_hash(f->shape, -1);
        w.trailing_hash = call.varying_dim >= 0 ? dims_hash(f->shape, call.varying_dim) : w.shape_hash;
        w.numel = std::accumulate(f->shape.begin(), f->shape.end(), std::int64_t{1}, std::multiplies<>());
        std::copy_n(f->shape.begin(), std::min(f->shape.size(), max_record_dims), w.dims);
    } else if (const Tensor* t = call.input; t != nullptr) {
        const Shape& shape = t->shape();
        w.dtype = static_cast<std::uint8_t>(t->dtype());
        w.device_type = static_cast<std::uint8_t>(t->device().type());
        w.rank_of_shape = static_cast<std::int32_t>(shape.size());
        w.shape_hash = shape_hash(shape);
        w.trailing_hash = call.varying_dim >= 0 ? shape_hash(shape, call.varying_dim) : w.shape_hash;
        w.numel = t->numel();
        std::copy_n(shape.begin(), std::min(shape.size(), max_record_dims), w.dims);
    }
    w.line = call.site.line();
    const std::string_view file = call.site.file();
    const std::size_t slash = file.rfind('/');
    w.file.assign(slash == std::string_view::npos ? file : file.substr(slash + 1), /*keep_end=*/true);
    w.function.assign(call.site.function(), /*keep_end=*/true);
    w.tag.assign(call.site.tag);
    w.step = step;
    if (failure != nullptr) {
        w.failure_type.assign(failure->type);
        w.failure.assign(failure->message);
    }
    return w;
}

Signature decode_signature(const WireSignature& w) {
    Signature s;
    s.sequence = w.sequence;
    s.shape_hash = w.shape_hash;
    s.trailing_hash = w.trailing_hash;
    s.numel = w.numel;
    s.rank_of_shape = w.rank_of_shape;
    const auto kept = std::min<std::size_t>(static_cast<std::size_t>(std::max(w.rank_of_shape, 0)), max_record_dims);
    s.shape.assign(w.dims, w.dims + kept);
    s.root = w.root;
    s.varying_dim = w.varying_dim;
    s.line = w.line;
    s.op = static_cast<OpKind>(w.op);
    if (w.dtype != none) s.dtype = static_cast<DType>(w.dtype);
    if (w.reduce_op != none) s.reduce_op = static_cast<ReduceOp>(w.reduce_op);
    if (w.device_type != none) s.device_type = static_cast<DeviceType>(w.device_type);
    s.file = w.file.str();
    s.function = w.function.str();
    s.tag = w.tag.str();
    s.step = w.step;
    s.failure_type = w.failure_type.str();
    s.failure = w.failure.str();
    return s;
}

std::uint64_t agreement_key(const WireSignature& s) noexcept {
    if (!s.failure_type.empty()) return 0;
    const OpTraits& rules = traits(static_cast<OpKind>(s.op));
    // The compared fields packed into words, then mixed a word at a time (this runs on every call in debug mode).
    std::uint64_t words[4 + (sizeof s.tag + 7) / 8] = {};
    words[0] = s.sequence;
    words[1] = s.varying_dim >= 0 ? s.trailing_hash : s.shape_hash;
    words[2] = s.step;
    words[3] = std::uint64_t{s.op} | std::uint64_t{s.dtype} << 8 |
               std::uint64_t{rules.has_reduce_op ? s.reduce_op : std::uint8_t{0}} << 16 |
               std::uint64_t{static_cast<std::uint32_t>(s.rank_of_shape) & 0xffffu} << 24 |
               std::uint64_t{static_cast<std::uint32_t>(s.varying_dim) & 0xffffu} << 40;
    std::memcpy(&words[4], &s.tag, sizeof s.tag);
    std::uint64_t h =
        rules.has_root ? 0x9e3779b97f4a7c15ull ^ static_cast<std::uint32_t>(s.root) : 0x9e3779b97f4a7c15ull;
    for (const std::uint64_t w : words) {
        h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    return h == 0 ? 1 : h;
}

bool wire_signatures_agree(const std::vector<WireSignature>& sigs) noexcept {
    if (sigs.empty()) return true;
    const WireSignature& a = sigs[0];
    const OpTraits& rules = traits(static_cast<OpKind>(a.op));
    if (!a.failure_type.empty()) return false;
    for (std::size_t r = 1; r < sigs.size(); ++r) {
        const WireSignature& b = sigs[r];
        if (b.op != a.op || b.sequence != a.sequence || b.dtype != a.dtype || b.rank_of_shape != a.rank_of_shape ||
            b.varying_dim != a.varying_dim) {
            return false;
        }
        if (a.varying_dim >= 0 ? b.trailing_hash != a.trailing_hash : b.shape_hash != a.shape_hash) return false;
        if (rules.has_root && b.root != a.root) return false;
        if (rules.has_reduce_op && b.reduce_op != a.reduce_op) return false;
        if (!b.failure_type.empty() || std::memcmp(&b.tag, &a.tag, sizeof a.tag) != 0) return false;
        if (b.step != a.step) return false;
    }
    return true;
}

}  // namespace detail

namespace {

// The report's "Processes 0-1: value" lines for one field of every rank's signature.
template <typename Value>
std::string grouped(const std::vector<Signature>& sigs, Value&& value) {
    std::vector<std::string> values;
    values.reserve(sigs.size());
    for (const auto& s : sigs) values.push_back(value(s));
    return detail::grouped_by_value(values);
}

bool all_equal(const std::vector<Signature>& sigs, const std::function<bool(const Signature&, const Signature&)>& eq) {
    for (std::size_t r = 1; r < sigs.size(); ++r) {
        if (!eq(sigs[0], sigs[r])) return false;
    }
    return true;
}

struct Section {
    std::string noun;     // "shape", used in the headline
    std::string heading;  // "Input shapes"
    std::function<std::string(const Signature&)> value;
};

std::string join_nouns(const std::vector<std::string>& nouns) {
    if (nouns.size() == 1) return nouns[0];
    std::string s;
    for (std::size_t i = 0; i < nouns.size(); ++i) {
        s += nouns[i];
        if (i + 2 < nouns.size())
            s += ", ";
        else if (i + 2 == nouns.size())
            s += " and ";
    }
    return s;
}

std::string dtype_text(const Signature& s) {
    return s.dtype ? std::string(dtype_name(*s.dtype)) : "none";
}

}  // namespace

std::optional<std::string> check_signatures(const std::vector<Signature>& sigs) {
    if (sigs.size() <= 1) return std::nullopt;
    const auto site = [](const Signature& s) {
        return s.function.empty() ? s.call_site() : fmt::format("{} in {}", s.call_site(), s.function);
    };

    // A different collective, or a different count of calls, makes every other comparison meaningless.
    if (!all_equal(sigs, [](const Signature& a, const Signature& b) { return a.op == b.op; })) {
        return fmt::format(
            "Cannot apply desired operation due to mismatched operations. Every process must call the same "
            "collective in the same order.\n\nOperations:\n{}\nCall sites:\n{}",
            grouped(sigs, [](const Signature& s) { return fmt::format("`{}` (call #{})", op_name(s.op), s.sequence); }),
            grouped(sigs, site));
    }
    const OpKind op = sigs[0].op;
    if (!all_equal(sigs, [](const Signature& a, const Signature& b) { return a.sequence == b.sequence; })) {
        return fmt::format(
            "Cannot apply desired operation due to sequence mismatches. Processes have made different numbers of "
            "collective calls on this communicator: one skipped a call or made an extra one.\n\nOperation: `{}`\n"
            "Call numbers:\n{}\nCall sites:\n{}",
            op_name(op), grouped(sigs, [](const Signature& s) { return fmt::format("#{}", s.sequence); }),
            grouped(sigs, site));
    }

    std::vector<Section> failed;
    if (op != OpKind::Barrier) {
        const bool uneven = sigs[0].varying_dim >= 0;
        const bool shapes_agree =
            uneven ? all_equal(sigs,
                               [](const Signature& a, const Signature& b) {
                                   return a.rank_of_shape == b.rank_of_shape && a.trailing_hash == b.trailing_hash &&
                                          a.varying_dim == b.varying_dim;
                               })
                   : all_equal(sigs, [](const Signature& a, const Signature& b) {
                         return a.rank_of_shape == b.rank_of_shape && a.shape_hash == b.shape_hash;
                     });
        if (!shapes_agree) {
            failed.push_back({"shape",
                              uneven ? fmt::format("Input shapes (dimension {} may differ, the others must agree)",
                                                   sigs[0].varying_dim)
                                     : "Input shapes",
                              [](const Signature& s) { return s.shape_text(); }});
        }
        if (!all_equal(sigs, [](const Signature& a, const Signature& b) { return a.dtype == b.dtype; })) {
            failed.push_back({"dtype", "Input dtypes", dtype_text});
        }
    }
    if (detail::traits(op).has_root &&
        !all_equal(sigs, [](const Signature& a, const Signature& b) { return a.root == b.root; })) {
        failed.push_back({"root", "Roots", [](const Signature& s) { return fmt::format("{}", s.root); }});
    }
    if (detail::traits(op).has_reduce_op &&
        !all_equal(sigs, [](const Signature& a, const Signature& b) { return a.reduce_op == b.reduce_op; })) {
        failed.push_back({"reduce op", "Reduce ops", [](const Signature& s) {
                              return s.reduce_op ? std::string(reduce_op_name(*s.reduce_op)) : "none";
                          }});
    }
    if (!all_equal(sigs, [](const Signature& a, const Signature& b) { return a.tag == b.tag; })) {
        failed.push_back({"tag", "Tags", [](const Signature& s) { return fmt::format("'{}'", s.tag); }});
    }
    if (!all_equal(sigs, [](const Signature& a, const Signature& b) { return a.step == b.step; })) {
        failed.push_back({"step", "Steps (Communicator::set_step: a process skipped or repeated a step of the loop)",
                          [](const Signature& s) {
                              return s.step == 0 ? std::string("none set") : fmt::format("step {}", s.step);
                          }});
    }
    if (failed.empty()) return std::nullopt;

    std::vector<std::string> nouns;
    for (const auto& f : failed) nouns.push_back(f.noun);
    std::string report = fmt::format("Cannot apply desired operation due to {} mismatches.", join_nouns(nouns));
    if (failed[0].noun == "shape") report += " All shapes across devices must be valid.";
    report += fmt::format("\n\nOperation: `{}`\n", op_name(op));
    for (const auto& f : failed) report += fmt::format("{}:\n{}", f.heading, grouped(sigs, f.value));
    report += fmt::format("Call sites:\n{}", grouped(sigs, site));
    if (!sigs[0].tag.empty()) report += fmt::format("Tag: '{}'\n", sigs[0].tag);
    return report;
}

namespace detail {

namespace {
// The type every process failed the call with, or "" when some process did not fail or the types differ.
std::string shared_failure_type(const std::vector<Signature>& sigs) {
    if (sigs.empty()) return {};
    const std::string& type = sigs.front().failure_type;
    const bool shared =
        std::all_of(sigs.begin(), sigs.end(), [&](const Signature& s) { return s.failure_type == type; });
    return shared ? type : std::string();
}
}  // namespace

std::optional<std::string> rejected_report(const std::vector<Signature>& sigs) {
    std::vector<int> failing;
    for (std::size_t r = 0; r < sigs.size(); ++r) {
        if (!sigs[r].failure_type.empty()) failing.push_back(static_cast<int>(r));
    }
    if (failing.empty()) return std::nullopt;
    const Signature& first = sigs[static_cast<std::size_t>(failing.front())];
    std::string report;
    if (const std::string type = shared_failure_type(sigs); !type.empty()) {
        // One error of one type on every process: the messages, grouped (usually one line).
        std::vector<std::string> messages;
        for (const auto& s : sigs) messages.push_back(s.failure);
        report = fmt::format(
            "Cannot run `{}` #{}: every process raised {} checking its own arguments or allocating its result, so no "
            "process started it "
            "(no data was exchanged; every process raises this error).\n\nFailures:\n{}",
            op_name(first.op), first.sequence, type, grouped_by_value(messages));
    } else {
        report = fmt::format(
            "Cannot run `{}` #{}: {} could not start it, so no process did (no data was exchanged; every process "
            "raises this error).\n\nFailures:\n",
            op_name(first.op), first.sequence, processes_text(failing));
        for (const int r : failing) {
            const Signature& s = sigs[static_cast<std::size_t>(r)];
            report += fmt::format("  - Process {}: {}: {}\n", r, s.failure_type, s.failure);
        }
    }
    std::vector<std::string> sites;
    for (const auto& s : sigs) {
        sites.push_back(fmt::format("`{}` #{} at {}", op_name(s.op), s.sequence, s.call_site()));
    }
    report += "Calls:\n" + grouped_by_value(sites);
    return report;
}

void throw_shared_failure(const std::vector<Signature>& sigs, const std::string& report,
                          const std::exception_ptr& error) {
    const std::string type = shared_failure_type(sigs);
    if (type == "ShapeError") throw ShapeError(report);
    if (type == "DTypeError") throw DTypeError(report);
    if (type == "DeviceError") throw DeviceError(report);
    if (type == "InvalidArgumentError") throw InvalidArgumentError(report);
    if (type == "ReadOnlyError") throw ReadOnlyError(report);
    if (type == "UnsupportedError") throw UnsupportedError(report);
    if (type == "OutOfMemoryError" && error) {
        // Its numbers are this process's own, so its message is too; the report goes to the log.
        try {
            std::rethrow_exception(error);
        } catch (const OutOfMemoryError& e) {
            throw OutOfMemoryError(e.device(), e.requested_bytes(), e.stats(),
                                   fmt::format("every process ran out of memory for `{}` #{}, so no process started "
                                               "it (no data was exchanged)",
                                               op_name(sigs.front().op), sigs.front().sequence));
        } catch (...) {
        }
    }
}

}  // namespace detail

CallRejectedError::CallRejectedError(std::string message, std::vector<Failure> failures)
    : DistributedOperationError(std::move(message)), failures_(std::move(failures)) {}

bool CallRejectedError::out_of_memory() const noexcept {
    return std::any_of(failures_.begin(), failures_.end(),
                       [](const Failure& f) { return f.type == "OutOfMemoryError"; });
}

SignatureMismatchError::SignatureMismatchError(std::string message, std::vector<Signature> signatures)
    : DistributedOperationError(std::move(message)), signatures_(std::move(signatures)) {}

std::string SignatureMismatchError::to_json() const {
    nlohmann::json ranks = nlohmann::json::array();
    for (std::size_t r = 0; r < signatures_.size(); ++r) {
        const auto& s = signatures_[r];
        nlohmann::json j = {
            {"rank", r},
            {"operation", std::string(op_name(s.op))},
            {"sequence", s.sequence},
            {"dtype", s.dtype ? nlohmann::json(std::string(dtype_name(*s.dtype))) : nlohmann::json(nullptr)},
            {"shape", s.shape},
            {"ndim", s.rank_of_shape},
            {"shape_hash", fmt::format("{:016x}", s.shape_hash)},
            {"numel", s.numel},
            {"root", s.root >= 0 ? nlohmann::json(s.root) : nlohmann::json(nullptr)},
            {"reduce_op",
             s.reduce_op ? nlohmann::json(std::string(reduce_op_name(*s.reduce_op))) : nlohmann::json(nullptr)},
            {"device_type", s.device_type ? nlohmann::json(*s.device_type == DeviceType::CPU ? "cpu" : "cuda")
                                          : nlohmann::json(nullptr)},
            {"file", s.file},
            {"line", s.line},
            {"function", s.function},
            {"tag", s.tag},
            {"step", s.step != 0 ? nlohmann::json(s.step) : nlohmann::json(nullptr)},
        };
        ranks.push_back(std::move(j));
    }
    nlohmann::json doc = {{"message", what()}, {"ranks", std::move(ranks)}};
    return doc.dump();
}

}  // namespace lockstep
