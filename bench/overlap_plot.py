#!/usr/bin/python3
"""Plot of the overlap benchmark: hidden % of the communication against message size.

Usage: /usr/bin/python3 bench/overlap_plot.py [RESULTS_DIR...] [--out docs/images/overlap.png]

Reads RESULTS_DIR/overlap_<n>ranks.csv (written by bench_overlap; columns ranks,bytes,variant,compute,comm_s,
compute_s,overlapped_s,hidden_fraction,calls,reps,oversubscribed) for every rank count present and draws one panel
per compute kind (rows: CPU-bound work, a sleep that leaves the CPU free) and rank count (columns), one line per
variant. The dashed line is the target with the CPU free (80 % hidden from 1 MiB). Given several RESULTS_DIRs (runs
of the same build), each point is the median of the runs and a bar spans their lowest to highest value. With
--markdown PATH it also writes the tables docs/benchmarks.md shows: per rank count and size, each variant's
communication time and hidden % (median of the runs, and their range).
"""
import argparse
import csv
import glob
import os
import re
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

VARIANTS = [
    ("lockstep", "lockstep iallreduce_, progress thread", dict(color="tab:red", marker="o", linewidth=2.2)),
    ("lockstep_arena", "lockstep, progress thread, arena", dict(color="tab:orange", marker="s")),
    ("lockstep_no_thread", "lockstep, no progress thread", dict(color="tab:gray", marker="v", linestyle=":")),
    ("mpi", "raw MPI_Iallreduce + MPI_Wait", dict(color="black", marker="^", linewidth=2.0)),
]
KINDS = [("cpu", "CPU-bound work"), ("sleep", "CPU free (sleep)")]


def size_text(b):
    shift, unit = next(((s, u) for s, u in ((20, "MiB"), (10, "KiB")) if b >= 1 << s), (0, "B"))
    return f"{b >> shift} {unit}"


def load(results_dirs):
    by_ranks = {}
    for results in results_dirs:
        for path in sorted(glob.glob(os.path.join(results, "overlap_*ranks.csv"))):
            if not re.search(r"overlap_\d+ranks\.csv$", path):
                continue
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    by_ranks.setdefault(int(row["ranks"]), []).append(row)
    return by_ranks


def cell(values, digits):
    mid = statistics.median(values)
    if len(values) == 1:
        return f"{mid:.{digits}f}"
    return f"{mid:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def markdown(by_ranks, runs):
    variants = [v for v, _, _ in VARIANTS]
    out = []
    for n in sorted(by_ranks):
        rows = by_ranks[n]
        present = [v for v in variants if any(r["variant"] == v for r in rows)]
        out.append(f"#### {n} ranks\n")
        header = ["size"] + [f"comm µs {v}" for v in present]
        for kind, _ in KINDS:
            header += [f"{kind}: hidden % {v}" for v in present]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---:|" * len(header))
        for b in sorted({int(r["bytes"]) for r in rows}):
            line = [size_text(b)]
            at = [r for r in rows if int(r["bytes"]) == b]
            for v in present:
                line.append(
                    cell([float(r["comm_s"]) * 1e6 for r in at if r["variant"] == v and r["compute"] == "cpu"], 0)
                )
            for kind, _ in KINDS:
                for v in present:
                    hidden = [
                        100 * float(r["hidden_fraction"]) for r in at if r["variant"] == v and r["compute"] == kind
                    ]
                    line.append(cell(hidden, 0))
            out.append("| " + " | ".join(line) + " |")
        out.append("")
    return f"Medians of {runs} run(s), the runs' range in parentheses.\n\n" + "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", default=["bench/results"])
    parser.add_argument("--out", default="docs/images/overlap.png")
    parser.add_argument("--markdown", help="also write the tables of hidden % and communication times here")
    args = parser.parse_args()
    by_ranks = load(args.results)
    if not by_ranks:
        raise SystemExit(f"no overlap_<n>ranks.csv under {' '.join(args.results)}")
    ranks = sorted(by_ranks)
    width = max(10.0, 5.5 * len(ranks))
    fig, axes = plt.subplots(len(KINDS), len(ranks), figsize=(width, 8.0), squeeze=False, sharey=True)
    for col, n in enumerate(ranks):
        rows = by_ranks[n]
        oversubscribed = any(r["oversubscribed"] == "1" for r in rows)
        for row_index, (kind, kind_title) in enumerate(KINDS):
            ax = axes[row_index][col]
            for variant, label, style in VARIANTS:
                runs = {}
                for r in rows:
                    if r["variant"] == variant and r["compute"] == kind:
                        runs.setdefault(int(r["bytes"]), []).append(100 * float(r["hidden_fraction"]))
                if runs:
                    sizes = sorted(runs)
                    mid = [statistics.median(runs[b]) for b in sizes]
                    low = [m - min(runs[b]) for b, m in zip(sizes, mid)]
                    high = [max(runs[b]) - m for b, m in zip(sizes, mid)]
                    ax.errorbar(sizes, mid, yerr=[low, high], label=label, capsize=3, **style)
            if kind == "sleep":
                ax.plot(
                    [1 << 20, 64 << 20],
                    [80, 80],
                    color="tab:green",
                    linestyle="--",
                    linewidth=1,
                    label="target: 80 % from 1 MiB",
                )
            ax.set_xscale("log", base=2)
            sizes = sorted({int(r["bytes"]) for r in rows})
            ax.set_xticks(sizes)
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda b, _: size_text(int(b))))
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.tick_params(axis="x", labelrotation=45)
            ax.set_ylim(-5, 105)
            ax.grid(True, alpha=0.3)
            ax.set_title(f"{kind_title}, {n} ranks" + (" (oversubscribed)" if oversubscribed else ""))
            if col == 0:
                ax.set_ylabel("communication hidden (%)")
            if row_index == len(KINDS) - 1:
                ax.set_xlabel("allreduce size (float32)")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize="small")
    fig.suptitle("Non-blocking allreduce overlapped with computation (bench_overlap)")
    fig.tight_layout(rect=(0, 0.09, 1, 0.96))
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"written {args.out}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(by_ranks, len(args.results)))
        print(f"written {args.markdown}")


if __name__ == "__main__":
    main()
