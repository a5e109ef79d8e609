#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/plot.py — the figures of bench/ and `make demo`, drawn from the CSV
each script writes, so a figure can be redrawn (or a new one made) without
running the measurement again:

    plot.py demo  CSV   seed 000 Table 3: bandwidth against write size,
                        kernel TCP and fabric, with the ratio
    plot.py sock  CSV   every row against kernel TCP (sock.png) and the
                        latency distribution, p50 and p99 per scenario
                        against kernel TCP (sock_latency.png)
    plot.py ipof  CSV   IP over fabric against veth: TCP throughput and
                        ping round trip (ipof.png)
    plot.py shmem CSV   OpenSHMEM against Open MPI: put/get latency and put
                        bandwidth by size (shmem_p2p.png); collectives
                        (shmem.png); seed 002 Figs. 5-7, put/get latency and
                        throughput on a ring against hops and transfer
                        threads, the switch beside it (shmem_ring.png)
    plot.py shmem_hosts CSV  OpenSHMEM across two hosts: 8 B latency and 1 MiB
                        put bandwidth against raw libfabric, collectives of
                        2 hosts x 2 PEs (shmem_hosts.png)

Each PNG goes beside its CSV and names the CPU, the commit and the command
in its footer: from the CSV's commit/machine columns where it has them,
else --cpu/--commit/--command, else this machine and this checkout.  Uses
Debian's python3-matplotlib (scripts/deps.sh); without it, says so and
exits 0 (the CSV is the result, the figure a view of it).
"""
import argparse
import csv
import os
import subprocess
import sys
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------ context

def this_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return "%s, %d CPUs" % (line.split(":", 1)[1].strip(),
                                            os.cpu_count() or 0)
    except OSError:
        pass
    return "unknown CPU"


def this_commit():
    try:
        c = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", HERE, "diff", "--quiet", "HEAD"]).returncode
        return c + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Context:
    """What a figure's footer names: CPU, commit, command."""

    def __init__(self, args, rows=()):
        first = rows[0] if rows else {}
        self.cpu = args.cpu or first.get("machine") or this_cpu()
        self.commit = args.commit or first.get("commit") or this_commit()
        self.command = args.command

    def footer(self, fig, command=None):
        fig.text(0.005, 0.005, "CPU: %s | commit %s | %s"
                 % (self.cpu, self.commit, command or self.command or ""),
                 fontsize=6, color="0.3", ha="left", va="bottom", wrap=True)


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("no figure: python3-matplotlib is missing (scripts/deps.sh installs it)")
        return None


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def save(plt, fig, png):
    fig.savefig(png, dpi=120)
    plt.close(fig)
    print("Figure: %s" % png)


def beside(csv_path, name):
    return os.path.join(os.path.dirname(os.path.abspath(csv_path)), name)


# ------------------------------------------------------------ make demo

