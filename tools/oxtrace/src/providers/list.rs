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
    let modules = super::fbt::modules();
    for func in functions {
        let module = modules.get(func).map_or("kernel", String::as_str);
        f("fbt", module, func, "entry");
        f("fbt", module, func, "return");
    }
    // After the others, so that their IDs stay as they were.
    for p in super::stable::PROBES {
        f(p.prov, super::stable::MODULE, "", p.name);
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

/// The probes `-l` lists for user-space description `pattern` (`$target` already replaced:
/// `pid1234:libc.so.6:str*:entry`, `myprov1234:::`), one row per probe name
/// (`provider`, `module`, `function`, `name`): a return probe with several returning
/// instructions is one probe. `None` if `pattern` names no process.
pub fn user_rows(pattern: &str) -> Option<Result<Vec<[String; 4]>, String>> {
    let f: Vec<&str> = pattern.split(':').collect();
    let [prov, module, func, name] = f.as_slice() else {
        return None;
    };
    let (pname, pid) = super::process::split_pid(prov)?;
    let probes = if pname == "pid" {
        super::pid::resolve(pid, module, func, name).map(|p| {
            let mut v = p.entry;
            v.extend(p.ret);
            v.extend(p.offsets);
            v
        })
    } else {
        match super::usdt::resolve(pname, pid, module, func, name) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(format!(
                "process {pid} has no USDT provider '{pname}' (its USDT providers: {})",
                super::usdt::providers(pid).join(", ")
            )),
            Err(e) => Err(e),
        }
    };
    Some(probes.map(|v| rows(v.iter().map(|p| p.name.as_str()))))
}

/// Every USDT probe of process `pid` (what `-l -p PID` adds to the kernel's probes).
pub fn usdt_rows(pid: u32) -> Vec<[String; 4]> {
    let mut names = Vec::new();
    for prov in super::usdt::providers(pid) {
        if let Ok(Some(v)) = super::usdt::resolve(&prov, pid, "", "", "") {
            names.extend(v.into_iter().map(|p| p.name));
        }
    }
    rows(names.iter().map(String::as_str))
}

/// The rows of user probe names `provider:module:function:name`, each name once.
fn rows<'a>(names: impl Iterator<Item = &'a str>) -> Vec<[String; 4]> {
    let mut seen = std::collections::HashSet::new();
    names
        .filter(|n| seen.insert(n.to_string()))
        .map(|n| {
            oxtrace_core::probe::user_parts(n.as_bytes())
                .map(|p| String::from_utf8_lossy(p).into_owned())
        })
        .collect()
}
