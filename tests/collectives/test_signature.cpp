#define BOOST_TEST_MODULE signature
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include <collectives/rank_groups.hpp>
#include <collectives/wire_signature.hpp>

#include <nlohmann/json.hpp>

using namespace lockstep;

namespace {
Signature make(OpKind op, Shape shape, DType dtype = DType::Float32, int root = -1,
               std::optional<ReduceOp> reduce = std::nullopt, std::uint64_t seq = 1, int varying_dim = -1) {
    Signature s;
    s.sequence = seq;
    s.op = op;
    s.dtype = dtype;
    s.rank_of_shape = static_cast<std::int64_t>(shape.size());
    s.shape_hash = shape_hash(shape);
    s.trailing_hash = varying_dim >= 0 ? shape_hash(shape, varying_dim) : s.shape_hash;
    s.numel = shape_numel(shape);
    s.shape = Shape(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(shape.size(), 8)));
    s.root = root;
    s.reduce_op = reduce;
    s.varying_dim = varying_dim;
    s.device_type = DeviceType::CPU;
    s.file = "train.cpp";
    s.line = 42;
    return s;
}
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}
}  // namespace

BOOST_AUTO_TEST_CASE(agreeing_signatures_pass) {
    std::vector<Signature> sigs(4, make(OpKind::Allreduce, {8, 3}, DType::Float32, -1, ReduceOp::Sum));
    BOOST_TEST(!check_signatures(sigs).has_value());
    BOOST_TEST(!check_signatures({make(OpKind::Barrier, {})}).has_value());
}

BOOST_AUTO_TEST_CASE(shape_mismatch_report_has_the_familiar_form) {
    std::vector<Signature> sigs{make(OpKind::Broadcast, {1, 5}, DType::Float32, 0),
                                make(OpKind::Broadcast, {1, 2, 5}, DType::Float32, 0)};
    const auto report = check_signatures(sigs);
    BOOST_REQUIRE(report.has_value());
    BOOST_TEST(report->starts_with(
        "Cannot apply desired operation due to shape mismatches. All shapes across devices must be valid.\n\n"
        "Operation: `lockstep::broadcast`\n"
        "Input shapes:\n"
        "  - Process 0: [1, 5]\n"
        "  - Process 1: [1, 2, 5]\n"));
    BOOST_TEST(contains(*report, "Call sites:\n  - Processes 0-1: train.cpp:42"));
}

BOOST_AUTO_TEST_CASE(equal_signatures_are_grouped_by_rank_ranges) {
    std::vector<Signature> sigs(8, make(OpKind::Allreduce, {1, 5}, DType::Float32, -1, ReduceOp::Sum));
    sigs[1] = make(OpKind::Allreduce, {2, 5}, DType::Float32, -1, ReduceOp::Sum);
    const auto report = check_signatures(sigs);
    BOOST_REQUIRE(report.has_value());
    BOOST_TEST(contains(*report, "  - Processes 0, 2-7: [1, 5]\n  - Process 1: [2, 5]\n"));
    BOOST_TEST(format_rank_ranges({5, 0, 1, 2, 7, 9, 8}) == "0-2, 5, 7-9");
    BOOST_TEST(format_rank_ranges({3}) == "3");
}

BOOST_AUTO_TEST_CASE(each_field_mismatch_is_named) {
    struct Case {
        const char* what;
        std::vector<Signature> sigs;
        std::vector<std::string> expected;
    };
    const Case cases[] = {
        {"dtype",
         {make(OpKind::Allgather, {4}, DType::Float32), make(OpKind::Allgather, {4}, DType::Float64)},
         {"due to dtype mismatches", "Input dtypes:", "Process 0: float32", "Process 1: float64"}},
        {"op kind",
         {make(OpKind::Allreduce, {4}, DType::Float32, -1, ReduceOp::Sum),
          make(OpKind::Broadcast, {4}, DType::Float32, 0)},
         {"due to mismatched operations", "Process 0: `lockstep::allreduce` (call #1)",
          "Process 1: `lockstep::broadcast` (call #1)"}},
        {"root",
         {make(OpKind::Gather, {4}, DType::Int32, 0), make(OpKind::Gather, {4}, DType::Int32, 1)},
         {"due to root mismatches", "Roots:", "Process 0: 0", "Process 1: 1"}},
        {"reduce op",
         {make(OpKind::Allreduce, {4}, DType::Float32, -1, ReduceOp::Sum),
          make(OpKind::Allreduce, {4}, DType::Float32, -1, ReduceOp::Max)},
         {"due to reduce op mismatches", "Reduce ops:", "Process 0: sum", "Process 1: max"}},
        {"sequence",
         {make(OpKind::Allreduce, {4}, DType::Float32, -1, ReduceOp::Sum, 5),
          make(OpKind::Allreduce, {4}, DType::Float32, -1, ReduceOp::Sum, 4)},
         {"due to sequence mismatches", "skipped a call", "Process 0: #5", "Process 1: #4"}},
        {"shape and dtype together",
         {make(OpKind::Reduce, {4}, DType::Float32, 0, ReduceOp::Sum),
          make(OpKind::Reduce, {5}, DType::Int64, 0, ReduceOp::Sum)},
         {"due to shape and dtype mismatches", "Input shapes:", "Input dtypes:"}},
    };
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT(c.what) {
            const auto report = check_signatures(c.sigs);
            BOOST_REQUIRE(report.has_value());
            for (const auto& e : c.expected) BOOST_TEST(contains(*report, e), "missing: " << e << "\nin:\n" << *report);
        }
    }
}

