#!/usr/bin/env python3
"""make bench: turn the guest runner's lines into build/bench/results.{md,json}.

    bench-report.py RAW_LOG SPLATS MD_OUT JSON_OUT

Medians over rounds; "added" is a tool's median minus the no-probe median of the
same workload; "action/probe" is (pair - empty) / (empty - none) of one tool.
Targets are printed as met or not, never enforced.

The read loops' figures are calibrated: oxt_bench prices each run's read()s in
pread()s timed in blocks between them (per_cal), and the report scales that by one
reference per workload for the boot (the 10th percentile of the runs' cal_ns),
so that the host's changes of speed during the boot cancel out. The raw figures
stay in the JSON (raw_ns) and their spread is printed.
"""
import json
import os
import re
import statistics
import sys

raw, splats, md_out, json_out = sys.argv[1:5]
kv = re.compile(r"(\w+)=(\S+)")
res, notes, keys, dyn, clean, attach, mem, scaleatt = [], [], [], [], [], [], [], []
aggbench = []
prof, cur = [], None
for line in open(raw, errors="replace"):
    line = line.rstrip("\r\n")
    if line.startswith("PROF-BEGIN "):
        cur = {"tool": line.split()[1], "pair": line.split()[2], "lines": []}
        continue
    if line.startswith("PROF-END"):
        if cur:
            prof.append(cur)
        cur = None
        continue
    if cur is not None:
        cur["lines"].append(line.strip())
        continue
    if line.startswith("RES "):
        d = dict(kv.findall(line))
        try:
            d["ns"] = float(d["ns"])
        except (KeyError, ValueError):
            continue
        res.append(d)
    elif line.startswith("AGGBENCH "):
        aggbench.append(line[9:])
    elif line.startswith("NOTE "):
        notes.append(line[5:])
    elif line.startswith(("KEYS ", "DYN ", "CLEAN ", "ATTACH ", "MEM ", "SCALEATT ")):
        d = dict(kv.findall(line))
        {"KEYS": keys, "DYN": dyn, "CLEAN": clean, "ATTACH": attach, "MEM": mem,
         "SCALEATT": scaleatt}[line.split()[0]].append(d)

# Under -icount the guest's clock counts its instructions: nothing to calibrate.
icount = os.environ.get("OXT_BENCH_ICOUNT", "") not in ("", "0")
cals = {}
for r in res if not icount else []:
    if "cal_ns" in r and "per_cal" in r:
        cals.setdefault(r.get("wl"), []).append(float(r["cal_ns"]))
