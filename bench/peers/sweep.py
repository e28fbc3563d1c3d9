#!/usr/bin/env python3
"""Sweeps a peer's knobs: runs each variant in turn, R rounds interleaved
(so a shared machine's drift falls on all alike), and prints a Markdown
table of the medians with [min-max].

    bench/peers/sweep.py -r 3 'cap 4: VATPEER_GO_CAP=4 OUT/ring -w 1 100000 200' \\
                              'cap 64: VATPEER_GO_CAP=64 OUT/ring -w 1 100000 200'

A variant is 'LABEL: COMMAND' (the command runs under sh). The figure is
the RESULT line's rate, or its seconds when it has no rate. A run that
fails (exit status, ok=0, no RESULT) counts as fail.
"""
import argparse
import re
import statistics
import subprocess
import sys


def run(cmd, limit):
    try:
        p = subprocess.run(cmd, shell=True, capture_output=True, text=True,
                           timeout=limit)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines or " ok=0" in lines[-1]:
        return None, "fail"
    kv = dict(f.split("=", 1) for f in lines[-1].split()[1:] if "=" in f)
    if "rate" in kv:
        return float(kv["rate"]), "rate"
    return float(kv["seconds"]), "s"


def fmt(v, unit):
    if unit == "s":
        return f"{v:.3f} s" if v >= 0.1 else f"{v * 1e3:.1f} ms"
    for div, suf in ((1e6, " M"), (1e3, " k")):
        if v >= div:
            return f"{v / div:.3g}{suf}"
    return f"{v:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("-t", type=float, default=120, help="limit per run, s")
    ap.add_argument("variants", nargs="+", help="'LABEL: COMMAND'")
    a = ap.parse_args()
    vs = []
    for v in a.variants:
        label, _, cmd = v.partition(": ")
        vs.append((label, cmd))
    res = {label: [] for label, _ in vs}
    unit = {}
    for r in range(a.r):
        for label, cmd in vs:
            val, u = run(cmd, a.t)
            if val is None:
                res[label].append(u)
            else:
                res[label].append(val)
                unit[label] = u
            print(f"# round {r + 1} {label}: {res[label][-1]}", file=sys.stderr)
    print("| setting | median [min-max] | runs |")
    print("|---|---|---|")
    for label, _ in vs:
        ok = [x for x in res[label] if not isinstance(x, str)]
        bad = [x for x in res[label] if isinstance(x, str)]
        if not ok:
            print(f"| {label} | {bad[0]} | {len(bad)} |")
            continue
        u = unit[label]
        cell = f"{fmt(statistics.median(ok), u)} [{fmt(min(ok), u)}-{fmt(max(ok), u)}]"
        print(f"| {label} | {cell} | {len(ok)}{' (' + ', '.join(bad) + ')' if bad else ''} |")


if __name__ == "__main__":
    main()