BOOST_AUTO_TEST_CASE(uneven_ops_compare_only_the_other_dimensions) {
    std::vector<Signature> ok{make(OpKind::GatherUneven, {3, 5}, DType::Float32, -1, std::nullopt, 1, 0),
                              make(OpKind::GatherUneven, {7, 5}, DType::Float32, -1, std::nullopt, 1, 0)};
    BOOST_TEST(!check_signatures(ok).has_value());
    std::vector<Signature> bad{make(OpKind::GatherUneven, {3, 5}, DType::Float32, -1, std::nullopt, 1, 0),
                               make(OpKind::GatherUneven, {3, 6}, DType::Float32, -1, std::nullopt, 1, 0)};
    const auto report = check_signatures(bad);
    BOOST_REQUIRE(report.has_value());
    BOOST_TEST(contains(*report, "dimension 0 may differ"));
    std::vector<Signature> pad{make(OpKind::PadAcrossProcesses, {2, 9, 4}, DType::Float32, -1, std::nullopt, 1, 1),
                               make(OpKind::PadAcrossProcesses, {2, 3, 4}, DType::Float32, -1, std::nullopt, 1, 1)};
    BOOST_TEST(!check_signatures(pad).has_value());
}

BOOST_AUTO_TEST_CASE(wire_round_trip_keeps_every_field_of_the_call_record_and_folds_long_shapes) {
    using detail::CallInfo;
    const Tensor t = Tensor::zeros({2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, DType::BFloat16);
    const CallSite site{.tag = "grad-sync"};
    const CallInfo call{.op = OpKind::ReduceScatter, .input = &t, .reduce_op = ReduceOp::Mean, .site = site};
    const Signature back = detail::decode_signature(detail::encode_signature(call, 77));
    BOOST_TEST(back.sequence == 77u);
    BOOST_TEST((back.op == OpKind::ReduceScatter));
    BOOST_TEST((back.dtype == DType::BFloat16));
    BOOST_TEST((back.reduce_op == ReduceOp::Mean));
    BOOST_TEST((back.device_type == DeviceType::CPU));
    BOOST_TEST(back.root == -1);
    BOOST_TEST(back.rank_of_shape == 10);
    BOOST_TEST(back.shape.size() == detail::max_record_dims);
    BOOST_TEST(back.shape_hash == shape_hash(t.shape()));
    BOOST_TEST(back.numel == t.numel());
    BOOST_TEST(back.tag == "grad-sync");
    BOOST_TEST(back.file == "test_signature.cpp");  // the base name of the caller's file
    BOOST_TEST(back.line == site.line());
    BOOST_TEST(contains(back.function, "test_method"));
    BOOST_TEST(contains(back.shape_text(), "(10 dims"));
    // Two long shapes that differ only past the leading dimensions still differ.
    const Tensor u = Tensor::zeros({2, 3, 4, 5, 6, 7, 8, 9, 10, 12}, DType::BFloat16);
    const CallInfo other{.op = OpKind::ReduceScatter, .input = &u, .reduce_op = ReduceOp::Mean, .site = site};
    const auto a = detail::encode_signature(call, 77);
    const auto b = detail::encode_signature(other, 77);
    BOOST_TEST(!detail::wire_signatures_agree({a, b}));
    BOOST_TEST(detail::wire_signatures_agree({a, a}));
    BOOST_TEST(check_signatures({back, detail::decode_signature(b)}).has_value());
}

BOOST_AUTO_TEST_CASE(wire_comparison_follows_the_operation_table) {
    using detail::CallInfo;
    const Tensor t = Tensor::zeros({4, 2});
    // A root differs: a mismatch for rooted operations only.
    for (const detail::OpTraits& op : detail::op_table) {
        if (op.point_to_point) continue;
        const CallInfo r0{.op = op.op, .input = &t, .root = 0};
        const CallInfo r1{.op = op.op, .input = &t, .root = 1};
        BOOST_TEST(detail::wire_signatures_agree({detail::encode_signature(r0, 3), detail::encode_signature(r1, 3)}) ==
                       !op.has_root,
                   op.name);
        const CallInfo sum{.op = op.op, .input = &t, .reduce_op = ReduceOp::Sum};
        const CallInfo max{.op = op.op, .input = &t, .reduce_op = ReduceOp::Max};
        BOOST_TEST(detail::wire_signatures_agree(
                       {detail::encode_signature(sum, 3), detail::encode_signature(max, 3)}) == !op.has_reduce_op,
                   op.name);
        BOOST_TEST(op_name(op.op) == op.name);
    }
    // Names come from the one table; an unknown value (a corrupt record) has a name too.
    BOOST_TEST(op_name(OpKind::Allreduce) == "lockstep::allreduce");
    BOOST_TEST(op_name(static_cast<OpKind>(200)) == "lockstep::unknown");
    BOOST_TEST(reduce_op_name(ReduceOp::Mean) == "mean");
    BOOST_TEST(reduce_op_name(static_cast<ReduceOp>(200)) == "unknown");
    // The dimension allowed to vary: only the others are compared.
    const Tensor wide = Tensor::zeros({3, 2});
    const CallInfo a{.op = OpKind::GatherUneven, .input = &t, .varying_dim = 0};
    const CallInfo b{.op = OpKind::GatherUneven, .input = &wide, .varying_dim = 0};
    BOOST_TEST(detail::wire_signatures_agree({detail::encode_signature(a, 1), detail::encode_signature(b, 1)}));
    BOOST_TEST(!detail::wire_signatures_agree({detail::encode_signature(a, 1), detail::encode_signature(a, 2)}));
}

BOOST_AUTO_TEST_CASE(fixed_text_cuts_long_names_at_a_token_boundary) {
    detail::FixedText<16> text;
    text.assign("short");
    BOOST_TEST(text.str() == "short");
    // Keeping the end: the innermost scope, never a word cut in its middle.
    text.assign("lockstep::Communicator::allreduce_", /*keep_end=*/true);
    BOOST_TEST(text.str() == "allreduce_");
    // Keeping the start.
    text.assign("train_step(int, lockstep::Tensor&)");
    BOOST_TEST(text.str() == "train_step(int,");
    BOOST_TEST(text.str().size() < 16u);
    // No boundary near the cut: cut where it must.
    text.assign(std::string(40, 'x'), /*keep_end=*/true);
    BOOST_TEST(text.str() == std::string(15, 'x'));
}

BOOST_AUTO_TEST_CASE(ranks_group_by_value_in_order_of_their_lowest_rank) {
    BOOST_TEST(detail::grouped_by_value({"a", "b", "a", "a"}) == "  - Processes 0, 2-3: a\n  - Process 1: b\n");
    BOOST_TEST(detail::processes_text({}) == "none");
    BOOST_TEST(detail::processes_text({4}) == "Process 4");
}

BOOST_AUTO_TEST_CASE(mismatch_error_carries_signatures_as_json) {
    std::vector<Signature> sigs{make(OpKind::Broadcast, {1, 5}, DType::Float32, 0),
                                make(OpKind::Broadcast, {1, 2, 5}, DType::Float32, 0)};
    SignatureMismatchError e(*check_signatures(sigs), sigs);
    BOOST_TEST(e.signatures().size() == 2u);
    const auto doc = nlohmann::json::parse(e.to_json());
    BOOST_TEST(doc["ranks"].size() == 2u);
    BOOST_TEST(doc["ranks"][1]["shape"] == nlohmann::json({1, 2, 5}));
    BOOST_TEST(doc["ranks"][0]["operation"] == "lockstep::broadcast");
    BOOST_TEST(doc["ranks"][0]["root"] == 0);
    BOOST_TEST(doc["ranks"][0]["line"] == 42);
    BOOST_TEST(doc["message"].get<std::string>() == std::string(e.what()));
    const DistributedOperationException& base = e;  // catchable by the documented type
    BOOST_TEST(contains(base.what(), "shape mismatches"));
}