# The 10th percentile: the host at its faster speed, of which the slow one is 1.8x.
cal_ref = {wl: sorted(v)[len(v) // 10] for wl, v in cals.items()}
for r in res:
    r["raw_ns"] = r["ns"]
    if r.get("wl") in cal_ref and "per_cal" in r:
        r["ns"] = float(r["per_cal"]) * cal_ref[r["wl"]]

WLS = [("1t", "read loop, 1 thread"), ("4t", "read loop, 4 threads"),
       ("lat", "16 KiB read (latency), 1 thread"),
       ("cpu", "CPU-bound loop, 4 threads, per block of 100 000 iterations"),
       ("u1t", "user function calls, 1 thread"), ("u4t", "user function calls, 4 threads"),
       ("s1t", "USDT site passes, 1 thread"), ("s4t", "USDT site passes, 4 threads")]
PAIRS = ["empty", "count", "hist", "sum", "trace", "ten", "sysread", "profile", "upid",
         "usdt"]
DESC = {
    "empty": ("fbt::ksys_read:entry /0/ { }", "kprobe:ksys_read { }", "kfunc:ksys_read { }"),
    "count": ("@[pid] = count()", "@[pid] = count()", "@[pid] = count()"),
    "hist": ("self->ts + quantize", "@start[tid] + hist", "kretfunc: @start[tid] + hist"),
    "sum": ("@s = sum(arg0)", "@s = sum(arg0)", "@s = sum(args->fd)"),
    "trace": ("trace(pid)", "printf(\"%d\\n\", pid)", "printf(\"%d\\n\", pid)"),
    "ten": ("10 clauses @cN = count() on one probe", "10 blocks @cN = count()",
            "10 kfunc: blocks @cN = count()"),
    "sysread": ("syscall::read:entry @[pid] = count()",
                "tracepoint:syscalls:sys_enter_read @[pid] = count()",
                "kfunc:__x64_sys_read @[pid] = count()"),
    "profile": ("profile-997 @[cpu] = count()", "profile:hz:997 @[cpu] = count()"),
    "upid": ("pid$target:a.out:oxt_ucall:entry @ = count()",
             "uprobe:BIN:oxt_ucall @ = count()"),
    "usdt": ("oxtbench$target:::tick @ = count()", "usdt:BIN:oxtbench:tick @ = count()"),
}


def med(pair, tool, wl):
    v = [r["ns"] for r in res if r.get("pair") == pair and r.get("tool") == tool
         and r.get("wl") == wl]
    return (statistics.median(v), len(v)) if v else (None, 0)


def fmt(x, p=0):
    return "-" if x is None else f"{x:.{p}f}"


data = {"workloads": {}, "targets": [], "notes": notes}
TOOLS = ["oxtrace", "oxtrace-o2", "bpftrace", "bpftrace-kfunc"]
SHORT = {"oxtrace": "ox", "oxtrace-o2": "o2", "bpftrace": "bt", "bpftrace-kfunc": "bk"}
# scripts/bench.sh names the module of the o2 column when BENCH_VARIANT_KO gave it.
variant = os.environ.get("OXT_BENCH_VARIANT", "")
o2_desc = (f"o2 = the module BENCH_VARIANT_KO gave ({variant}), in the same boot"
           if variant else
           "o2 = a second build with KRUSTFLAGS=-Copt-level=2 (the same code: the two "
           "columns show run-to-run noise)")
data["o2"] = variant or "same code"
unit = ("ns per call (median over rounds; per thread for 4 threads)" if not icount else
        "guest instructions per call (QEMU's -icount shift=0: the guest's clock advances one "
        "nanosecond per instruction executed, so a read loop's ns per call are its "
        "instructions per call, whatever the host does; median over rounds, which agree to "
        "within the spread printed below)")
md = ["# oxtrace vs bpftrace (make bench)" if not icount else
      "# oxtrace vs bpftrace in instructions (make bench, second boot under -icount)", "",
      f"{unit}. ox = oxtrace.ko as "
      f"shipped (Kbuild builds its Rust at -Copt-level=2), {o2_desc}, "
      "bt = bpftrace on kprobe:/kretprobe: (tracepoint: for sysread, uprobe:/usdt: for the "
      "user-space pairs), bk = bpftrace on kfunc:/kretfunc: (BPF trampolines; the same "
      "program, kfunc:__x64_sys_read for sysread). added = median - no-probe median; "
      "x/bt, x/bk = added / bpftrace's added; act/probe = (pair - empty) / (empty - none) "
      "of the same tool.", "",
      "Pairs: " + ", ".join(f"{p}: `{d[0]}` vs `{d[1]}`" + (f" and `{d[2]}`" if len(d) > 2 else
                                                        " (no kfunc variant)")
                          for p, d in DESC.items()) + ".", ""]


def spread(v):
    return f"{min(v):.0f}-{max(v):.0f}" if v else "-"


if cal_ref:
    data["cal_ref_ns"] = cal_ref
    md += ["Read loops calibrated: a read() costs per_cal pread()s of the same file and size, "
           "timed in blocks between its blocks of calls (oxt_bench; pread() takes the kernel's "
           "path without ksys_read, where the probes are); ns = per_cal times the boot's "
           "reference pread() (" + ", ".join(f"{wl} {v:.0f} ns" for wl, v in cal_ref.items())
           + "), so that the host's changes of speed cancel out (the reference is the runs' "
           "10th percentile, the faster speed). The sysread pair's hook is on every system "
           "call's entry, pread()'s too, so its added cost is understated for both tools. "
           "No-probe runs, raw against calibrated ns: " + "; ".join(
               f"{wl} {spread([r['raw_ns'] for r in rs])} against "
               f"{spread([r['ns'] for r in rs])}"
               for wl in ("1t", "4t", "lat")
               for rs in [[r for r in res if r.get("pair") == "none" and r.get("wl") == wl]]
               if rs) + ".", ""]
if icount:
    # The vCPUs take turns on one host thread and advance one clock, so a loop's count
    # includes what the other CPUs ran meanwhile: a consumer formatting records (trace)
    # adds its own instructions, as many as it happens to run during the loop.
    def rounds_spread(wl, consumer):
        by = {}
        for r in res:
            if r.get("wl") == wl and (r.get("pair") == "trace") == consumer:
                by.setdefault((r.get("pair"), r.get("tool")), []).append(r["ns"])
        return max(((max(v) - min(v)) / min(v) for v in by.values() if min(v) > 0),
                   default=0.0)
    wls = [wl for wl in ("1t", "lat") if any(r.get("wl") == wl for r in res)]
    sp = {wl: rounds_spread(wl, False) for wl in wls}
    spt = {wl: rounds_spread(wl, True) for wl in wls}
    data["icount_spread"] = sp
    data["icount_spread_trace"] = spt
    md += ["Largest spread between rounds of one tool and pair: " + ", ".join(
        f"{wl} {100 * v:.2f} %" for wl, v in sp.items()) + "; `trace` " + ", ".join(
        f"{wl} {100 * v:.0f} %" for wl, v in spt.items()) + ": the four vCPUs advance one "
        "clock, so `trace`'s loop also counts its consumer's instructions, as many as it "
        "runs during the loop, and is not a per-firing figure. Instructions are not time: "
        "under TCG or on hardware an instruction's price varies (a cache miss, a locked "
        "instruction, a mispredicted branch); the timed boot above prices them, this one "
        "counts them without the host's noise.", ""]
for wl, wdesc in WLS:
    base, nb = med("none", "none", wl)
    if base is None:
        continue
    w = {"none_ns": base, "none_runs": nb, "pairs": {}}
    u = "ins" if icount else "ns"
    md += [f"## {wdesc} (no probe: {base:.0f} {u}, {nb} runs)", "",
           f"| pair | ox {u} | o2 {u} | bt {u} | bk {u} | ox added | o2 added | bt added "
           "| bk added | ox/bt | o2/bt | ox/bk | o2/bk | ox act/probe | o2 act/probe "
           "| bt act/probe | bk act/probe | runs ox/o2/bt/bk |",
           "|---|" + "---:|" * 16 + "---|"]
    empty = {t: med("empty", t, wl)[0] for t in TOOLS}
    for p in PAIRS:
        m = {t: med(p, t, wl) for t in TOOLS}
        if all(v is None for v, _ in m.values()):
            continue
        e = {}
        for t in TOOLS:
            v = m[t][0]
            added = None if v is None else v - base
            eb = empty[t]
            act = None
            if p != "empty" and v is not None and eb is not None and eb - base > 0:
                act = (v - eb) / (eb - base)
            e[t] = {"ns": v, "added_ns": added, "action_over_probe": act, "runs": m[t][1]}
        bta = e["bpftrace"]["added_ns"]
        bka = e["bpftrace-kfunc"]["added_ns"]
        for t in ("oxtrace", "oxtrace-o2"):
            a = e[t]["added_ns"]
            e[t]["over_bpftrace"] = a / bta if a is not None and bta else None
            e[t]["over_bpftrace_kfunc"] = a / bka if a is not None and bka else None
        w["pairs"][p] = e
        md.append(f"| {p} | " + " | ".join(fmt(e[t]["ns"]) for t in TOOLS) + " | "
                  + " | ".join(fmt(e[t]["added_ns"]) for t in TOOLS) + " | "
                  + f"{fmt(e['oxtrace']['over_bpftrace'], 2)} | "
                  + f"{fmt(e['oxtrace-o2']['over_bpftrace'], 2)} | "
                  + f"{fmt(e['oxtrace']['over_bpftrace_kfunc'], 2)} | "
                  + f"{fmt(e['oxtrace-o2']['over_bpftrace_kfunc'], 2)} | "
                  + " | ".join(fmt(e[t]["action_over_probe"], 2) for t in TOOLS) + " | "
                  + "/".join(str(e[t]["runs"]) for t in TOOLS) + " |")
    md.append("")
    data["workloads"][wl] = w


def paired(pair, wl):
    """ox's added cost over o2's, round by round: each against the no-probe run of its own
    round. Medians over rounds set apart what happened to land in different rounds; the
    ratio within a round does not."""
    def by_round(p, t):
        return {r.get("round"): r["ns"] for r in res
                if r.get("pair") == p and r.get("tool") == t and r.get("wl") == wl}
    none, ox, o2 = by_round("none", "none"), by_round(pair, "oxtrace"), by_round(pair, "oxtrace-o2")
    q = []
    for rnd in sorted(set(ox) & set(o2) & set(none)):
        a, b = ox[rnd] - none[rnd], o2[rnd] - none[rnd]
        if b > 0:
            q.append((a / b, a < b))
    return q


rows = []
for wl in ("1t", "4t", "lat"):
    for p in PAIRS:
        q = paired(p, wl)
        if not q:
            continue
        ratios = [x for x, _ in q]
        data.setdefault("ox_over_o2", {}).setdefault(wl, {})[p] = ratios
        rows.append(f"| {p} | {wl} | {statistics.mean(ratios):.2f} | {min(ratios):.2f}-"
                    f"{max(ratios):.2f} | {sum(c for _, c in q)} of {len(q)} |")
if rows:
    md += ["## ox against o2, round by round", "",
           "ox's added ns over o2's within each round, each against its round's no-probe "
           "run: the mean and range of those ratios, and the rounds in which ox was the "
           "cheaper. "
           + ("A pair whose code the two modules share shows the noise of this boot."
              if variant else "The same code twice: this is the noise of this boot."), "",
           "| pair | wl | mean ox/o2 | range | ox cheaper |", "|---|---|---:|---|---|"]
    md += rows + [""]


def target(name, wl, pair, key, limit):
    rows = []
    for t in ("oxtrace", "oxtrace-o2"):
        v = data["workloads"].get(wl, {}).get("pairs", {}).get(pair, {}).get(t, {}).get(key)
        if v is None:
            continue
        data["targets"].append({"target": name, "module": t, "workload": wl, "value": v,
                                "limit": limit, "met": None if v is None else v <= limit})
        state = "n/a" if v is None else ("met" if v <= limit else "NOT met")
        rows.append(f"| {name} | {SHORT[t]} | {wl} | {fmt(v, 2)} | ≤ {limit} | {state} |")
    return "\n".join(rows)
# The scale section: one firing of the count pair with N functions attached (pair scaleN,
# 1-thread loop), and attaching and detaching N functions.
scale_ns = sorted({int(r["pair"][5:]) for r in res
                   if r.get("pair", "").startswith("scale") and r["pair"][5:].isdigit()})
scale = {}
for n in scale_ns:
    base = data["workloads"].get("1t", {}).get("none_ns")
    for t in ("oxtrace", "bpftrace"):
        v, k = med(f"scale{n}", t, "1t")
        scale.setdefault(t, {})[n] = {"ns": v, "runs": k,
                                      "added_ns": None if v is None or base is None
                                      else v - base}
for t, by in scale.items():
    one = by.get(min(by)) if by else None
    for n, e in by.items():
        e["over_one"] = (e["added_ns"] / one["added_ns"]
                         if one and e["added_ns"] is not None and one["added_ns"] else None)
if scale:
    data["scale"] = scale
att = {}
for d in scaleatt:
    try:
        n, t = int(d["n"]), d["tool"]
        att.setdefault(t, {}).setdefault(n, []).append(
            (int(d["attach_us"]) / 1000, int(d["detach_ms"]), int(d.get("probes") or 0)))
    except (KeyError, ValueError):
        continue
att_med = {t: {n: (statistics.median(a for a, _, _ in v), statistics.median(b for _, b, _ in v),
                   max(p for _, _, p in v), len(v)) for n, v in by.items()}
           for t, by in att.items()}
if att_med:
    data["scale_attach"] = {t: {n: {"attach_ms": a, "detach_ms": b, "probes": p, "runs": k}
                                for n, (a, b, p, k) in by.items()} for t, by in att_med.items()}
memkb = {}
for d in mem:
    try:
        memkb.setdefault(d["tool"], []).append(int(d["kb"]))
    except (KeyError, ValueError):
        continue
if memkb:
    data["memory_kb"] = memkb


def addt(*a):
    row = target(*a)
    if row:
        md.append(row)


md += ["## Targets (printed, not enforced)", "",
       "| target | module | workload | measured | limit | |", "|---|---|---|---:|---:|---|"]
# Every pair against bpftrace's kprobe/tracepoint/uprobe program (0.8) and its kfunc
# program (1.0), on 1 and 4 threads and the 16 KiB read.
for p in ("empty", "count", "sum", "hist", "trace", "ten", "sysread"):
    for wl in ("1t", "4t", "lat"):
        addt(f"{p}: / bpftrace kprobe{'/tracepoint' if p == 'sysread' else ''}",
             wl, p, "over_bpftrace", 0.8)
    for wl in ("1t", "4t", "lat"):
        addt(f"{p}: / bpftrace kfunc", wl, p, "over_bpftrace_kfunc", 1.0)
for wl in ("u1t", "u4t"):
    addt("upid: / bpftrace uprobe", wl, "upid", "over_bpftrace", 0.8)
for wl in ("s1t", "s4t"):
    addt("usdt: / bpftrace usdt", wl, "usdt", "over_bpftrace", 0.8)
for p in ("count", "sum", "trace"):
    for wl in ("1t", "4t"):
        addt(f"{p} action / bare hook (act/probe)", wl, p, "action_over_probe", 0.25)


def plain(name, value, limit, met, prec=2):
    data["targets"].append({"target": name, "value": value, "limit": limit, "met": met})
    state = "n/a" if met is None else ("met" if met else "NOT met")
    return f"| {name} | ox | - | {fmt(value, prec)} | {limit} | {state} |"


ox_scale = scale.get("oxtrace", {})
if ox_scale and max(ox_scale) > min(ox_scale):
    e = ox_scale[max(ox_scale)]
    v = e["over_one"]
    md.append(plain(f"firing with {max(ox_scale)} attached / with {min(ox_scale)}", v,
                    "≤ 1.1", None if v is None else v <= 1.1))
for n, (a, b, _, _) in sorted(att_med.get("oxtrace", {}).items()):
    bt = att_med.get("bpftrace", {}).get(n)
    for what, v, w in (("attach", a, bt[0] if bt else None), ("detach", b, bt[1] if bt else None)):
        met = v <= 1000 and (w is None or v <= w)
        md.append(plain(f"{what} {n} functions, ms (≤ 1000 and ≤ bpftrace's"
                        f" {fmt(w, 0)})", v, "≤ 1000", met, 0))
if memkb.get("oxtrace"):
    o = statistics.median(memkb["oxtrace"])
    b = statistics.median(memkb["bpftrace"]) if memkb.get("bpftrace") else None
    md.append(plain(f"kernel memory of the count pair, KiB (≤ bpftrace's {fmt(b, 0)})", o,
                    "≤ bt", None if b is None else o <= b, 0))
md.append("")

if scale:
    base = data["workloads"].get("1t", {}).get("none_ns")
    u = "ins" if icount else "ns"
    md += ["## Scale: one firing with N functions attached", "",
           "The count pair on ksys_read (1-thread read loop) with N - 1 cold functions attached "
           "beside it by one clause (`@cold = count()`): whole groups of traceable functions "
           "sharing a name prefix, none of which ran under the function tracer during the "
           "loop, one wildcard per group (oxtrace `fbt::PREFIX*:entry`, bpftrace "
           "`kprobe:PREFIX*`, one kprobe_multi link each). x1 = added cost over the same "
           f"tool's with one function. No probe: {fmt(base)} {u}.", "",
           f"| N | ox {u} | ox added | ox x1 | bt {u} | bt added | bt x1 | ox/bt | runs ox/bt |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for n in scale_ns:
        o, b = scale.get("oxtrace", {}).get(n, {}), scale.get("bpftrace", {}).get(n, {})
        r = (o["added_ns"] / b["added_ns"] if o.get("added_ns") is not None
             and b.get("added_ns") else None)
        md.append(f"| {n} | {fmt(o.get('ns'))} | {fmt(o.get('added_ns'))} | "
                  f"{fmt(o.get('over_one'), 2)} | {fmt(b.get('ns'))} | {fmt(b.get('added_ns'))} "
                  f"| {fmt(b.get('over_one'), 2)} | {fmt(r, 2)} | {o.get('runs', 0)}/"
                  f"{b.get('runs', 0)} |")
    md.append("")
if att_med:
    md += ["## Scale: attaching and detaching N functions", "",
           "The cold groups alone, a clause without action. Attach: oxtrace's LOAD ioctl (every "
           "probe registered), as the tool times it; bpftrace's `Attaching N probes` line to "
           "its BEGIN probe's output (run once every probe is attached), lines polled every "
           "20 ms. Detach: SIGINT to the tool's exit. Medians, ms (under -icount, millions "
           "of instructions). probes: what each tool reports (bpftrace counts a kprobe_multi "
           "link as one probe).", "",
           "| N | ox attach | ox detach | ox probes | bt attach | bt detach | bt probes | runs |",
           "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for n in sorted({n for by in att_med.values() for n in by}):
        o = att_med.get("oxtrace", {}).get(n, (None, None, None, 0))
        b = att_med.get("bpftrace", {}).get(n, (None, None, None, 0))
        md.append(f"| {n} | {fmt(o[0], 1)} | {fmt(o[1])} | {o[2] if o[2] is not None else '-'} "
                  f"| {fmt(b[0], 1)} | {fmt(b[1])} | {b[2] if b[2] is not None else '-'} "
                  f"| {o[3]}/{b[3]} |")
    md.append("")
if memkb:
    md += ["## Kernel memory of the count pair", "",
           "At default options, the tool ready and the 1-thread loop run once: /proc/meminfo's "
           "used memory less page cache, user pages, page tables, kernel stacks and "
           "reclaimable slab (what the tools' processes and the files they read hold), "
           "after `vm/stat_refresh`, against the same just before the tool started. oxtrace: "
           "its session's buffers and tables; bpftrace: its maps, perf buffers, programs "
           "and BTF.", "",
           "| tool | median KiB | runs KiB |", "|---|---:|---|"]
    for t in ("oxtrace", "bpftrace"):
        if memkb.get(t):
            md.append(f"| {t} | {statistics.median(memkb[t]):.0f} | "
                      f"{', '.join(str(k) for k in memkb[t])} |")
    md.append("")


# The providers' pairs: the hook every system call passes, and sampling every CPU.
prov = []
for pair, wls in (("sysread", ("1t", "4t")), ("profile", ("cpu",))):
    for wl in wls:
        e = data["workloads"].get(wl, {}).get("pairs", {}).get(pair)
        if not e:
            continue
        base = data["workloads"][wl]["none_ns"]
        share = " ".join(
            f"{SHORT[t]} {100 * e[t]['added_ns'] / base:.2f} %" for t in ("oxtrace", "bpftrace")
            if e[t]["added_ns"] is not None)
        prov.append(f"| {pair} | {wl} | {fmt(e['oxtrace']['added_ns'])} | "
                    f"{fmt(e['bpftrace']['added_ns'])} | {fmt(e['oxtrace']['over_bpftrace'], 2)} "
                    f"| {share} |")
if prov:
    md += ["## Providers: syscall and profile", "",
           "sysread: `syscall::read:entry` against bpftrace's read tracepoint, on the read "
           "loops; profile: `profile-997` against `profile:hz:997`, what sampling every CPU "
           "at 997 Hz adds to a CPU-bound loop on all four CPUs.", "",
           "| pair | wl | ox added ns | bt added ns | ox/bt | added / no-probe |",
           "|---|---|---:|---:|---:|---|"] + prov + [""]


def timed(runs, count):
    """The microseconds of each run, its `count` column and the median in ms."""
    us = [int(r["us"]) for r in runs if r.get("us")]
    n = [int(r[count]) for r in runs if r.get(count)]
    return {"us": us, count: n, "median_ms": statistics.median(us) / 1000 if us else None}


def ms_list(us):
    return ", ".join(f"{u / 1000:.1f}" for u in us)


if keys:
    data["snapshot_merge"] = sm = timed(keys, "keys")
    us, nk = sm["us"], sm["keys"]
    if us:
        # Under -icount a guest millisecond is a million instructions.
        clock = (" of the -icount clock (millions of instructions; the timed boot prices "
                 "them)" if icount else "")
        md += ["## Aggregation snapshot + merge", "",
               f"End-of-run snapshot of every CPU + merge into the tool's table, {max(nk)} keys: "
               f"median {sm['median_ms']:.1f} ms{clock} (runs: {ms_list(us)} ms); "
               f"target ≤ 150 ms: "
               f"{'met' if statistics.median(us) <= 150000 else 'NOT met'}. Of that, the "
               f"AGGSNAP ioctls (the kernel's part): "
               f"{', '.join(k.get('ioctl_us', '-') for k in keys)} us; the merge into the "
               f"table: {', '.join(k.get('merge_us', '-') for k in keys)} us. Then sorting "
               f"and formatting the output (not in the figure): "
               f"{', '.join(k.get('print_us', '-') for k in keys)} us.", ""]
        data["targets"].append({"target": "snapshot + merge ms", "limit": 150,
                                "value": statistics.median(us) / 1000,
                                "met": statistics.median(us) <= 150000})
        pus = [int(k["print_us"]) for k in keys if k.get("print_us")]
        if pus:
            md += [f"print {max(nk) // 1000}k keys (sort, format, write to /dev/null): "
                   f"median {statistics.median(pus) / 1000:.1f} ms (runs: {ms_list(pus)} ms).", ""]
            data["print_keys_ms"] = [u / 1000 for u in pus]
if aggbench:
    md += ["## The tool's merge and output (oxt-aggbench, guest CPU time)", ""]
    md += [f"- {a}" for a in aggbench] + [""]
    data["aggbench"] = aggbench

if attach:
    data["attach"] = at = timed(attach, "probes")
    us, npr = at["us"], at["probes"]
    if us:
        md += ["## Attaching probes", "",
               f"LOAD of one clause on {max(npr)} fbt entry probes (spread over the kernel's "
               f"functions), timed around the ioctl: median {at['median_ms']:.1f} ms "
               f"(runs: {ms_list(us)} ms).", ""]

ten = data["workloads"].get("1t", {}).get("pairs", {}).get("ten")
if ten:
    md += ["## Ten clauses on one probe", "",
           "Per firing of `ksys_read` with ten `@cN = count()` clauses (1 thread): "
           + ", ".join(f"{SHORT[t]} added {fmt(ten[t]['added_ns'])} {'instructions' if icount else 'ns'}"
                       for t in ("oxtrace", "bpftrace") if ten.get(t))
           + ".", ""]


def ops(d):
    try:
        return (int(d["allocs"]) + int(d["frees"])) / (int(d["elapsed_ns"]) / 1e9)
    except (KeyError, ValueError, ZeroDivisionError):
        return None


if dyn:
    th = [o for o in (ops(d) for d in dyn) if o]
    data["dynvar"] = {"runs": dyn, "alloc_free_per_s": th}
    if th:
        md += ["## Dynamic variables", "",
               f"`self->ts` set at entry, zeroed at return, 4 threads, default dynvarsize and "
               f"cleanrate: alloc+free throughput median {statistics.median(th) / 1e6:.2f} M/s "
               f"(whole workload wall time, {len(th)} runs).", ""]
    md += ["| run | allocs | frees | drops | cleaner runs | passes | chunks |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for d in dyn:
        md.append(f"| {d.get('round', '?')} | " + " | ".join(
            d.get(k, "-") for k in ("allocs", "frees", "drops", "runs", "passes", "chunks"))
            + " |")
    md.append("")
    drops = [int(d["drops"]) for d in dyn if d.get("drops", "").isdigit()]
    data["targets"].append({"target": "dynvar drops, default sizes, 4 threads",
                            "value": max(drops) if drops else None, "limit": 0,
                            "met": (max(drops) == 0) if drops else None})
    if drops:
        md += [f"Target 0 drops in every run: {'met' if max(drops) == 0 else 'NOT met'} "
               f"(most in a run: {max(drops)}).", ""]
if clean:
    data["cleanrate"] = clean
    md += ["Drops against `cleanrate` with `dynvarsize=256k`:", "",
           "| cleanrate | cleaner period | allocs | drops | drop rate | cleaner runs | passes |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for c in clean:
        try:
            a, d = int(c["allocs"]), int(c["drops"])
            rate = f"{100 * d / (a + d):.2f} %" if a + d else "-"
        except (KeyError, ValueError):
            a = d = rate = "-"
        md.append(f"| {c.get('cleanrate', '?')} | {c.get('period_ns', '-')} ns | {a} | {d} "
                  f"| {rate} | {c.get('runs', '-')} | {c.get('passes', '-')} |")
    md.append("")

if prof:
    data["profile"] = prof
    md += ["## Profile (perf cpu-clock on the workload's CPU, 1-thread read loop)", "",
           "oxtrace's handler runs with interrupts off (shim oxt_probe_run), so a timer "
           "sample taken inside it lands on oxt_probe_run: that symbol is the whole probe. "
           "`oxtrace-irqs-on` is the profiling build (shim built with OXT_PROFILE_IRQS_ON), "
           "whose samples land inside the handler.", ""]
    for pr in prof:
        md += [f"**{pr['tool']} {pr['pair']}**", "", "```"] + pr["lines"][:16] + ["```", ""]

sp = [s.rstrip() for s in open(splats, errors="replace")] if splats else []
data["splats"] = sp
md += ["## Guest kernel log", "",
       ("clean (scripts/logscan.sh)" if not sp else
        "**splats** (scripts/logscan.sh):\n\n```\n" + "\n".join(sp[:20]) + "\n```"), ""]
if notes:
    md += ["## Notes", "", "```"] + notes + ["```", ""]
open(md_out, "w").write("\n".join(md))
json.dump(data, open(json_out, "w"), indent=1)
