#include <lockstep/signature.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

namespace lockstep {

std::string_view op_name(OpKind op) noexcept {
    switch (op) {
        case OpKind::Barrier: return "lockstep::barrier";
        case OpKind::Broadcast: return "lockstep::broadcast";
        case OpKind::Reduce: return "lockstep::reduce";
        case OpKind::Allreduce: return "lockstep::allreduce";
        case OpKind::Gather: return "lockstep::gather";
        case OpKind::Allgather: return "lockstep::allgather";
        case OpKind::Scatter: return "lockstep::scatter";
        case OpKind::ReduceScatter: return "lockstep::reduce_scatter";
        case OpKind::Alltoall: return "lockstep::alltoall";
        case OpKind::GatherUneven: return "lockstep::gather_uneven";
        case OpKind::PadAcrossProcesses: return "lockstep::pad_across_processes";
    }
    return "lockstep::unknown";
}

std::string_view reduce_op_name(ReduceOp op) noexcept {
    switch (op) {
        case ReduceOp::Sum: return "sum";
        case ReduceOp::Prod: return "prod";
        case ReduceOp::Max: return "max";
        case ReduceOp::Min: return "min";
        case ReduceOp::Mean: return "mean";
    }
    return "unknown";
}

std::uint64_t shape_hash(const Shape& shape, int skip_dim) {
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

std::string Signature::shape_text() const {
    if (static_cast<std::size_t>(rank_of_shape) <= shape.size()) return shape_str(shape);
    return fmt::format("[{}, ... ({} dims, hash {:016x})]", fmt::join(shape, ", "), rank_of_shape, shape_hash);
}

std::string Signature::call_site() const { return line == 0 ? file : fmt::format("{}:{}", file, line); }

std::string Signature::describe() const {
    std::string s = fmt::format("`{}` #{}", op_name(op), sequence);
    if (dtype) s += fmt::format(" {}{}", dtype_name(*dtype), shape_text());
    if (root >= 0) s += fmt::format(" root={}", root);
    if (reduce_op) s += fmt::format(" op={}", reduce_op_name(*reduce_op));
    if (!tag.empty()) s += fmt::format(" tag='{}'", tag);
    s += fmt::format(" at {}", call_site());
    return s;
}

namespace {
template <std::size_t N>
void copy_text(char (&dst)[N], std::string_view src) {
    // Keep the end of long paths and names: the file name and the innermost scope matter most.
    if (src.size() >= N) src = src.substr(src.size() - (N - 1));
    std::memset(dst, 0, N);
    std::memcpy(dst, src.data(), src.size());
}
template <std::size_t N>
std::string read_text(const char (&src)[N]) {
    return std::string(src, strnlen(src, N));
}
constexpr std::uint8_t none = 0xff;
}  // namespace

WireSignature to_wire(const Signature& s) {
    WireSignature w;
    std::memset(&w, 0, sizeof w);
    w.sequence = s.sequence;
    w.shape_hash = s.shape_hash;
    w.trailing_hash = s.trailing_hash;
    w.numel = s.numel;
    w.rank_of_shape = static_cast<std::int32_t>(s.rank_of_shape);
    for (std::size_t d = 0; d < std::min(s.shape.size(), max_wire_dims); ++d) w.dims[d] = s.shape[d];
    w.root = s.root;
    w.varying_dim = s.varying_dim;
    w.line = s.line;
    w.op = static_cast<std::uint8_t>(s.op);
    w.dtype = s.dtype ? static_cast<std::uint8_t>(*s.dtype) : none;
    w.reduce_op = s.reduce_op ? static_cast<std::uint8_t>(*s.reduce_op) : none;
    w.device_type = s.device_type ? static_cast<std::uint8_t>(*s.device_type) : none;
    copy_text(w.file, s.file);
    copy_text(w.function, s.function);
    copy_text(w.tag, s.tag);
    return w;
}

Signature from_wire(const WireSignature& w) {
    Signature s;
    s.sequence = w.sequence;
    s.shape_hash = w.shape_hash;
    s.trailing_hash = w.trailing_hash;
    s.numel = w.numel;
    s.rank_of_shape = w.rank_of_shape;
    const auto kept = std::min<std::size_t>(static_cast<std::size_t>(std::max(w.rank_of_shape, 0)), max_wire_dims);
    s.shape.assign(w.dims, w.dims + kept);
    s.root = w.root;
    s.varying_dim = w.varying_dim;
    s.line = w.line;
    s.op = static_cast<OpKind>(w.op);
    if (w.dtype != none) s.dtype = static_cast<DType>(w.dtype);
    if (w.reduce_op != none) s.reduce_op = static_cast<ReduceOp>(w.reduce_op);
    if (w.device_type != none) s.device_type = static_cast<DeviceType>(w.device_type);
    s.file = read_text(w.file);
    s.function = read_text(w.function);
    s.tag = read_text(w.tag);
    return s;
}

std::string format_rank_ranges(const std::vector<int>& ranks) {
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < sorted.size();) {
        std::size_t j = i;
        while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
        parts.push_back(j == i ? fmt::format("{}", sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]));
        i = j + 1;
    }
    return fmt::format("{}", fmt::join(parts, ", "));
}

