#!/usr/bin/env python3
"""Turns the runner's raw.csv into the results table (stdout), results.csv
and chart.png (with gnuplot, when present).

    python3 bench/report.py bench/results/raw.csv bench/results

A row is (workload, sizes, threads). Per system: the median figure of its
successful runs, their min-max, and the largest peak RSS. The ratio is
libvat's median over the best peer's, turned so that higher is better
(skynet and chain are measured in seconds, the rest in events per second).
A system named libvat@REV (libvat at another revision) counts as a peer, so
`libvat` against `libvat@REV` alone reads as now over then.
"""
import csv
import os
import shutil
import statistics
import subprocess
import sys

SYSTEMS = ["libvat", "go", "erlang", "caf"]
IN_SECONDS = {"skynet", "chain"}


def figure(workload, run):
    key = "seconds" if workload in IN_SECONDS else "rate"
    return float(run[key])


def better(workload, a, b):
    """True when figure a beats figure b."""
    return a < b if workload in IN_SECONDS else a > b


def speedup(workload, mine, theirs):
    """How many times better `mine` is than `theirs`."""
    return theirs / mine if workload in IN_SECONDS else mine / theirs


def human(workload, v):
    if workload in IN_SECONDS:
        return f"{v:.3g}s"
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def summarise(runs):
    """rows: {(workload, sizes, threads): {system: cell}} in run order."""
    rows = {}
    for r in runs:
        key = (r["workload"], r["sizes"], int(r["threads"]))
        rows.setdefault(key, {}).setdefault(r["system"], []).append(r)
    table = {}
    for key, per_system in rows.items():
        workload = key[0]
        cells = {}
        for system, rs in per_system.items():
            # A run too short for the program's printed precision says 0.
            good = [x for x in rs if x["status"] == "ok"
                    and figure(workload, x) > 0]
            rss = [int(x["peak_rss_kb"]) for x in good if x["peak_rss_kb"]]
            if not good:
                if all(x["status"] == "n/a" for x in rs):
                    status = "n/a"
                elif all(x["status"] == "ok" for x in rs):
                    status = "too short"
                else:
                    status = "fail"
                cells[system] = {"status": status}
                continue
            figs = [figure(workload, x) for x in good]
            cells[system] = {
                "status": "ok",
                "median": statistics.median(figs),
                "min": min(figs),
                "max": max(figs),
                "rss_mb": max(rss) / 1024 if rss else None,
                "runs": len(figs),
                "of": len(rs),
            }
        table[key] = cells
    return table


def best_peer(workload, cells):
    best = None
    for system in cells:
        if system == "libvat":
            continue
        c = cells[system]
        if c and c["status"] == "ok":
            if best is None or better(workload, c["median"], cells[best]["median"]):
                best = system
    return best


def ratio(workload, cells):
    mine = cells.get("libvat")
    peer = best_peer(workload, cells)
    if not mine or mine["status"] != "ok" or peer is None:
        return None, peer
    return speedup(workload, mine["median"], cells[peer]["median"]), peer


def cell_text(workload, c):
    if c is None:
        return "-"
    if c["status"] != "ok":
        return c["status"]
    text = human(workload, c["median"])
    if c["runs"] > 1:
        text += f" [{human(workload, c['min'])}-{human(workload, c['max'])}]"
    if c["runs"] < c["of"]:
        text += f" ({c['runs']}/{c['of']} ok)"
    if c["rss_mb"] is not None:
        text += f" {c['rss_mb']:.0f}MB"
    return text


def print_table(table, systems):
    head = ["workload", "sizes", "w"] + systems + ["libvat/best"]
    lines = []
    for (workload, sizes, threads), cells in table.items():
        r, peer = ratio(workload, cells)
        lines.append([workload, sizes, str(threads)]
                     + [cell_text(workload, cells.get(s)) for s in systems]
                     + [f"{r:.2f}x vs {peer}" if r else "-"])
    widths = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
    for line in [head] + lines:
        print("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip())
    print("figures: median [min-max] peak RSS; events/s, or s for "
          + " and ".join(sorted(IN_SECONDS)) + "; ratio > 1: libvat ahead")


def write_csv(table, systems, path):
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        head = ["workload", "sizes", "threads", "unit"]
        for s in systems:
            head += [f"{s}_median", f"{s}_min", f"{s}_max", f"{s}_peak_rss_mb",
                     f"{s}_status"]
        out.writerow(head + ["libvat_ratio", "best_peer"])
        for (workload, sizes, threads), cells in table.items():
            row = [workload, sizes, threads,
                   "s" if workload in IN_SECONDS else "per_s"]
            for s in systems:
                c = cells.get(s)
                if c and c["status"] == "ok":
                    row += [f"{c['median']:.6g}", f"{c['min']:.6g}",
                            f"{c['max']:.6g}",
                            f"{c['rss_mb']:.0f}" if c["rss_mb"] else "",
                            "ok"]
                else:
                    row += ["", "", "", "", c["status"] if c else "not run"]
            r, peer = ratio(workload, cells)
            out.writerow(row + [f"{r:.3f}" if r else "", peer or ""])


def write_chart(table, systems, outdir):
    """One bar group per row: each system's median relative to the best
    peer's (higher is better), on a log scale, so libvat's bar is its
    ratio and the line at 2 is the target."""
    if shutil.which("gnuplot") is None:
        print("no gnuplot: chart left out", file=sys.stderr)
        return
    data = os.path.join(outdir, "chart.dat")
    with open(data, "w") as f:
        f.write("row " + " ".join(systems) + "\n")
        for (workload, sizes, threads), cells in table.items():
            peer = best_peer(workload, cells)
            label = f"{workload} {sizes.replace(' ', 'x')} w{threads}"
            vals = []
            for s in systems:
                c = cells.get(s)
                if peer is None or not c or c["status"] != "ok":
                    vals.append("NaN")
                else:
                    vals.append(f"{speedup(workload, c['median'], cells[peer]['median']):.4g}")
            f.write(f'"{label}" ' + " ".join(vals) + "\n")
    script = f"""
set terminal pngcairo size {max(900, 90 * len(table))},560 font ",10"
set output "{os.path.join(outdir, 'chart.png')}"
set title "Each system relative to the best peer on its row (higher is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.9 border -1
set logscale y 2
set yrange [0.03:*]
set ylabel "figure / best peer's"
set xtics rotate by -35 scale 0
set key outside top center horizontal
set bmargin 7
set grid ytics
set arrow from graph 0, first 2 to graph 1, first 2 nohead dt 2 lc rgb "red"
set label "target 2x" at graph 0.005, first 2 offset 0,1.2 tc rgb "red"
plot for [i=2:{len(systems) + 1}] "{data}" using i:xtic(1) title columnheader(i)
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    except subprocess.CalledProcessError:
        print("gnuplot failed: chart left out", file=sys.stderr)


def main():
    if len(sys.argv) != 3:
        print("usage: report.py RAW.csv OUTDIR", file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[1], newline="") as f:
        runs = list(csv.DictReader(f))
    present = {r["system"] for r in runs}
    systems = [s for s in SYSTEMS if s in present]
    systems += sorted(present - set(SYSTEMS))
    table = summarise(runs)
    print_table(table, systems)
    write_csv(table, systems, os.path.join(sys.argv[2], "results.csv"))
    write_chart(table, systems, sys.argv[2])


if __name__ == "__main__":
    main()
