// Data-parallel training with lockstep and no framework: a two-layer MLP learns a synthetic regression task.
//
//   lockstep launch -n 2 build/examples/train/lockstep_train [--epochs 30] [--global-batch 256] [--debug] ...
//
// Every rank generates the same dataset from the seed and trains on its own slice of each global batch; gradients are
// averaged with one allreduce per step over a flat buffer, so that with the same global batch 1, 2 or 4 ranks follow
// the same loss curve. Validation runs every epoch on each rank's shard of a held-out set; a rank whose own validation
// loss stops improving sets the early-stopping trigger, and check_trigger() stops every rank in the same epoch. With
// no batch size given, find_executable_batch_size picks the largest that fits under the memory cap on every rank.
//
// The optimiser is SGD with momentum. --lr is the rate tuned for the global batch --lr-batch; the run uses the linear
// scaling rule (Goyal et al., 2017): rate = lr x global / lr-batch, so that whatever batch the search settles on, each
// sample moves the parameters as much as in the tuned run. A rate scaled up is reached by a linear warm-up from --lr
// over --warmup-epochs and stops at --max-lr, past which this task no longer trains reliably at any batch. The epoch's
// loss allreduce doubles as the agreement on divergence: a NaN or infinite loss on any rank makes the sums non-finite
// on every rank, so all ranks stop in the same epoch and exit with status 1.

#include <lockstep.hpp>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

struct Options {
    int epochs = 30;
    std::int64_t train_samples = 16384;
    std::int64_t val_samples = 2048;
    std::int64_t features = 32;
    std::int64_t hidden = 64;
    std::optional<std::int64_t> global_batch;
    std::optional<std::int64_t> batch_size;  // per process
    std::int64_t start_batch = 2048;         // per process, for the search
    double learning_rate = 0.02;             // tuned for a global batch of lr_batch
    std::int64_t lr_batch = 1024;
    double max_learning_rate = 0.06;
    int warmup_epochs = 2;
    double momentum = 0.9;
    std::uint64_t seed = 1234;
    int patience = 5;
    bool debug = false;
    std::string losses_file;
};

// A bad command line or a batch that does not fit the data: one line on the main process, exit status 2.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The checks CLI11 cannot phrase for a user: each names the option, the rule and the value given.
std::optional<std::string> check(const Options& o) {
    auto at_least = [](const char* name, auto value, auto minimum) -> std::optional<std::string> {
        if (value >= minimum) return std::nullopt;
        return fmt::format("{} must be at least {} (got {})", name, minimum, value);
    };
    auto positive = [](const char* name, double value) -> std::optional<std::string> {
        if (std::isfinite(value) && value > 0.0) return std::nullopt;
        return fmt::format("{} must be a positive number (got {})", name, value);
    };
    for (auto error : {at_least("--epochs", o.epochs, 1), at_least("--samples", o.train_samples, 1),
                       at_least("--val-samples", o.val_samples, 1),
                       at_least("--features", o.features, 2),  // the task reads x0 and x1
                       at_least("--hidden", o.hidden, 1), at_least("--start-batch", o.start_batch, 1),
                       at_least("--lr-batch", o.lr_batch, 1), at_least("--warmup-epochs", o.warmup_epochs, 0),
                       at_least("--patience", o.patience, 1), positive("--lr", o.learning_rate),
                       positive("--max-lr", o.max_learning_rate)}) {
        if (error) return error;
    }
    if (o.global_batch && *o.global_batch < 1)
        return fmt::format("--global-batch must be at least 1 (got {})", *o.global_batch);
    if (o.batch_size && *o.batch_size < 1)
        return fmt::format("--batch-size must be at least 1 (got {})", *o.batch_size);
    if (!(o.momentum >= 0.0 && o.momentum < 1.0))
        return fmt::format("--momentum must be in [0, 1) (got {})", o.momentum);
    return std::nullopt;
}

// The rate for a global batch by the linear scaling rule; scaling up stops at --max-lr (or at --lr itself when that is
// larger: an explicit --lr is never lowered).
double scaled_learning_rate(const Options& o, std::int64_t global) {
    const double scaled = o.learning_rate * static_cast<double>(global) / static_cast<double>(o.lr_batch);
    if (scaled <= o.learning_rate) return scaled;
    return std::max(o.learning_rate, std::min(scaled, o.max_learning_rate));
}

