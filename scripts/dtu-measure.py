#!/usr/bin/env python3
"""Measure oxtrace against the unit tests of Oracle's dtrace-utils.

    scripts/dtu-measure.py SRC [--set first|wider|all] [--dirs a,b] [--guest]
                           [--oxtrace PATH] [--out DIR] [--timeout SEC] [--ref REF]

SRC is a dtrace-utils checkout or a bare git directory (its test/unittest is read at run
time from REF, by default the first of HEAD, devel, dev that has one; nothing of
dtrace-utils is kept in this repository).

Every test is judged by the real oxtrace, the same way for every test:

- err.*.d (wrong programs) on the host, compiling only: oxtrace runs with --device pointing
  at a path that does not exist, so a program it accepts stops at the device, after the
  whole compiler ran. It passes when oxtrace refuses it (exit status not 0, not at the
  device); "same tag" when the refusal names the D_* tag of the test's name. A program the
  compiler accepts is, with --guest, run in the guest too: DTrace rejects some of them only at
  run time (exit status 1), and so may oxtrace.
- tst.*.d whose runtest-opts carry dtrace's -e (compile only) are judged on the host: pass
  when oxtrace compiles them.
- the other tst.*.d run in the guest (--guest; scripts/vm.sh, one boot for all of them, each
  with a time limit): pass when oxtrace exits 0 and, where the test has a .r file, its output
  matches. The output is built as dtrace-utils' runtest.sh builds it (stdout, then
  "-- @@stderr --" and stderr if any; the test's .r.p postprocessor; hex numbers as {ptr};
  lines sorted unless @@nosort), then normalised for both sides alike: each line's blanks
  collapsed and trimmed, blank lines dropped, a leading "oxtrace:" read as "dtrace:"; and
  oxtrace's default output loses its CPU and ID columns, as runtest.sh's testing mode
  (_DTRACE_TESTING) has dtrace print it.
- skipped, counted apart with the reason: @@skip tests, tests driven by a .sh script or a .c
  program of their own, tests that need a trigger program from dtrace-utils' test/triggers or
  a target process ($_pid), and drp.* tests.

The report gives per-directory pass rates and every failure with the first differing line or
the error; --out DIR keeps every test's output and a JSON summary.
"""

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

FIRST = [
    # the D language
    "arithmetic", "arrays", "assocs", "begin", "builtinvar", "clauses", "end", "error",
    "exit", "funcs", "operators", "predicates", "pragma", "printf", "scalars",
    "speculation", "trace", "variables", "vars",
    # aggregations
    "aggs", "multiaggs", "lquantize", "printa",
    # actions
    "actions",
    # timers
    "profile-n", "tick-n",
]
WIDER = [
    # types and declarations
    "types", "decls", "enum", "inline", "typedef",
    "pointers", "lexer", "grammar", "translators", "codegen", "print", "tracemem",
    # kernel types (BTF)
    "struct", "union", "bitfields", "offsetof", "sizeof",
]

NODEV = "/nonexistent/dtu-measure-device"
HOST_TIMEOUT = 20


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def materialise(src, ref, dirs):
    """A directory holding test/unittest/DIR for each DIR of dirs; (path, is_temporary)."""
    if os.path.isdir(os.path.join(src, "test", "unittest")):
        return src, False
    refs = [ref] if ref else ["HEAD", "devel", "dev"]
    for r in refs:
        ok = subprocess.run(["git", "-C", src, "cat-file", "-e", f"{r}:test/unittest"],
                            capture_output=True).returncode == 0
        if ok:
            break
    else:
        sys.exit(f"dtu-measure: no test/unittest in {src} at {', '.join(refs)}")
    tmp = tempfile.mkdtemp(prefix="dtu-")
    paths = [f"test/unittest/{d}" for d in dirs
             if subprocess.run(["git", "-C", src, "cat-file", "-e", f"{r}:test/unittest/{d}"],
                               capture_output=True).returncode == 0]
    arch = subprocess.run(["git", "-C", src, "archive", r, "--"] + paths,
                          check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=arch, check=True)
    rev = sh("git", "-C", src, "rev-parse", "--short", r).strip()
    print(f"dtu-measure: dtrace-utils {r} ({rev}) from {src}", file=sys.stderr)
    return tmp, True


def option(text, name):
    """The value of @@name in a test (runtest.sh's extract_options), or None."""
    vals = []
    for line in text.splitlines():
        m = re.search(r"@@" + re.escape(name) + r"( *:|\s|$)(.*)", line)
        if m:
            v = re.sub(r"\s*\*/\s*$", "", m.group(2)).strip()
            vals.append(v)
    if not vals:
        return None
    return " ".join(vals).strip()


