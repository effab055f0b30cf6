//! Module-scoped type names, ``module`name``: which container a type is looked up in.
//!
//! `D` holds the types the program and D's library declare, `C` the C types D starts from
//! (both are the compiler's own here), and a kernel module's name (`vmlinux`, a loaded
//! module) holds its types (BTF).

/// The scope and the name of a scoped name, ``("vmlinux", "task_struct")`` for
/// ``vmlinux`task_struct``; `None` when `name` is not scoped.
pub(crate) fn split(name: &str) -> Option<(&str, &str)> {
    name.split_once('`')
}

/// Whether scope `m` names the compiler's own types (D's and C's) rather than a kernel
/// module's.
pub(crate) fn is_d(m: &str) -> bool {
    m == "D" || m == "C"
}

/// Whether `m` names a scope types can be looked up in: D's, C's, the kernel image's or a
/// loaded kernel module's.
pub(crate) fn is_known(m: &str) -> bool {
    is_d(m)
        || m == "vmlinux"
        || (!m.contains('/') && std::path::Path::new("/sys/module").join(m).is_dir())
}
