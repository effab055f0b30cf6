//! The C types of a probe's `args[]`, for `-l -v` (as `dtrace -lv` prints them): fbt's from
//! the function's BTF prototype, syscall's from the call's prototype (`syscalls::proto`).

use crate::btf::Btf;

/// The C type of each `args[i]` of probe `prov::func:name`, in order (an entry probe: the
/// arguments; a return probe: fbt's `args[1]` or syscall's `args[0]`, the return value, the
/// others left empty); `None` when unknown.
pub fn arg_types(btf: Option<&Btf>, prov: &str, func: &str, name: &str) -> Option<Vec<String>> {
    match (prov, name) {
        ("fbt", _) => {
            let (ret, params) = btf?.func(func)?;
            let btf = btf?;
            Some(match name {
                "return" => vec![String::new(), btf.type_name(ret)],
                _ => params
                    .iter()
                    .take_while(|p| p.ty != 0)
                    .map(|p| btf.type_name(p.ty))
                    .collect(),
            })
        }
        ("syscall", _) => {
            let p = super::syscalls::proto(func)?;
            Some(match name {
                "return" => vec![c_spelling(&p.ret)],
                _ => p.args.iter().map(|a| c_spelling(&a.0)).collect(),
            })
        }
        (p, _) if super::stable::is_provider(p) => super::stable::arg_types(p, name),
        _ => None,
    }
}

/// A prototype's C type as the program writes it: without the kernel's `__user` and
/// with single spaces (`const char __user *` is `const char *`).
pub fn c_spelling(ct: &str) -> String {
    let mut s = ct
        .split_whitespace()
        .filter(|w| *w != "__user")
        .collect::<Vec<_>>()
        .join(" ");
    while s.contains(" *") && s.contains("* *") {
        s = s.replace("* *", "**");
    }
    s
}

/// The `-l -v` lines after a tracepoint's row: its fields, as `args->NAME` reads them
/// (the common ones left out).
pub fn describe_fields(f: &super::tracepoints::Format) -> String {
    let mut out = String::from("\n\tArgument Types\n");
    for x in f.fields.iter().filter(|x| !x.name.starts_with("common_")) {
        out.push_str(&format!("\t\targs->{}: {}\n", x.name, x.ctype));
    }
    out
}

/// The `-l -v` lines after a probe's row: its argument types, or `None`.
pub fn describe(types: Option<&[String]>) -> String {
    let mut out = String::from("\n\tArgument Types\n");
    match types {
        Some(t) if t.iter().any(|x| !x.is_empty()) => {
            for (i, ty) in t.iter().enumerate().filter(|(_, t)| !t.is_empty()) {
                out.push_str(&format!("\t\targs[{i}]: {ty}\n"));
            }
        }
        _ => out.push_str("\t\tNone\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::build::Builder;

    #[test]
    fn fbt_and_syscall_types() {
        let mut b = Builder::new();
        let int = b.int("int", 4, true);
        let chr = b.int("char", 1, true);
        let pchr = b.ptr(chr);
        let long = b.int("long", 8, true);
        let ssize = b.typedef("ssize_t", long);
        b.func("f", ssize, &[("fd", int), ("buf", pchr)]);
        let btf = Btf::parse(&b.finish()).unwrap();
        let v = |p, f, n| arg_types(Some(&btf), p, f, n);
        assert_eq!(v("fbt", "f", "entry").unwrap(), ["int", "char *"]);
        assert_eq!(v("fbt", "f", "return").unwrap(), ["", "ssize_t"]);
        assert_eq!(v("fbt", "nosuch", "entry"), None);
        assert_eq!(
            v("syscall", "openat", "entry").unwrap(),
            ["int", "const char *", "int", "umode_t"]
        );
        assert_eq!(v("syscall", "read", "return").unwrap(), ["long"]);
        assert_eq!(
            arg_types(None, "syscall", "execve", "entry").unwrap()[1],
            "const char *const *"
        );
        assert_eq!(v("profile", "", "profile-97"), None);
        assert_eq!(
            describe(Some(&["".into(), "ssize_t".into()])),
            "\n\tArgument Types\n\t\targs[1]: ssize_t\n"
        );
        assert_eq!(describe(None), "\n\tArgument Types\n\t\tNone\n");
        let tp = crate::providers::tracepoints::parse_format(
            "sched:sched_process_exit",
            "name: sched_process_exit\nID: 1\nformat:\n\
             \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
             \tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
             \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n",
        )
        .unwrap();
        assert_eq!(
            describe_fields(&tp),
            "\n\tArgument Types\n\t\targs->comm: char[16]\n\t\targs->pid: pid_t\n"
        );
    }
}
