//! The probes `oxtrace -l` lists, over every provider, numbered as it numbers them.

/// Calls `f(provider, module, function, name)` for every probe `oxtrace -l` lists, in its
/// order: a probe's ID is its position, from 1 (dtrace's IDs are its own order of creation;
/// these are stable for one kernel and tool). `functions` are the kernel's probe-able ones.
pub fn for_each_listed(functions: &[String], mut f: impl FnMut(&str, &str, &str, &str)) {
    f("dtrace", "", "", "BEGIN");
    f("dtrace", "", "", "END");
    for t in LISTED_TIMERS {
        f("profile", "", "", t);
    }
    for sc in super::syscalls::list() {
        f("syscall", "vmlinux", sc.name, "entry");
        f("syscall", "vmlinux", sc.name, "return");
    }
    for (s, e) in super::tracepoints::events() {
        f("tracepoint", &s, "", &e);
    }
    for func in functions {
        f("fbt", "kernel", func, "entry");
        f("fbt", "kernel", func, "return");
    }
}

/// The profile-provider probes `-l` lists (others are made when a program names them).
const LISTED_TIMERS: [&str; 5] = [
    "tick-1s",
    "tick-1000hz",
    "profile-97",
    "profile-997",
    "profile-1ms",
];