class Test:
    def __init__(self, root, rel):
        self.root, self.rel = root, rel  # rel: test/unittest/DIR/.../NAME.d
        self.dir = rel.split("/")[2]
        self.base = rel[:-2]
        self.name = os.path.basename(rel)
        self.kind = self.name.split(".")[0]
        with open(os.path.join(root, rel), errors="replace") as f:
            self.text = f.read()
        self.tag = None
        m = re.match(r"err\.(D_[A-Z0-9_]+)\.", self.name)
        if m:
            self.tag = m.group(1)
        self.opts = (option(self.text, "runtest-opts") or "").split()
        t = option(self.text, "timeout")
        self.timeout = int(t) if t and t.isdigit() else 10
        self.nosort = option(self.text, "nosort") is not None
        self.skip = self.skip_reason()
        self.compile_only = "-e" in self.opts
        self.result = None  # (status, detail); status in pass/fail/skip
        self.tag_ok = None

    def exists(self, suffix):
        return os.path.exists(os.path.join(self.root, self.base + suffix))

    def skip_reason(self):
        trig = option(self.text, "trigger")
        if self.kind not in ("tst", "err"):
            return "drp.* test (drop counts)"
        if option(self.text, "skip") is not None:
            return "@@skip in dtrace-utils"
        if self.exists(".sh"):
            return "driven by its own .sh script"
        if self.exists(".c"):
            return "a .c program of dtrace-utils"
        if self.text.startswith("#!"):
            return "interpreter file (#!dtrace)"
        if trig and trig != "none":
            return "trigger program from dtrace-utils' test/triggers"
        if any("$_pid" in o for o in self.opts):
            return "needs a target process ($_pid)"
        if self.exists(".t"):
            return "trigger program (.t)"
        return None

    def expected(self):
        for s in (".x86_64.r", ".r"):
            p = os.path.join(self.root, self.base + s)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    return f.read()
        return None

    def args(self):
        """oxtrace's arguments: runtest.sh's -s FILE then the runtest-opts, less -e."""
        return ["-s", self.rel] + [o for o in self.opts if o != "-e"]


def first_line(s):
    for line in s.splitlines():
        if line.strip() and not line.startswith(" " * 2 + "|"):
            return line.strip()
    return s.strip()


def compile_err(stderr):
    """The compile error's first line (the message), from oxtrace's stderr."""
    for line in stderr.splitlines():
        if line.strip():
            return line.strip()[:200]
    return "(no message)"