def fig_demo(args, plt):
    rows = read_csv(args.csv)
    ctx = Context(args, rows)
    ok = [(int(r["write_bytes"]), num(r["kernel_tcp_MBps"]), num(r["fabric_MBps"]))
          for r in rows if num(r["kernel_tcp_MBps"]) and num(r["fabric_MBps"])]
    if not ok:
        print("no figure: %s has no size measured on both paths" % args.csv)
        return
    xs = [r[0] for r in ok]
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    ax.plot(xs, [r[1] for r in ok], "o-", label="kernel TCP")
    ax.plot(xs, [r[2] for r in ok], "s-", label="ntbx fabric (ntbx run)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("iperf3 write size (bytes, -l)")
    ax.set_ylabel("bandwidth (MB/s, log)")
    ax.grid(True, which="major", alpha=0.3)
    ax2 = ax.twinx()
    ratio = [r[2] / r[1] for r in ok]
    ax2.bar(xs, ratio, width=[x * 0.35 for x in xs], alpha=0.2, color="green",
            label="fabric / kernel TCP")
    for x, r in zip(xs, ratio):
        ax2.annotate("%.1fx" % r, (x, r), fontsize=7, ha="center",
                     textcoords="offset points", xytext=(0, 2), color="darkgreen")
    ax2.set_ylabel("fabric / kernel TCP (bars)")
    ax2.set_ylim(0, max(ratio) * 1.25)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    ax.set_title("Unmodified iperf3 over kernel TCP and over the fabric, by write size\n"
                 "(seed 000, Table 3)", fontsize=10)
    ctx.footer(fig, args.command or "make demo (scripts/demo.sh): iperf3 -c HOST -t SECS -l SIZE, "
               "plain and under ntbx run")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    save(plt, fig, args.png or beside(args.csv, "iperf3-fabric.png"))


# ------------------------------------------------------------ bench/sock.sh

def fig_sock(args, plt):
    rows = [r for r in read_csv(args.csv) if (num(r["ratio"]) or 0) > 0]
    ctx = Context(args, rows)
    if not rows:
        print("no figure: %s has no ratio" % args.csv)
        return
    # every row: how much better than kernel TCP (inverted for latency)
    gain = [num(r["ratio"]) if r["better"] == "higher" else 1 / num(r["ratio"]) for r in rows]
    fig, ax = plt.subplots(figsize=(9.5, 0.32 * len(rows) + 1.8))
    ax.barh(range(len(rows)), gain, color=["#2a7" if g >= 1 else "#c53" for g in gain])
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["bench"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1, color="k", lw=0.8)
    for i, g in enumerate(gain):
        ax.text(g, i, " %.2gx" % g, va="center", fontsize=7)
    ax.set_xlabel("ntbx fabric vs kernel TCP on loopback (higher is better; 1 = parity)")
    ax.set_title("bench/sock.sh: unmodified programs under `ntbx run`")
    ctx.footer(fig, args.command or "bench/sock.sh (each row's command: sock.csv)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save(plt, fig, args.png or beside(args.csv, "sock.png"))

    # latency distribution: p50 and p99 per ping-pong scenario
    lat = OrderedDict()
    for r in rows:
        b = r["bench"]
        if r["metric"] != "latency" or not b.endswith((" p50", " p99")):
            continue
        lat.setdefault(b[:-4].rstrip(","), {})[b[-3:]] = (num(r["kernel_tcp"]), num(r["ntbx_fabric"]))
    lat = OrderedDict((k, v) for k, v in lat.items() if "p50" in v or "p99" in v)
    if not lat:
        return
    names = list(lat)
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(names) + 3), 5))
    w = 0.2
    series = (("p50", 0, "kernel TCP p50", "#9ab"), ("p50", 1, "ntbx fabric p50", "#2a7"),
              ("p99", 0, "kernel TCP p99", "#456"), ("p99", 1, "ntbx fabric p99", "#164"))
    for k, (pct, side, label, col) in enumerate(series):
        xs, ys = [], []
        for i, n in enumerate(names):
            v = lat[n].get(pct)
            if v and v[side]:
                xs.append(i + (k - 1.5) * w)
                ys.append(v[side])
        ax.bar(xs, ys, width=w, color=col, label=label)
        for x, y in zip(xs, ys):
            ax.annotate("%.3g" % y, (x, y), fontsize=6, ha="center",
                        textcoords="offset points", xytext=(0, 1))
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([n.replace("sockperf ", "") for n in names], rotation=20,
                       ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("one-way latency (us, log; lower is better)")
    ax.set_title("sockperf ping-pong 64 B: latency distribution against kernel TCP\n"
                 "(p50 and p99 of each pair, sorted by p99)", fontsize=10)
    ax.legend(fontsize=8)
    ctx.footer(fig, args.command or "bench/sock.sh: ntbx run -- sockperf sr --tcp & "
               "ntbx run -- sockperf pp --tcp -m 64 (and without ntbx run)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save(plt, fig, beside(args.png or args.csv, "sock_latency.png"))


# ------------------------------------------------------------ bench/ipof.sh

def fig_ipof(args, plt):
    rows = read_csv(args.csv)
    ctx = Context(args, rows)
    by = {r["metric"]: r for r in rows}
    panels = [(m, t, u) for m, t, u in (
        ("tcp_gbps_median", "TCP throughput (iperf3 -l 128K)", "Gbit/s, higher is better"),
        ("ping_rtt_us", "round trip (ping -i 0.005)", "us, lower is better"))
        if m in by and num(by[m]["ipof"]) and num(by[m]["veth"])]
    if not panels:
        print("no figure: %s has no ipof/veth pair" % args.csv)
        return
    fig, axs = plt.subplots(1, len(panels), figsize=(4.5 * len(panels) + 1, 4.6))
    axs = axs if len(panels) > 1 else [axs]
    for ax, (m, title, unit) in zip(axs, panels):
        i, v = num(by[m]["ipof"]), num(by[m]["veth"])
        ax.bar([0, 1], [i, v], color=["#2a7", "#789"], width=0.6)
        ax.set_xticks([0, 1])
        ax.set_xticklabels(["IP over fabric\n(ntbx ipof, TUN)", "veth pair\n(kernel, as a NIC)"])
        for x, y in ((0, i), (1, v)):
            ax.annotate("%.3g" % y, (x, y), ha="center", fontsize=8,
                        textcoords="offset points", xytext=(0, 2))
        ax.set_ylabel(unit)
        ax.set_title("%s\nipof / veth = %.2fx" % (title, i / v), fontsize=9)
    fig.suptitle("IP over the fabric against veth between two network namespaces", fontsize=10)
    cmd = args.command or "bench/ipof.sh: " + (by.get("tcp_gbps_median") or rows[0]).get("command", "")
    ctx.footer(fig, cmd)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    save(plt, fig, args.png or beside(args.csv, "ipof.png"))


# ------------------------------------------------------------ bench/shmem.sh

def fig_shmem(args, plt):
    rows = read_csv(args.csv)
    ctx = Context(args, rows)
    med = {(r["test"], r["size"]): r for r in rows}
    drew = False

    # put/get latency and put bandwidth against Open MPI, by size
    p2p = [t for t in ("put_lat", "get_lat", "put_bw") if any(k[0] == t for k in med)]
    if p2p:
        fig, axs = plt.subplots(1, len(p2p), figsize=(4.6 * len(p2p) + 0.5, 4.6))
        axs = axs if len(p2p) > 1 else [axs]
        for ax, t in zip(axs, p2p):
            pts = sorted((int(s), num(r["ntbx"]), num(r["ompi"]))
                         for (tt, s), r in med.items() if tt == t and s.isdigit())
            unit = next(r["unit"] for (tt, _), r in med.items() if tt == t)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "s-", label="ntbx")
            ax.plot([p[0] for p in pts if p[2]], [p[2] for p in pts if p[2]], "o--",
                    label="Open MPI OSHMEM (UCX)")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(unit)
            ax.set_title({"put_lat": "put latency (+ quiet)", "get_lat": "get latency",
                          "put_bw": "put bandwidth"}[t], fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle("OpenSHMEM put/get, 2 PEs: ntbx against Open MPI, median of the launches",
                     fontsize=10)
        ctx.footer(fig, args.command or "bench/shmem.sh: oshrun -n 2 osu p2p 1 "
                   "(bench/shmem/osu.c; Open MPI: oshrun --mca osc ^rdma -n 2 osu p2p 1)")
        fig.tight_layout(rect=(0, 0.04, 1, 0.95))
        save(plt, fig, beside(args.png or args.csv, "shmem_p2p.png"))
        drew = True

    # collectives: ring/switch, and the reductions against Open MPI
    ring = [r for r in rows if r["test"].endswith("_ring")]
    if ring:
        red = lambda t: t.startswith(("redl", "redf", "rall", "inscan", "exscan"))
        fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(13, 11))
        coll = [r for r in ring if not red(r["test"])]
        a1.bar([r["test"][:-5] for r in coll], [num(r["ratio"]) for r in coll], color="tab:blue")
        sc = [r for r in ring if r["test"].startswith(("inscan", "exscan"))]
        a1.bar([r["test"][:-5] for r in sc], [num(r["ratio"]) for r in sc], color="tab:green")
        a1.axhline(2.0, color="red", ls="--", label="target ring <= 2x switch")
        a1.set_ylabel("ring / switch (4 PEs)")
        a1.set_title("collectives and scans, ring of 4 against switch of 4 (ntbx, same run)")
        a1.tick_params(axis="x", rotation=60, labelsize=7)
        a1.legend()
        for t, col, name in (("redl", "tab:blue", "long"), ("redf", "tab:orange", "float")):
            sizes = sorted({int(r["test"].split("_")[1]) for r in rows
                            if r["test"].startswith(t + "_") and r["test"].split("_")[1].isdigit()})
            rr = [num((med.get(("%s_%d_ring" % (t, s), "4")) or {}).get("ratio")) for s in sizes]
            ro = [num((med.get(("%s_%d" % (t, s), "4")) or {}).get("ratio")) for s in sizes]
            a2.plot([s for s, v in zip(sizes, rr) if v], [v for v in rr if v], "o-", color=col,
                    label="%s sum: ring / switch" % name)
            a2.plot([s for s, v in zip(sizes, ro) if v], [v for v in ro if v], "s--", color=col,
                    label="%s sum: ntbx / Open MPI (switch)" % name)
        a2.axhline(2.0, color="red", ls="--")
        a2.axhline(1.0, color="gray", ls=":")
        a2.set_xscale("log", base=2)
        a2.set_xlabel("bytes per PE")
        a2.set_ylabel("ratio")
        a2.set_title("sum_to_all at 4 PEs")
        a2.legend(fontsize=8)
        rall = sorted({r["test"] for r in rows if r["test"].startswith("rall_")
                       and not r["test"].endswith("_ring")},
                      key=lambda t: (int(t.rsplit("_", 1)[1]), t))
        rs = [num((med.get((t + "_ring", "4")) or {}).get("ratio")) or 0 for t in rall]
        ro = [num((med.get((t, "4")) or {}).get("ratio")) or 0 for t in rall]
        x = list(range(len(rall)))
        a3.bar([i - 0.2 for i in x], rs, width=0.4, label="ring / switch")
        a3.bar([i + 0.2 for i in x], ro, width=0.4, label="ntbx / Open MPI (switch)")
        a3.axhline(2.0, color="red", ls="--")
        a3.axhline(1.0, color="gray", ls=":")
        a3.set_xticks(x)
        a3.set_xticklabels([t[5:] for t in rall], rotation=90, fontsize=6)
        a3.set_ylabel("ratio")
        a3.set_title("every *_to_all reduction at 4 PEs, 64 B and 64 KiB")
        a3.legend(fontsize=8)
        fig.suptitle("OpenSHMEM collectives", fontsize=10)
        ctx.footer(fig, args.command or "bench/shmem.sh: oshrun [--topology ring] -n 4 osu "
                   "coll|red|redall|scan (Open MPI: oshrun -n 4)")
        fig.tight_layout(rect=(0, 0.02, 1, 0.97))
        save(plt, fig, beside(args.png or args.csv, "shmem.png"))
        drew = True

    # seed 002 Figs. 5-7: the ring of 5 against hops and transfer threads
    r5 = {}
    for r in rows:
        if r["test"].startswith("ring_") and r["verdict"].startswith("threads="):
            th, hop = (int(p.split("=")[1]) for p in r["verdict"].split())
            r5[(r["test"], r["size"], th, hop)] = num(r["ntbx"])
    if r5:
        ths = sorted({k[2] for k in r5})
        hops = sorted({k[3] for k in r5})
        switch = {"ring_put_lat": num((med.get(("put_lat", "8")) or {}).get("ntbx")),
                  "ring_get_lat": num((med.get(("get_lat", "8")) or {}).get("ntbx")),
                  "ring_put_bw": num((med.get(("put_bw", "1048576")) or {}).get("ntbx"))}
        fig, axs = plt.subplots(1, 3, figsize=(13.5, 4.8))
        for ax, (test, s, u, title) in zip(axs, (
                ("ring_put_lat", "8", "us", "8 B put + quiet (Fig. 5)"),
                ("ring_get_lat", "8", "us", "8 B get (Fig. 6)"),
                ("ring_put_bw", "1048576", "GB/s", "1 MiB put throughput (Fig. 7)"))):
            scale = 1000.0 if u == "GB/s" else 1.0
            for hop, mk in zip(hops, ("o-", "s-", "^-", "v-")):
                pts = [(t, r5.get((test, s, t, hop))) for t in ths]
                pts = [(t, v / scale) for t, v in pts if v is not None]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], mk,
                        label="ring, %d hop%s" % (hop, "s" if hop > 1 else " (neighbour)"))
            if switch[test]:
                ax.axhline(switch[test] / scale, color="0.4", ls="--",
                           label="switch (any PE: 1 hop), 2 PEs")
            if test == "ring_put_lat":
                ax.axhline(5.0, color="C3", ls=":", label="target, 2 hops (5 us)")
            ax.set_xscale("log", base=2)
            ax.set_xticks(ths)
            ax.set_xticklabels([str(t) for t in ths])
            ax.set_xlabel("transfer threads per node")
            ax.set_ylabel(u)
            ax.set_title(title, fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("OpenSHMEM on a ring of 5 PEs against hops and transfer threads, "
                     "the switch beside it (seed 002, Figs. 5-7; medians)", fontsize=10)
        ctx.footer(fig, args.command or "bench/shmem.sh (BENCH_ONLY=ring): oshrun --topology ring "
                   "--threads T -n 5 osu ring HOPS; switch: oshrun -n 2 osu p2p 1")
        fig.tight_layout(rect=(0, 0.04, 1, 0.94))
        save(plt, fig, beside(args.png or args.csv, "shmem_ring.png"))
        drew = True
    if not drew:
        print("no figure: %s has no rows to draw" % args.csv)


# ------------------------------------------------------------ bench/shmem_hosts.sh

def fig_shmem_hosts(args, plt):
    rows = read_csv(args.csv)
    ctx = Context(args, rows)
    v = {(r["test"], r["size"]): num(r["value"]) for r in rows}
    rt = v.get(("raw_pingpong_p50", "8"))
    lat = [(n, v.get((t, "8"))) for n, t in (("put + quiet", "put_lat"),
                                              ("get", "get_lat"),
                                              ("fetch-add", "fadd_lat"))]
    lat = [(n, y) for n, y in lat if y]
    bw = v.get(("put_bw", "1048576"))
    rbw = v.get(("raw_bw", "1048576"))
    coll = [(n, v.get((t, "4"))) for n, t in (("barrier", "barrier"),
                                               ("broadcast 8 B", "bcast_8"),
                                               ("collect 8 B", "collect_8"),
                                               ("reduction 8 B", "reduce_8"))]
    coll = [(n, y) for n, y in coll if y]
    if not lat or not rt:
        print("no figure: %s has no 8 B latency beside the raw peer" % args.csv)
        return
    fig, axs = plt.subplots(1, 3, figsize=(13, 4.6))
    names = [n for n, _ in lat] + ["raw round trip\n(fi_writedata)"]
    ys = [y for _, y in lat] + [2 * rt]
    axs[0].bar(range(len(ys)), ys, color=["#2a7"] * len(lat) + ["#789"])
    axs[0].set_xticks(range(len(ys)))
    axs[0].set_xticklabels(names, fontsize=8)
    for x, y in enumerate(ys):
        axs[0].annotate("%.3g" % y, (x, y), ha="center", fontsize=8,
                        textcoords="offset points", xytext=(0, 2))
    axs[0].set_ylabel("us per operation, lower is better")
    axs[0].set_title("8 B, PE on th0 to PE on th1", fontsize=9)
    if bw and rbw:
        axs[1].bar([0, 1], [bw / 1000, rbw], color=["#2a7", "#789"], width=0.6)
        axs[1].set_xticks([0, 1])
        axs[1].set_xticklabels(["shmem_putmem\n(windows of 64)", "raw fi_write"], fontsize=8)
        for x, y in ((0, bw / 1000), (1, rbw)):
            axs[1].annotate("%.3g" % y, (x, y), ha="center", fontsize=8,
                            textcoords="offset points", xytext=(0, 2))
        axs[1].set_title("1 MiB bandwidth: %.2fx raw" % (bw / 1000 / rbw), fontsize=9)
    axs[1].set_ylabel("GB/s, higher is better")
    if coll:
        axs[2].bar(range(len(coll)), [y for _, y in coll], color="#2a7")
        axs[2].set_xticks(range(len(coll)))
        axs[2].set_xticklabels([n for n, _ in coll], fontsize=8)
        for x, (_, y) in enumerate(coll):
            axs[2].annotate("%.0f" % y, (x, y), ha="center", fontsize=8,
                            textcoords="offset points", xytext=(0, 2))
    axs[2].set_ylabel("us per call, lower is better")
    axs[2].set_title("collectives, 2 hosts x 2 PEs", fontsize=9)
    fig.suptitle("OpenSHMEM across two hosts on the ofi backend (tcp;ofi_rxm), "
                 "beside raw libfabric in the same run", fontsize=10)
    ctx.footer(fig, args.command or "bench/shmem_hosts.sh (each row's command is in the CSV)")
    fig.tight_layout(rect=(0, 0.05, 1, 0.94))
    save(plt, fig, args.png or beside(args.csv, "shmem_hosts.png"))


FIGURES = {"demo": fig_demo, "sock": fig_sock, "ipof": fig_ipof, "shmem": fig_shmem,
           "shmem_hosts": fig_shmem_hosts}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=sorted(FIGURES))
    ap.add_argument("csv")
    ap.add_argument("-o", dest="png", help="the (first) figure's path; others go beside it")
    ap.add_argument("--cpu", help="CPU named in the footer (default: the CSV's, else this one)")
    ap.add_argument("--commit", help="commit named in the footer (default: the CSV's, else HEAD)")
    ap.add_argument("--command", help="command named in the footer")
    args = ap.parse_args()
    if not os.path.exists(args.csv):
        sys.exit("plot.py: no %s" % args.csv)
    plt = pyplot()
    if plt:
        FIGURES[args.kind](args, plt)


if __name__ == "__main__":
    main()
