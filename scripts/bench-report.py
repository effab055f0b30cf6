#!/usr/bin/env python3
"""make bench: turn the guest runner's lines into build/bench/results.{md,json}.

    bench-report.py RAW_LOG SPLATS MD_OUT JSON_OUT

Medians over rounds; "added" is a tool's median minus the no-probe median of the
same workload; "action/probe" is (pair - empty) / (empty - none) of one tool.
Targets are printed as met or not, never enforced.
"""
import json
import re
import statistics
import sys

raw, splats, md_out, json_out = sys.argv[1:5]
kv = re.compile(r"(\w+)=(\S+)")
res, notes, keys, dyn, clean = [], [], [], [], []
for line in open(raw, errors="replace"):
    line = line.rstrip("\r\n")
    if line.startswith("RES "):
        d = dict(kv.findall(line))
        try:
            d["ns"] = float(d["ns"])
        except (KeyError, ValueError):
            continue
        res.append(d)
    elif line.startswith("NOTE "):
        notes.append(line[5:])
    elif line.startswith(("KEYS ", "DYN ", "CLEAN ")):
        d = dict(kv.findall(line))
        {"KEYS": keys, "DYN": dyn, "CLEAN": clean}[line.split()[0]].append(d)

WLS = [("1t", "read loop, 1 thread"), ("4t", "read loop, 4 threads"),
       ("lat", "16 KiB read (latency), 1 thread")]
PAIRS = ["empty", "count", "hist", "sum", "trace"]
DESC = {
    "empty": ("fbt::ksys_read:entry { }", "kprobe:ksys_read { }"),
    "count": ("@[pid] = count()", "@[pid] = count()"),
    "hist": ("self->ts + quantize", "@start[tid] + hist"),
    "sum": ("@s = sum(arg0)", "@s = sum(arg0)"),
    "trace": ("trace(pid)", "printf(\"%d\\n\", pid)"),
}


def med(pair, tool, wl):
    v = [r["ns"] for r in res if r.get("pair") == pair and r.get("tool") == tool
         and r.get("wl") == wl]
    return (statistics.median(v), len(v)) if v else (None, 0)


def fmt(x, p=0):
    return "-" if x is None else f"{x:.{p}f}"


data = {"workloads": {}, "targets": [], "notes": notes}
md = ["# oxtrace vs bpftrace (make bench)", "",
      "ns per call (median over rounds; per thread for 4 threads). added = median - no-probe "
      "median; ox/bt = oxtrace added / bpftrace added; action/probe = (pair - empty) / "
      "(empty - none) of the same tool.", ""]
for wl, wdesc in WLS:
    base, nb = med("none", "none", wl)
    if base is None:
        continue
    w = {"none_ns": base, "none_runs": nb, "pairs": {}}
    md += [f"## {wdesc} (no probe: {base:.0f} ns, {nb} runs)", "",
           "| pair | oxtrace | bpftrace | ox ns | bt ns | ox added | bt added | ox/bt "
           "| ox action/probe | bt action/probe | runs ox/bt |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    empty = {t: med("empty", t, wl)[0] for t in ("oxtrace", "bpftrace")}
    for p in PAIRS:
        (ox, nox), (bt, nbt) = med(p, "oxtrace", wl), med(p, "bpftrace", wl)
        if ox is None and bt is None:
            continue
        oa = None if ox is None else ox - base
        ba = None if bt is None else bt - base
        ratio = oa / ba if oa is not None and ba not in (None, 0) else None

        def act(v, t):
            e = empty[t]
            if p == "empty" or v is None or e is None or e - base <= 0:
                return None
            return (v - e) / (e - base)

        oact, bact = act(ox, "oxtrace"), act(bt, "bpftrace")
        w["pairs"][p] = {"oxtrace_ns": ox, "bpftrace_ns": bt, "oxtrace_added_ns": oa,
                         "bpftrace_added_ns": ba, "ox_over_bt": ratio,
                         "oxtrace_action_over_probe": oact,
                         "bpftrace_action_over_probe": bact, "runs": [nox, nbt]}
        md.append(f"| {p} | `{DESC[p][0]}` | `{DESC[p][1]}` | {fmt(ox)} | {fmt(bt)} | "
                  f"{fmt(oa)} | {fmt(ba)} | {fmt(ratio, 2)} | {fmt(oact, 2)} | "
                  f"{fmt(bact, 2)} | {nox}/{nbt} |")
    md.append("")
    data["workloads"][wl] = w


def target(name, wl, pair, key, limit):
    v = data["workloads"].get(wl, {}).get("pairs", {}).get(pair, {}).get(key)
    data["targets"].append({"target": name, "workload": wl, "value": v, "limit": limit,
                            "met": None if v is None else v <= limit})
    state = "n/a" if v is None else ("met" if v <= limit else "NOT met")
    return f"| {name} | {wl} | {fmt(v, 2)} | ≤ {limit} | {state} |"


md += ["## Targets (printed, not enforced)", "",
       "| target | workload | measured | limit | |", "|---|---|---:|---:|---|"]
for wl in ("1t", "4t"):
    md.append(target("count: oxtrace added / bpftrace added", wl, "count", "ox_over_bt", 0.8))
for wl in ("1t", "4t", "lat"):
    md.append(target("latency histogram: oxtrace / bpftrace", wl, "hist", "ox_over_bt", 1.0))
for wl in ("1t", "4t"):
    md.append(target("count action / bare kprobe (oxtrace)", wl, "count",
                     "oxtrace_action_over_probe", 0.25))
md.append("")

if keys:
    us = [int(k["us"]) for k in keys if k.get("us")]
    nk = [int(k["keys"]) for k in keys if k.get("keys")]
    data["snapshot_merge"] = {"us": us, "keys": nk,
                              "median_ms": statistics.median(us) / 1000 if us else None}
    if us:
        md += ["## Aggregation snapshot + merge", "",
               f"End-of-run snapshot of every CPU + merge into the tool's table, {max(nk)} keys: "
               f"median {statistics.median(us) / 1000:.1f} ms (runs: "
               f"{', '.join(f'{u / 1000:.1f}' for u in us)} ms).", ""]


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
               f"`self->ts` set at entry, zeroed at return, 4 threads: alloc+free throughput "
               f"median {statistics.median(th) / 1e6:.2f} M/s (whole workload wall time, "
               f"{len(th)} runs).", ""]
if clean:
    data["cleanrate"] = clean
    md += ["| cleanrate | cleaner period | allocs | drops | drop rate |",
           "|---|---:|---:|---:|---:|"]
    for c in clean:
        try:
            a, d = int(c["allocs"]), int(c["drops"])
            rate = f"{100 * d / (a + d):.2f} %" if a + d else "-"
        except (KeyError, ValueError):
            a = d = rate = "-"
        md.append(f"| {c.get('cleanrate', '?')} | {c.get('period_ns', '-')} ns | {a} | {d} "
                  f"| {rate} |")
    md.append("")

sp = [s.rstrip() for s in open(splats, errors="replace")] if splats else []
data["splats"] = sp
md += ["## Guest kernel log", "",
       ("clean (scripts/logscan.sh)" if not sp else
        "**splats** (scripts/logscan.sh):\n\n```\n" + "\n".join(sp[:20]) + "\n```"), ""]
if notes:
    md += ["## Notes", "", "```"] + notes + ["```", ""]
open(md_out, "w").write("\n".join(md))
json.dump(data, open(json_out, "w"), indent=1)