namespace {

// Lines "  - Process 0: value" with ranks of equal value grouped, in order of each value's lowest rank.
std::string grouped(const std::vector<Signature>& sigs, const std::function<std::string(const Signature&)>& value) {
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (std::size_t r = 0; r < sigs.size(); ++r) {
        const std::string v = value(sigs[r]);
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
        if (it == groups.end()) {
            groups.push_back({v, {static_cast<int>(r)}});
        } else {
            it->second.push_back(static_cast<int>(r));
        }
    }
    std::string out;
    for (const auto& [v, ranks] : groups) {
        out += fmt::format("  - {} {}: {}\n", ranks.size() == 1 ? "Process" : "Processes", format_rank_ranges(ranks), v);
    }
    return out;
}

bool all_equal(const std::vector<Signature>& sigs, const std::function<bool(const Signature&, const Signature&)>& eq) {
    for (std::size_t r = 1; r < sigs.size(); ++r) {
        if (!eq(sigs[0], sigs[r])) return false;
    }
    return true;
}

bool has_root(OpKind op) {
    return op == OpKind::Broadcast || op == OpKind::Reduce || op == OpKind::Gather || op == OpKind::Scatter;
}
bool has_reduce_op(OpKind op) {
    return op == OpKind::Reduce || op == OpKind::Allreduce || op == OpKind::ReduceScatter;
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
        if (i + 2 < nouns.size()) s += ", ";
        else if (i + 2 == nouns.size()) s += " and ";
    }
    return s;
}

std::string dtype_text(const Signature& s) { return s.dtype ? std::string(dtype_name(*s.dtype)) : "none"; }

}  // namespace

bool wire_signatures_agree(const std::vector<WireSignature>& sigs) noexcept {
    if (sigs.empty()) return true;
    const WireSignature& a = sigs[0];
    const auto op = static_cast<OpKind>(a.op);
    for (std::size_t r = 1; r < sigs.size(); ++r) {
        const WireSignature& b = sigs[r];
        if (b.op != a.op || b.sequence != a.sequence || b.dtype != a.dtype || b.rank_of_shape != a.rank_of_shape ||
            b.varying_dim != a.varying_dim) {
            return false;
        }
        if (a.varying_dim >= 0 ? b.trailing_hash != a.trailing_hash : b.shape_hash != a.shape_hash) return false;
        if (has_root(op) && b.root != a.root) return false;
        if (has_reduce_op(op) && b.reduce_op != a.reduce_op) return false;
    }
    return true;
}

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
    if (has_root(op) && !all_equal(sigs, [](const Signature& a, const Signature& b) { return a.root == b.root; })) {
        failed.push_back({"root", "Roots", [](const Signature& s) { return fmt::format("{}", s.root); }});
    }
    if (has_reduce_op(op) &&
        !all_equal(sigs, [](const Signature& a, const Signature& b) { return a.reduce_op == b.reduce_op; })) {
        failed.push_back({"reduce op", "Reduce ops", [](const Signature& s) {
                              return s.reduce_op ? std::string(reduce_op_name(*s.reduce_op)) : "none";
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

SignatureMismatchError::SignatureMismatchError(std::string message, std::vector<Signature> signatures)
    : DistributedOperationException(std::move(message)), signatures_(std::move(signatures)) {}

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
        };
        ranks.push_back(std::move(j));
    }
    nlohmann::json doc = {{"message", what()}, {"ranks", std::move(ranks)}};
    return doc.dump();
}

}  // namespace lockstep
