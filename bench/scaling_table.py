#!/usr/bin/env python3
"""bench/scaling_table.py OUT [plot.png] [--label 'BUILD=NAME' ...] — tables from bench/device_scaling.sh's OUT/bench.jsonl
(nibble, each line tagged with its label) and OUT/llama.jsonl (llama-bench): per thread
count, best tok/s of every build and its ratio to llama.cpp Q4_K_M; then the scaling
table (best tok/s by thread count) and decode's fraction of the read bandwidth that
nibble bench measured in the same run at that count. With plot.png and gnuplot: pp512 and
tg128 against threads for every build that ran at two or more counts. --label renames a
build ("nibble amx w4a8.nib=nibble w4a8, tried kernel") in tables and plot."""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def load(path, label_of):
    rows = {}  # (build, threads, test) -> [tok/s]
    extra = {}  # (build, threads) -> (read_bw_gbs, roofline) of the best tg
    if not os.path.exists(path):
        return rows, extra
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        build = label_of(d)
        t = int(d["n_threads"])
        test = "pp%d" % d["n_prompt"] if d["n_prompt"] else "tg%d" % d["n_gen"]
        key = (build, t, test)
        ts = d.get("best_ts", d["avg_ts"])
        rows.setdefault(key, []).append(ts)
        if test.startswith("tg") and "read_bw_gbs" in d:
            old = extra.get((build, t))
            if old is None or ts >= old[2]:
                extra[(build, t)] = (d["read_bw_gbs"], d.get("roofline_fraction", 0), ts)
    return rows, extra


def nibble_label(d):
    f = d["model_filename"].rsplit("/", 1)[-1]
    return "nibble %s %s" % (d.get("label", "?"), f)


def main():
    args, names = [], {}
    argv = sys.argv[1:]
    while argv:
        a = argv.pop(0)
        if a == "--label":
            k, _, v = argv.pop(0).partition("=")
            names[k] = v
        else:
            args.append(a)
    out = args[0]
    label = lambda d: names.get(nibble_label(d), nibble_label(d))
    nb, extra = load(os.path.join(out, "bench.jsonl"), label)
    lc, _ = load(os.path.join(out, "llama.jsonl"), lambda d: "llama.cpp Q4_K_M")
    rows = {**lc, **nb}
    builds = list(dict.fromkeys(k[0] for k in rows))
    counts = sorted({k[1] for k in rows})
    best = {k: max(v) for k, v in rows.items()}
    for t in counts:
        print("\n%d threads\n" % t)
        print("| build | pp512 best (range, n) | tg128 best (range, n) | pp / llama.cpp | tg / llama.cpp | tg read bw GB/s, roofline |")
        print("|---|---|---|---|---|---|")
        for b in builds:
            cells, ratios = [], []
            for test in ("pp512", "tg128"):
                v = rows.get((b, t, test))
                base = best.get(("llama.cpp Q4_K_M", t, test))
                cells.append("%.1f (%.1f-%.1f, %d)" % (max(v), min(v), max(v), len(v)) if v else "-")
                ratios.append("%.2fx" % (max(v) / base) if v and base else "-")
            if cells == ["-", "-"]:
                continue
            e = extra.get((b, t))
            bw = "%.1f, %.0f%%" % (e[0], 100 * e[1]) if e else "-"
            print("| %s | %s | %s | %s | %s | %s |" % (b, cells[0], cells[1], ratios[0], ratios[1], bw))
    print("\nScaling (best tok/s; x = over the smallest count)\n")
    print("| build | test | " + " | ".join("t%d" % t for t in counts) + " |")
    print("|---|---|" + "---|" * len(counts))
    for b in builds:
        for test in ("pp512", "tg128"):
            vals = [best.get((b, t, test)) for t in counts]
            if sum(v is not None for v in vals) < 2:
                continue
            first = next(v for v in vals if v)
            print("| %s | %s | %s |" % (b, test, " | ".join(
                "%.1f (%.1fx)" % (v, v / first) if v else "-" for v in vals)))
    if len(args) > 1:
        plot(args[1], builds, counts, best)


def plot(png, builds, counts, best):
    if not shutil.which("gnuplot"):
        print("plot: gnuplot not found (tools/install-deps.sh installs gnuplot-nox)")
        return
    tmp = tempfile.mkdtemp()
    cmds, panels = [], []
    for test in ("pp512", "tg128"):
        lines = []
        for i, b in enumerate(builds):
            pts = [(t, best[(b, t, test)]) for t in counts if (b, t, test) in best]
            if len(pts) < 2:
                continue
            f = os.path.join(tmp, "%s-%d.dat" % (test, i))
            with open(f, "w") as fh:
                fh.writelines("%d %f\n" % p for p in pts)
            lines.append("'%s' using 1:2 with linespoints title '%s'" % (f, b.replace("_", "\\_")))
        panels.append("set title '%s tok/s'; plot %s" % (test, ", ".join(lines)))
    cmds = ["set terminal png size 1200,500", "set output '%s'" % png, "set multiplot layout 1,2",
            "set logscale xy 2", "set xlabel 'threads'", "set key left top font ',8'",
            "set grid"] + panels + ["unset multiplot"]
    subprocess.run(["gnuplot"], input="\n".join(cmds), text=True, check=True)
    shutil.rmtree(tmp)
    print("\nplot: %s" % png)


if __name__ == "__main__":
    main()