// The synthetic task: y = tanh(x . w*) + 0.1 x0 x1 + noise, x ~ N(0, 1).
struct Dataset {
    Tensor x;  // [n, features] on the host
    Tensor y;  // [n, 1]
};

Dataset make_dataset(std::int64_t n, std::int64_t features, std::uint64_t seed) {
    Generator truth_gen(0x5eed);  // the task is fixed; the seed only changes the samples
    Generator gen(seed);
    Tensor w_star = Tensor::normal({features}, 0.0, 1.0 / std::sqrt(static_cast<double>(features)), DType::Float32,
                                   Device::cpu(), &truth_gen);
    Dataset d{Tensor::normal({n, features}, 0.0, 1.0, DType::Float32, Device::cpu(), &gen), Tensor::empty({n, 1})};
    const float* x = d.x.data<float>();
    const float* w = w_star.data<float>();
    float* y = d.y.data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
        double dot = 0.0;
        for (std::int64_t f = 0; f < features; ++f) dot += static_cast<double>(x[i * features + f]) * w[f];
        y[i] =
            static_cast<float>(std::tanh(dot) + 0.1 * x[i * features] * x[i * features + 1] + 0.01 * gen.next_normal());
    }
    return d;
}

// Rows `index[begin, end)` of a host tensor, as a new tensor on `device`.
Tensor take_rows(const Tensor& t, const std::vector<std::int64_t>& index, std::int64_t begin, std::int64_t end,
                 Device device) {
    const std::int64_t width = t.numel() / t.size(0);
    Tensor out = Tensor::empty({end - begin, width});
    const auto row_bytes = static_cast<std::size_t>(width) * sizeof(float);
    for (std::int64_t i = begin; i < end; ++i) {
        std::memcpy(out.data<float>() + (i - begin) * width,
                    t.data<float>() + index[static_cast<std::size_t>(i)] * width, row_bytes);
    }
    return out.to(device);
}

// Parameters and gradients live in two flat buffers; the per-layer tensors are views, so one allreduce averages
// every gradient.
struct Model {
    Tensor params, grads;
    Tensor w1, b1, w2, b2;      // views of params
    Tensor gw1, gb1, gw2, gb2;  // views of grads

    Model(std::int64_t features, std::int64_t hidden, std::uint64_t seed, Device device) {
        const std::int64_t sizes[] = {features * hidden, hidden, hidden, 1};
        const std::int64_t total = std::accumulate(std::begin(sizes), std::end(sizes), std::int64_t{0});
        Generator gen(seed + 1);
        Tensor host = Tensor::zeros({total});
        // He initialisation for the ReLU layer, Xavier for the output; biases start at zero.
        Tensor w1_init = Tensor::normal({features * hidden}, 0.0, std::sqrt(2.0 / static_cast<double>(features)),
                                        DType::Float32, Device::cpu(), &gen);
        Tensor w2_init = Tensor::normal({hidden}, 0.0, std::sqrt(1.0 / static_cast<double>(hidden)), DType::Float32,
                                        Device::cpu(), &gen);
        std::memcpy(host.data<float>(), w1_init.data(), w1_init.nbytes());
        std::memcpy(host.data<float>() + features * hidden + hidden, w2_init.data(), w2_init.nbytes());
        params = host.to(device);
        grads = Tensor::zeros({total}, DType::Float32, device);
        std::int64_t offset = 0;
        auto carve = [&](Tensor& flat, std::int64_t n, Shape shape) {
            Tensor v = flat.narrow_rows(offset, offset + n).reshape(shape);
            offset += n;
            return v;
        };
        w1 = carve(params, sizes[0], {features, hidden});
        b1 = carve(params, sizes[1], {hidden});
        w2 = carve(params, sizes[2], {hidden, 1});
        b2 = carve(params, sizes[3], {1});
        offset = 0;
        gw1 = carve(grads, sizes[0], {features, hidden});
        gb1 = carve(grads, sizes[1], {hidden});
        gw2 = carve(grads, sizes[2], {hidden, 1});
        gb2 = carve(grads, sizes[3], {1});
    }

    [[nodiscard]] Tensor forward(const Tensor& x, Tensor* z_out = nullptr, Tensor* h_out = nullptr) const {
        Tensor z = ops::add(ops::matmul(x, w1), b1);
        Tensor h = ops::relu(z);
        if (z_out != nullptr) *z_out = z;
        if (h_out != nullptr) *h_out = h;
        return ops::add(ops::matmul(h, w2), b2);
    }

