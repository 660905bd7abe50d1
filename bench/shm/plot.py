#!/usr/bin/python3
"""Plots and tables of the shared-memory benchmark (bench/shm/run.sh calls it).

Usage: /usr/bin/python3 bench/shm/plot.py [RESULTS_DIR] [--images docs/images] [--markdown RESULTS_DIR/tables.md]

Reads every RESULTS_DIR/*.csv written by side_by_side.cpp and side_by_side.py (columns
ranks,op,bytes,variant,seconds_median,seconds_min,iterations,note) and, per op and rank count, draws one PNG with two
log-log panels: median time per call against size for every variant, and the ratio to raw MPI on malloc'ed buffers
(mpi_malloc, from the same C++ run) against size. Images: IMAGES/shm_<op>_<ranks>ranks.png. Also writes the tables
and the verdicts on the targets as Markdown (RESULTS_DIR/tables.md), and train.csv's epoch times when present.
"""
import argparse
import csv
import glob
import os
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

OPS = ["allreduce", "broadcast", "allgather", "reduce_scatter", "reduce"]
# Plot and table order; style per variant.
VARIANTS = [
    ("lockstep_shm", "lockstep, arena", dict(color="tab:red", marker="o", linewidth=2.2)),
    ("lockstep_mpi", "lockstep, MPI path", dict(color="tab:orange", marker="s")),
    ("lockstep_debug", "lockstep, arena, debug mode", dict(color="tab:pink", marker="*")),
    ("lockstep_shm_mt", "lockstep, arena, THREAD_MULTIPLE", dict(color="darkred", marker="o", linestyle=":")),
    ("lockstep_mpi_mt", "lockstep, MPI path, THREAD_MULTIPLE", dict(color="tab:brown", marker="s", linestyle=":")),
    ("mpi_malloc_mt", "MPI C, malloc, THREAD_MULTIPLE", dict(color="dimgray", marker="^", linestyle=":")),
    ("mpi_malloc", "MPI C, malloc", dict(color="black", marker="^", linewidth=2.0)),
    ("mpi_malloc_again", "MPI C, malloc, again (A/A: noise)", dict(color="silver", marker="1", linestyle="--")),
    ("mpi_hugepage", "MPI C, huge pages", dict(color="tab:gray", marker="v")),
    ("mpi4py", "mpi4py (numpy)", dict(color="tab:blue", marker="D")),
    ("torch_gloo", "torch gloo", dict(color="tab:purple", marker="P")),
    ("shm_floor", "floor: minimal shm", dict(color="tab:green", marker="x", linestyle="--")),
    ("memcpy", "floor: memcpy", dict(color="tab:olive", marker=".", linestyle=":")),
]
NAMES = {v: label for v, label, _ in VARIANTS}


def size_text(b):
    if b >= 1 << 20:
        return f"{b >> 20} MiB"
    if b >= 1 << 10:
        return f"{b >> 10} KiB"
    return f"{b} B"


def time_text(s):
    if s is None:
        return "not measured"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.0f} ns"


def load(results):
    """data[(ranks, op)][variant][bytes] = row (dict)."""
    data = {}
    for path in sorted(glob.glob(os.path.join(results, "*.csv"))):
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or "seconds_median" not in reader.fieldnames:
                continue
            for row in reader:
                row["bytes"] = int(row["bytes"])
                row["seconds_median"] = float(row["seconds_median"])
                row["seconds_min"] = float(row["seconds_min"])
                key = (int(row["ranks"]), row["op"])
                data.setdefault(key, {}).setdefault(row["variant"], {})[row["bytes"]] = row
    return data


def paired(row):
    """The C++ run's median of per-batch ratios to mpi_malloc, from the note (None where there is none)."""
    m = re.search(r"paired ratio ([0-9.]+)", row["note"]) if row else None
    return float(m.group(1)) if m else None


def arena_taken(row):
    return row is not None and ("path=arena" in row["note"] or "path=small" in row["note"])


def path_of(row):
    if row is None:
        return "not measured"
    for path in ("small", "arena"):
        if f"path={path}" in row["note"]:
            return path
    return "MPI"