def run_host(t, oxtrace):
    """Compile only: (outcome, stderr) with outcome in refused/accepted/timeout/crash."""
    try:
        p = subprocess.run([oxtrace, "--device", NODEV] + t.args(), cwd=t.root,
                           capture_output=True, text=True, timeout=HOST_TIMEOUT,
                           stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        return "timeout", f"no answer within {HOST_TIMEOUT} s"
    if p.returncode < 0:
        return "crash", f"signal {-p.returncode}: {compile_err(p.stderr)}"
    if "panicked" in p.stderr:
        return "crash", compile_err(p.stderr)
    if NODEV in p.stderr:
        return "accepted", p.stderr
    if p.returncode == 0:
        return "accepted", p.stderr
    return "refused", p.stderr


def normalise(text, nosort, ours=False):
    out = []
    cols = False
    for line in text.splitlines():
        line = re.sub(r"0x[0-9a-f]+", "{ptr}", line)
        line = " ".join(line.split())
        if ours:
            # runtest.sh runs dtrace in its testing mode (_DTRACE_TESTING), which leaves the
            # CPU and ID columns out of the default output; leave them out of ours.
            if line in ("CPU ID FUNCTION:NAME", "CPU FUNCTION"):
                line, cols = line.split(" ", 2)[-1], True
            elif cols:
                line = re.sub(r"^\d+ \d+ (?=\S*:)", "", line)
        if line.startswith("oxtrace:"):
            line = "dtrace:" + line[len("oxtrace:"):]
        if line:
            out.append(line)
    return out if nosort else sorted(out)


def judge_output(t, out, err):
    """(ok, detail) for a guest run's output against the test's .r."""
    want = t.expected()
    if want is None:
        return True, ""
    got = out
    if err:
        got += "-- @@stderr --\n" + err
    pp = os.path.join(t.root, t.base + ".r.p")
    if os.path.exists(pp):
        os.chmod(pp, 0o755)
        try:
            r = subprocess.run([pp], input=got, capture_output=True, text=True, cwd=t.root,
                               timeout=30, errors="replace")
            if r.returncode == 0:
                got = r.stdout
        except (OSError, subprocess.TimeoutExpired):
            pass
    a, b = normalise(want, t.nosort), normalise(got, t.nosort, ours=True)
    if a == b:
        return True, ""
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "(end)"
        y = b[i] if i < len(b) else "(end)"
        if x != y:
            return False, f"want: {x[:150]} | got: {y[:150]}"
    return False, "differs"


RUNNER = r"""#!/bin/sh
# Runs the listed tests one by one, each with its time limit; the output goes back base64'd.
cd /extra/root
while IFS='|' read -r id lim args; do
	[ -n "$id" ] || continue
	echo "@@DTU-TEST $id"
	start=$(date +%s)
	eval "timeout -s KILL $lim oxtrace $args" </dev/null >/tmp/dtu.out 2>/tmp/dtu.err
	rc=$?
	echo "@@DTU-RC $rc $(( $(date +%s) - start ))"
	echo "@@DTU-OUT"
	base64 </tmp/dtu.out
	echo "@@DTU-ERR"
	base64 </tmp/dtu.err
	echo "@@DTU-END"
	rm -f /tmp/dtu.out /tmp/dtu.err
	grep -q '^oxtrace ' /proc/modules || insmod /lib/modules/oxtrace.ko
done </extra/list
echo "@@DTU-DONE"
"""


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def run_guest(tests, repo, vm_timeout, log, reuse):
    """Runs tests in one guest boot (or reads the log of one); {test: (rc, secs, out, err)}."""
    if reuse:
        return parse_guest_log(reuse)
    stage = tempfile.mkdtemp(prefix="dtu-guest-")
    root = os.path.join(stage, "root")
    lines = []
    for i, t in enumerate(tests):
        dst = os.path.join(root, t.rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(os.path.join(t.root, t.rel), dst)
        lim = min(max(t.timeout, 10), 60)
        lines.append(f"{t.rel}|{lim}|" + " ".join(shquote(a) for a in t.args()))
    with open(os.path.join(stage, "list"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(stage, "run.sh"), "w") as f:
        f.write(RUNNER)
    cmd = [os.path.join(repo, "scripts", "vm.sh"), "--files", stage, "--timeout",
           str(vm_timeout), "--", "sh /extra/run.sh"]
    print(f"dtu-measure: {len(tests)} tests in one guest boot (log {log})", file=sys.stderr)
    with open(log, "w") as lf:
        subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, cwd=repo)
    shutil.rmtree(stage, ignore_errors=True)
    return parse_guest_log(log)


def parse_guest_log(log):
    res = {}
    cur = None
    with open(log, errors="replace") as lf:
        for line in lf:
            line = line.rstrip("\r\n")
            if line.startswith("@@DTU-TEST "):
                cur = {"id": line.split()[1], "rc": None, "secs": 0, "out": [], "err": []}
                sect = None
            elif cur is None:
                continue
            elif line.startswith("@@DTU-RC "):
                _, rc, secs = line.split()
                cur["rc"], cur["secs"] = int(rc), int(secs)
            elif line == "@@DTU-OUT":
                sect = "out"
            elif line == "@@DTU-ERR":
                sect = "err"
            elif line == "@@DTU-END":
                dec = lambda ls: base64.b64decode("".join(ls)).decode(errors="replace")
                res[cur["id"]] = (cur["rc"], cur["secs"], dec(cur["out"]), dec(cur["err"]))
                cur = None
            elif sect:
                cur[sect].append(line.strip())
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("--set", choices=["first", "wider", "all"], default="all")
    ap.add_argument("--dirs", help="comma-separated directories instead of --set")
    ap.add_argument("--ref")
    ap.add_argument("--guest", action="store_true", help="run the tst tests in the guest")
    ap.add_argument("--oxtrace", help="the tool (default: build/oxtrace, else target's)")
    ap.add_argument("--out", help="keep outputs and summary.json here")
    ap.add_argument("--guest-log", help="judge the guest tests from this log of an earlier run")
    ap.add_argument("--vm-timeout", type=int, default=5400)
    ap.add_argument("--quiet-failures", action="store_true")
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    oxtrace = a.oxtrace or os.path.join(repo, "build", "oxtrace")
    if not os.path.exists(oxtrace):
        oxtrace = os.path.join(repo, "target", "x86_64-unknown-linux-gnu", "release", "oxtrace")
    oxtrace = os.path.abspath(oxtrace)
    sets = {"first": FIRST, "wider": WIDER, "all": FIRST + WIDER}
    dirs = a.dirs.split(",") if a.dirs else sets[a.set]
    root, temp = materialise(os.path.abspath(a.src), a.ref, dirs)
    tests = []
    for d in dirs:
        top = os.path.join(root, "test", "unittest", d)
        for dp, _, files in os.walk(top):
            for fn in sorted(files):
                if fn.endswith(".d") and fn.split(".")[0] in ("tst", "err", "drp"):
                    rel = os.path.relpath(os.path.join(dp, fn), root)
                    tests.append(Test(root, rel))
    tests.sort(key=lambda t: t.rel)
    guest = []
    for t in tests:
        if t.skip:
            t.result = ("skip", t.skip)
            continue
        if t.kind == "err" or t.compile_only:
            outcome, err = run_host(t, oxtrace)
            if t.kind == "err":
                if outcome == "refused":
                    t.result = ("pass", "")
                    if t.tag:
                        t.tag_ok = f"[{t.tag}]" in err
                        if not t.tag_ok:
                            t.result = ("pass", "other tag: " + compile_err(err))
                elif outcome == "accepted" and a.guest:
                    guest.append(t)
                else:
                    t.result = ("fail", {"accepted": "compiled (not refused)"}.get(outcome, outcome + ": " + err))
                    if t.tag:
                        t.tag_ok = False
            else:
                t.result = ("pass", "") if outcome == "accepted" else ("fail", outcome + ": " + compile_err(err))
        elif a.guest:
            guest.append(t)
        else:
            t.result = ("skip", "guest test (give --guest)")
    if guest:
        log = os.path.join(a.out or tempfile.gettempdir(), "dtu-guest.log")
        if a.out:
            os.makedirs(a.out, exist_ok=True)
        res = run_guest(guest, repo, a.vm_timeout, log, a.guest_log)
        for t in guest:
            r = res.get(t.rel)
            if r is None:
                # A guest run that ended (or a log that stops) before this test.
                t.result = ("skip", "not reached: the guest run ended before it")
                continue
            rc, secs, out, err = r
            if t.kind == "err":
                ok = rc not in (0, 137)
                t.result = ("pass", "refused at run time") if ok else ("fail", "accepted (compiled and ran)" if rc == 0 else "timed out")
                if t.tag:
                    t.tag_ok = ok and f"[{t.tag}]" in err
                continue
            if rc == 137:
                t.result = ("fail", f"timed out ({secs} s)")
            elif rc != 0:
                t.result = ("fail", f"exit {rc}: {compile_err(err)}")
            else:
                ok, det = judge_output(t, out, err)
                t.result = ("pass", "") if ok else ("fail", det)
            if a.out:
                p = os.path.join(a.out, "out", t.rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p + ".out", "w") as f:
                    f.write(out + ("-- @@stderr --\n" + err if err else ""))
    report(tests, dirs, a)
    if temp:
        shutil.rmtree(root, ignore_errors=True)


def pct(n, d):
    return f"{n}/{d} {100.0 * n / d:5.1f}%" if d else "-"


def report(tests, dirs, a):
    print(f"{'directory':<14} {'tst pass':>16} {'err refused':>16} {'same tag':>16} {'skipped':>8}")
    tot = {}
    for group, names in (("first", FIRST), ("wider", WIDER)):
        g = {"tp": 0, "tn": 0, "ep": 0, "en": 0, "sp": 0, "sn": 0, "sk": 0}
        for d in dirs:
            if d not in names:
                continue
            c = {"tp": 0, "tn": 0, "ep": 0, "en": 0, "sp": 0, "sn": 0, "sk": 0}
            for t in tests:
                if t.dir != d:
                    continue
                st = t.result[0]
                if st == "skip":
                    c["sk"] += 1
                    continue
                if t.kind == "tst":
                    c["tn"] += 1
                    c["tp"] += st == "pass"
                else:
                    c["en"] += 1
                    c["ep"] += st == "pass"
                    if t.tag:
                        c["sn"] += 1
                        c["sp"] += bool(t.tag_ok)
            for k in g:
                g[k] += c[k]
            print(f"{d:<14} {pct(c['tp'], c['tn']):>16} {pct(c['ep'], c['en']):>16} "
                  f"{pct(c['sp'], c['sn']):>16} {c['sk']:>8}")
        if g["tn"] + g["en"] + g["sk"]:
            print(f"{'= ' + group:<14} {pct(g['tp'], g['tn']):>16} {pct(g['ep'], g['en']):>16} "
                  f"{pct(g['sp'], g['sn']):>16} {g['sk']:>8}")
            tot[group] = g
    skips = {}
    for t in tests:
        if t.result[0] == "skip":
            skips[t.result[1]] = skips.get(t.result[1], 0) + 1
    print("\nskipped:")
    for r, n in sorted(skips.items(), key=lambda x: -x[1]):
        print(f"  {n:4} {r}")
    if not a.quiet_failures:
        print("\nfailures:")
        for t in tests:
            if t.result[0] == "fail":
                print(f"  {t.rel}: {t.result[1]}")
        print("\nrefused with another tag:")
        for t in tests:
            if t.kind == "err" and t.tag and t.result[0] == "pass" and not t.tag_ok:
                print(f"  {t.rel}: {t.result[1]}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump({"totals": tot, "tests": [
                {"test": t.rel, "status": t.result[0], "detail": t.result[1],
                 "tag": t.tag, "tag_ok": t.tag_ok} for t in tests]}, f, indent=1)


if __name__ == "__main__":
    main()