    // Forward and backward on one local batch; gradients into `grads`. Returns the local mean-squared error.
    double step_gradients(const Tensor& x, const Tensor& y) {
        Tensor z, h;
        Tensor pred = forward(x, &z, &h);
        const double loss = ops::mse_loss(pred, y).item<double>();
        Tensor d_pred = ops::mse_loss_backward(pred, y);  // [B, 1]
        ops::copy_(gw2, ops::matmul(h, d_pred, true, false));
        ops::copy_(gb2, ops::sum(d_pred, 0));
        Tensor d_z = ops::relu_backward(ops::matmul(d_pred, w2, false, true), z);
        ops::copy_(gw1, ops::matmul(x, d_z, true, false));
        ops::copy_(gb1, ops::sum(d_z, 0));
        return loss;
    }
};

std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed) {
    std::vector<std::int64_t> p(static_cast<std::size_t>(n));
    std::iota(p.begin(), p.end(), 0);
    Generator gen(seed);
    for (std::int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates with the portable generator: same order everywhere
        const auto j = static_cast<std::int64_t>(gen.next_u64() % static_cast<std::uint64_t>(i + 1));
        std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(j)]);
    }
    return p;
}

int run(const Options& opt) {
    RuntimeOptions runtime_options;
    if (opt.debug) runtime_options.config.debug = true;
    ScopedRuntime rt(runtime_options);
    set_seed(opt.seed);
    Communicator& comm = Communicator::world();
    const int size = comm.size(), rank = comm.rank();
    const Device device = rt->device();
    const Logger log = get_logger("train", LogLevel::Info);
    log.info("{} processes on {} node(s), device {}, debug mode {}", size, rt->identity().node_count, device.str(),
             comm.debug() ? "on" : "off");

    const Dataset train = make_dataset(opt.train_samples, opt.features, opt.seed);
    const Dataset val = make_dataset(opt.val_samples, opt.features, opt.seed + 1000);
    Model model(opt.features, opt.hidden, opt.seed, device);
    comm.broadcast_(model.params, 0, {"initial parameters"});  // every rank starts from rank 0's parameters

    // Each rank's shard of the validation set.
    const std::int64_t val_begin = opt.val_samples * rank / size, val_end = opt.val_samples * (rank + 1) / size;
    std::vector<std::int64_t> val_index(static_cast<std::size_t>(opt.val_samples));
    std::iota(val_index.begin(), val_index.end(), 0);
    const Tensor val_x = take_rows(val.x, val_index, val_begin, val_end, device);
    const Tensor val_y = take_rows(val.y, val_index, val_begin, val_end, device);

    // Batch size: given, derived from the global batch, or searched under the memory cap (after everything that stays
    // allocated, so that the search sees the memory a step really has).
    std::int64_t batch = 0;
    if (opt.batch_size) {
        batch = *opt.batch_size;
    } else if (opt.global_batch) {
        if (*opt.global_batch % size != 0) {
            throw UsageError(
                fmt::format("--global-batch {} does not divide evenly over {} processes", *opt.global_batch, size));
        }
        batch = per_process_batch_size(*opt.global_batch, size);
    } else {
        // The search starts no higher than a batch that leaves every epoch min_steps_per_epoch steps: an epoch of one
        // or two giant steps learns little, whatever the learning rate.
        constexpr std::int64_t min_steps_per_epoch = 4;
        const std::int64_t start =
            std::max<std::int64_t>(1, std::min(opt.start_batch, opt.train_samples / (min_steps_per_epoch * size)));
        std::vector<std::int64_t> identity(static_cast<std::size_t>(opt.train_samples));
        std::iota(identity.begin(), identity.end(), 0);
        const auto found = find_executable_batch_size(
            start,
            [&](std::int64_t candidate) {
                // One step's forward and backward at this size: the memory a real step needs.
                Tensor x = take_rows(train.x, identity, 0, candidate, device);
                Tensor y = take_rows(train.y, identity, 0, candidate, device);
                (void)model.step_gradients(x, y);
            },
            {}, comm);
        batch = found.batch_size;
    }
    const std::int64_t global = global_batch_size(batch, size);
    const std::int64_t steps = opt.train_samples / global;
    if (steps == 0) {
        throw UsageError(
            fmt::format("the global batch {} is larger than the {} training samples", global, opt.train_samples));
    }
    log.info("batch {} per process, {} global, {} steps per epoch", batch, global, steps);
    const double rate = scaled_learning_rate(opt, global);
    const std::int64_t warmup_steps = rate > opt.learning_rate ? opt.warmup_epochs * steps : 0;
    const double linear = opt.learning_rate * static_cast<double>(global) / static_cast<double>(opt.lr_batch);
    std::string rate_note = rate == linear                  ? std::string()
                            : rate == opt.max_learning_rate ? fmt::format(", capped at --max-lr from {:.6g}", linear)
                                                            : fmt::format(", kept at --lr from {:.6g}", linear);
    if (warmup_steps > 0) rate_note += fmt::format(", reached by warm-up over {} epoch(s)", opt.warmup_epochs);
    log.info("learning rate {:.6g} for the global batch {} ({:.6g} tuned for {}, scaled linearly{})", rate, global,
             opt.learning_rate, opt.lr_batch, rate_note);
    Tensor velocity = Tensor::zeros({model.params.numel()}, DType::Float32, device);

    std::vector<double> train_losses, val_losses;
    double best_local_val = INFINITY;
    int epochs_without_improvement = 0;
    int epochs_run = 0;
    const auto start = std::chrono::steady_clock::now();
    const double wait_before = comm.stats().wait_seconds;
    for (int epoch = 0; epoch < opt.epochs; ++epoch) {
        const auto epoch_start = std::chrono::steady_clock::now();
        const auto order = permutation(opt.train_samples, opt.seed * 1000003ULL + static_cast<std::uint64_t>(epoch));
        double loss_sum = 0.0;
        for (std::int64_t s = 0; s < steps; ++s) {
            const std::int64_t begin = s * global + rank * batch;
            Tensor x = take_rows(train.x, order, begin, begin + batch, device);
            Tensor y = take_rows(train.y, order, begin, begin + batch, device);
            const double local_loss = model.step_gradients(x, y);
            comm.allreduce_(model.grads, ReduceOp::Mean, {"gradients"});
            const std::int64_t step = epoch * steps + s;
            double step_rate = rate;
            if (step < warmup_steps) {  // linear warm-up from the tuned rate
                step_rate = opt.learning_rate +
                            (rate - opt.learning_rate) * static_cast<double>(step) / static_cast<double>(warmup_steps);
            }
            ops::scale_(velocity, opt.momentum);  // velocity = momentum * velocity + gradient
            ops::add_(velocity, model.grads);
            ops::axpy_(-step_rate, velocity, model.params);
            loss_sum += local_loss;
        }
        // Mean training loss over ranks and steps; validation MSE over the whole held-out set, in chunks of one batch
        // so that evaluation needs no more memory than a training step.
        double val_sum = 0.0;
        for (std::int64_t b = 0; b < val_x.size(0); b += batch) {
            const std::int64_t e = std::min(b + batch, val_x.size(0));
            const Tensor pred = model.forward(val_x.narrow_rows(b, e));
            val_sum += ops::mse_loss(pred, val_y.narrow_rows(b, e)).item<double>() * static_cast<double>(e - b);
        }
        Tensor stats = Tensor::from_data<double>({loss_sum / static_cast<double>(steps), val_sum}, {2});
        const double local_val = val_sum / static_cast<double>(val_end - val_begin);
        comm.allreduce_(stats, ReduceOp::Sum, {"epoch losses"});
        const auto totals = stats.to_vector<double>();
        const double train_loss = totals[0] / size, val_loss = totals[1] / static_cast<double>(opt.val_samples);
        train_losses.push_back(train_loss);
        val_losses.push_back(val_loss);
        ++epochs_run;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
        log.info("epoch {:>3}/{}: train loss {:.6f}  val loss {:.6f}  ({:.3f} s)", epoch + 1, opt.epochs, train_loss,
                 val_loss, seconds);
        // The sums above are the agreement: one rank's NaN or infinity makes them non-finite on every rank.
        if (!std::isfinite(train_loss) || !std::isfinite(val_loss)) {
            log.error(
                "training diverged: the loss is not finite in epoch {} (train {}, val {}) at learning rate {:.6g}; "
                "every rank stops. Lower --lr or --max-lr",
                epoch + 1, train_loss, val_loss, rate);
            return 1;
        }

        // Early stopping on each rank's own shard: whichever rank sees no improvement first stops them all.
        if (local_val < best_local_val - 1e-6) {
            best_local_val = local_val;
            epochs_without_improvement = 0;
        } else if (++epochs_without_improvement >= opt.patience) {
            log.info(every_rank, "rank {}: validation loss has not improved for {} epochs; asking every rank to stop",
                     rank, opt.patience);
            set_trigger(comm);
        }
        if (check_trigger(comm, {"early stopping"})) {
            log.info("early stop after epoch {}", epoch + 1);
            break;
        }
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto comm_stats = comm.stats();
    log.info(
        "done: {} epochs, final train loss {:.6f}, val loss {:.6f}, batch {} per process ({} global), {:.2f} s "
        "({:.3f} s per epoch, {:.1f} % of this rank's time in collectives)",
        epochs_run, train_losses.back(), val_losses.back(), batch, global, total, total / epochs_run,
        100.0 * (comm_stats.wait_seconds - wait_before) / std::max(total, 1e-9));
    const std::string report = Runtime::report();
    if (rank == 0 && !opt.losses_file.empty()) {
        std::ofstream out(opt.losses_file);
        out << "# epoch train_loss val_loss (hexadecimal floats: exact)\n";
        for (std::size_t e = 0; e < train_losses.size(); ++e) {
            out << fmt::format("{} {:a} {:a}\n", e + 1, train_losses[e], val_losses[e]);
        }
        if (!out) throw Error(fmt::format("cannot write the losses to {}", opt.losses_file));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    // Every rank parses the same command line; only the main process (known from the launcher's variables before MPI
    // starts) prints help and usage errors, so that N ranks do not print N copies.
    const bool main_process = identity_from_environment().is_main_process();
    auto usage_error = [&](const std::string& message) {
        if (main_process) std::fprintf(stderr, "lockstep_train: %s (see --help)\n", message.c_str());
        return 2;
    };
    Options opt;
    CLI::App app{"lockstep data-parallel training example: a two-layer MLP on a synthetic regression task"};
    app.option_defaults()->always_capture_default();
    app.get_formatter()->column_width(28);
    app.add_option("--epochs", opt.epochs, "Epochs at most");
    app.add_option("--samples", opt.train_samples, "Training samples");
    app.add_option("--val-samples", opt.val_samples, "Validation samples");
    app.add_option("--features", opt.features, "Input features (at least 2)");
    app.add_option("--hidden", opt.hidden, "Hidden units");
    auto* global = app.add_option("--global-batch", opt.global_batch,
                                  "Global batch, split over the processes (default: searched)");
    app.add_option("--batch-size", opt.batch_size, "Per-process batch (default: searched under the memory cap)")
        ->excludes(global);
    app.add_option(
        "--start-batch", opt.start_batch,
        "Per-process batch the search starts from, at most samples / (4 x processes); halved on out of memory");
    app.add_option("--lr", opt.learning_rate, "Learning rate tuned for a global batch of --lr-batch");
    app.add_option("--lr-batch", opt.lr_batch,
                   "Global batch --lr is tuned for: the rate is lr x global batch / lr-batch");
    app.add_option("--max-lr", opt.max_learning_rate, "Ceiling of a rate scaled up");
    app.add_option("--warmup-epochs", opt.warmup_epochs, "Epochs of warm-up from --lr to a rate scaled up");
    app.add_option("--momentum", opt.momentum, "SGD momentum, in [0, 1)");
    app.add_option("--seed", opt.seed, "Seed of data, initialisation and shuffling");
    app.add_option("--patience", opt.patience, "Epochs without improvement before stopping");
    app.add_flag("--debug", opt.debug, "Check every collective's signature across ranks");
    app.add_option("--losses-file", opt.losses_file, "Write per-epoch losses (exact hexadecimal floats) here");
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        if (main_process) std::fputs(app.help().c_str(), stdout);
        return 0;
    } catch (const CLI::ParseError& e) {
        return usage_error(e.what());
    }
    if (const auto error = check(opt)) return usage_error(*error);
    try {
        return run(opt);
    } catch (const UsageError& e) {
        return usage_error(e.what());
    } catch (const Error& e) {
        std::fprintf(stderr, "lockstep_train: %s\n", e.what());
        return 1;
    }
}