def plot(data, images, prefix="shm"):
    os.makedirs(images, exist_ok=True)
    written = []
    for (ranks, op), variants in sorted(data.items()):
        base = variants.get("mpi_malloc", {})
        oversubscribed = any("oversubscribed" in r["note"] for v in variants.values() for r in v.values())
        fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(13, 5))
        for name, label, style in VARIANTS:
            rows = variants.get(name)
            if not rows:
                continue
            sizes = sorted(rows)
            ax_t.plot(sizes, [rows[b]["seconds_median"] for b in sizes], label=label, **style)
            rs = [b for b in sizes if b in base]
            if name != "mpi_malloc" and rs:
                ax_r.plot(rs, [rows[b]["seconds_median"] / base[b]["seconds_median"] for b in rs], label=label, **style)
            if name == "lockstep_shm":
                # Hollow markers where the arena variant fell back to MPI (tensors under the threshold).
                fell = [b for b in sizes if not arena_taken(rows[b])]
                if fell:
                    ax_t.plot(
                        fell,
                        [rows[b]["seconds_median"] for b in fell],
                        linestyle="none",
                        marker="o",
                        markersize=11,
                        markerfacecolor="none",
                        markeredgecolor="tab:red",
                        label="lockstep, arena: fell back to MPI",
                    )
        ax_r.axhline(1.0, color="black", linewidth=1.0)
        ax_r.axhline(1.05, color="black", linewidth=0.6, linestyle=":")
        title = f"{op}, {ranks} ranks" + (" (oversubscribed: 4 ranks on 2 cores)" if oversubscribed else "")
        ax_t.set(
            xscale="log", yscale="log", xlabel="bytes (whole buffer)", ylabel="median time per call (s)", title=title
        )
        ax_r.set(
            xscale="log",
            yscale="log",
            xlabel="bytes (whole buffer)",
            ylabel="time / raw MPI C on malloc (lower is faster)",
            title=f"{op}, {ranks} ranks: ratio to raw MPI",
        )
        for ax in (ax_t, ax_r):
            ax.grid(True, which="major", alpha=0.3)
            if base:
                ax.set_xticks(sorted(base))
                ax.set_xticklabels([size_text(b) for b in sorted(base)], rotation=30)
                ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax_t.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(images, f"{prefix}_{op}_{ranks}ranks.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def tables(data):
    out = []
    for (ranks, op), variants in sorted(data.items()):
        base = variants.get("mpi_malloc", {})
        present = [(v, NAMES[v]) for v, _, _ in VARIANTS if v in variants]
        oversubscribed = any("oversubscribed" in r["note"] for v in variants.values() for r in v.values())
        out.append(f"#### {op}, {ranks} ranks{' (oversubscribed)' if oversubscribed else ''}\n")
        out.append("Median time per call; in brackets the ratio to raw MPI C on malloc'ed buffers (below 1: faster).\n")
        out.append("| size | " + " | ".join(label for _, label in present) + " | arena path |")
        out.append("|---:|" + "---:|" * len(present) + "---|")
        for b in sorted(base):
            cells = []
            for v, _ in present:
                row = variants[v].get(b)
                if row is None:
                    cells.append("not measured")
                    continue
                ratio = row["seconds_median"] / base[b]["seconds_median"]
                cells.append(time_text(row["seconds_median"]) + ("" if v == "mpi_malloc" else f" ({ratio:.2f})"))
            arena = variants.get("lockstep_shm", {}).get(b)
            path = path_of(arena)
            if arena is not None and "check=WRONG" in arena["note"]:
                path += ", WRONG RESULT"
            out.append(f"| {size_text(b)} | " + " | ".join(cells) + f" | {path} |")
        out.append("")
    return "\n".join(out)


def verdicts(data, ranks=2):
    """The issue's targets on `ranks` ranks, judged on the ratio of medians. Each ratio is followed by the ratio of the
    fastest batches (most of a shared machine's interference filtered out) and, for the arena against raw MPI, the
    median of the per-batch ratios and the A/A ratio of raw MPI against itself in the same row (the row's noise)."""

    def stats(row, base, variants=None, b=None):
        text = (
            f"{row['seconds_median'] / base['seconds_median']:.2f} (fastest "
            f"{row['seconds_min'] / base['seconds_min']:.2f}"
        )
        if paired(row) is not None and base["variant"] == "mpi_malloc":
            text += f", paired {paired(row):.2f}"
        again = (variants or {}).get("mpi_malloc_again", {}).get(b)
        if again is not None:
            text += f", A/A {again['seconds_median'] / base['seconds_median']:.2f}"
        return text + ")"

    lines = [f"Targets ({ranks} ranks):\n"]
    ar = data.get((ranks, "allreduce"), {})
    b64 = 64 << 20
    shm = ar.get("lockstep_shm", {}).get(b64)
    mpi = ar.get("mpi_malloc", {}).get(b64)
    floor = ar.get("shm_floor", {}).get(b64)
    copy = ar.get("memcpy", {}).get(b64)
    if shm is None or mpi is None or not arena_taken(shm):
        lines.append(
            "- 64 MiB allreduce at least 2x faster than MPI_Allreduce: **not measured** (the arena path did " "not run)"
        )
    else:
        speedup = mpi["seconds_median"] / shm["seconds_median"]
        verdict = "met" if speedup >= 2 else "not met"
        lines.append(
            f"- 64 MiB allreduce at least 2x faster than MPI_Allreduce: **{verdict}** — arena "
            f"{time_text(shm['seconds_median'])}, MPI_Allreduce {time_text(mpi['seconds_median'])}: "
            f"{speedup:.2f}x faster (fastest batches {mpi['seconds_min'] / shm['seconds_min']:.2f}x)"
        )
        if floor is not None:
            r = shm["seconds_median"] / floor["seconds_median"]
            lines.append(
                f"- within 1.5x of the floor program: **{'met' if r <= 1.5 else 'not met'}** — minimal shm "
                f"allreduce {time_text(floor['seconds_median'])}, arena / floor = {stats(shm, floor)}"
                + (
                    f"; memcpy of 64 MiB {time_text(copy['seconds_median'])}, arena / memcpy = " f"{stats(shm, copy)}"
                    if copy
                    else ""
                )
            )
    worst, small = [], []
    for op in OPS:
        variants = data.get((ranks, op), {})
        base = variants.get("mpi_malloc", {})
        for b, row in sorted(variants.get("lockstep_shm", {}).items()):
            if b in base:
                item = (row["seconds_median"] / base[b]["seconds_median"], op, b, stats(row, base[b], variants, b))
                worst.append(item)
                if b <= 1 << 10:
                    small.append(item)
    if worst:
        r, op, b, text = max(worst)
        over = [x for x in worst if x[0] > 1.05]
        verdict = "met" if not over else "not met"
        lines.append(
            f"- no size slower than raw MPI by more than 5 %: **{verdict}** — worst {op} {size_text(b)}: "
            f"{text}" + ("; over 1.05: " + ", ".join(f"{o} {size_text(s)} {t}" for _, o, s, t in over) if over else "")
        )
    if small:
        bad = [x for x in small if x[0] > 1.0]
        lines.append(
            f"- small messages (4 B, 1 KiB) no slower than raw MPI: **{'met' if not bad else 'not met'}** — "
            + ", ".join(f"{o} {size_text(s)} {t}" for _, o, s, t in small)
        )
        # Below the threshold the arena variant takes lockstep's MPI path: against that path, what switching the
        # arena on costs by itself.
        own = []
        for op in OPS:
            variants = data.get((ranks, op), {})
            for b in (4, 1 << 10):
                a, m = variants.get("lockstep_shm", {}).get(b), variants.get("lockstep_mpi", {}).get(b)
                if a is not None and m is not None:
                    own.append(
                        f"{op} {size_text(b)} {a['seconds_median'] / m['seconds_median']:.2f} "
                        f"({(a['seconds_median'] - m['seconds_median']) * 1e9:+.0f} ns)"
                    )
        if own:
            lines.append(
                "  - arena switched on against lockstep's MPI path at the same sizes (the same MPI call "
                "underneath): " + ", ".join(own)
            )
    return "\n".join(lines) + "\n"


def train_table(results):
    path = os.path.join(results, "train.csv")
    if not os.path.exists(path):
        return ""
    groups = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            key = (row["config"], row["shm"], row["threshold"])
            groups.setdefault(key, []).append((float(row["seconds_per_epoch"]), float(row["collective_share"])))
    out = [
        "| model | LOCKSTEP_SHM | threshold (bytes) | s per epoch, median | fastest – slowest run | runs | "
        "time in collectives (median) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (config, shm, threshold), runs in groups.items():
        epochs = [r[0] for r in runs]
        share = statistics.median(r[1] for r in runs)
        out.append(
            f"| {config} | {shm} | {threshold} | {statistics.median(epochs):.3f} | "
            f"{min(epochs):.3f} – {max(epochs):.3f} | {len(runs)} | {share:.1f} % |"
        )
    return "\n".join(out) + "\n"


def small_verdicts(data, ranks):
    """The small-message path's targets on `ranks` ranks, on the ratio of medians (MPI_THREAD_SINGLE run)."""
    lines = [f"Small-message targets ({ranks} ranks):\n"]
    for op in OPS:
        variants = data.get((ranks, op), {})
        shm, raw, huge = (variants.get(v, {}) for v in ("lockstep_shm", "mpi_malloc", "mpi_hugepage"))
        debug, memcpy = variants.get("lockstep_debug", {}), variants.get("memcpy", {})
        if not shm or not raw:
            continue
        small = [b for b in sorted(shm) if b <= 4096 and b in raw]
        worst_small = max((shm[b]["seconds_median"] / raw[b]["seconds_median"], b) for b in small) if small else None
        if worst_small:
            ok = "met" if worst_small[0] <= 0.6 else "MISSED"
            lines.append(
                f"- {op}: 4 B-4 KiB at most 0.6x raw MPI: **{ok}** (worst {worst_small[0]:.2f} at "
                f"{size_text(worst_small[1])}; "
                + ", ".join(f"{size_text(b)} {shm[b]['seconds_median'] / raw[b]['seconds_median']:.2f}" for b in small)
                + ")"
            )
        over = []
        for b in sorted(shm):
            best = min(r[b]["seconds_median"] for r in (raw, huge) if b in r)
            ratio = shm[b]["seconds_median"] / best
            if ratio > 1.0:
                over.append(f"{size_text(b)} {ratio:.2f}")
        lines.append(
            f"- {op}: every size at most 1.0x the better raw MPI: **{'met' if not over else 'MISSED'}**"
            + (f" (over at {', '.join(over)})" if over else "")
        )
        big = 64 << 20
        if op in ("broadcast", "allgather") and big in shm and big in memcpy:
            ratio = shm[big]["seconds_median"] / memcpy[big]["seconds_median"]
            lines.append(
                f"- {op}: 64 MiB at most 1.2x the memcpy floor: **{'met' if ratio <= 1.2 else 'MISSED'}** ({ratio:.2f})"
            )
        if 4 in debug and 4 in shm:
            extra = (debug[4]["seconds_median"] - shm[4]["seconds_median"]) * 1e6
            verdict = "met" if extra <= 0.2 else "MISSED"
            lines.append(f"- {op}: debug mode at most +0.2 µs at 4 B: **{verdict}** (+{extra:.2f} µs)")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="bench/shm/results")
    parser.add_argument("--images", default="docs/images")
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--prefix", default="shm", help="image names: PREFIX_<op>_<ranks>ranks.png")
    args = parser.parse_args()
    data = load(args.results)
    if not data:
        print(f"plot.py: no results in {args.results}", file=sys.stderr)
        return 1
    for path in plot(data, args.images, args.prefix):
        print(f"plot.py: {path}", file=sys.stderr)
    text = tables(data) + "\n" + "\n".join(verdicts(data, r) for r in sorted({k[0] for k in data}))
    if any("lockstep_debug" in v for v in data.values()):
        text += "\n" + "\n".join(small_verdicts(data, r) for r in sorted({k[0] for k in data}))
    train = train_table(args.results)
    if train:
        text += "\nTraining example, 2 ranks:\n\n" + train
    md = args.markdown or os.path.join(args.results, "tables.md")
    with open(md, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"plot.py: {md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
