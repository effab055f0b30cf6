//! The traced command (`-c`) and the signals that stop a run: a child held stopped before
//! its exec until the probes are on, and SIGINT/SIGTERM turned into a flag the run polls.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// A child process held stopped until [`Held::release`].
pub struct Held {
    pid: libc::pid_t,
    released: bool,
    status: Option<i32>,
    /// Held by ptrace at its entry point (else stopped before its exec).
    traced: bool,
}

/// Splits a command line into words: blanks separate, `'...'` and `"..."` group, `\` escapes.
pub fn split_words(cmd: &str) -> Vec<String> {
    let (mut words, mut cur, mut have) = (Vec::new(), String::new(), false);
    let mut quote = None;
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => {
                if have {
                    words.push(std::mem::take(&mut cur));
                    have = false;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                have = true;
            }
            (Some(q), c) if c == q => quote = None,
            (q, '\\') if q != Some('\'') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    have = true;
                }
            }
            (_, c) => {
                cur.push(c);
                have = true;
            }
        }
    }
    if have {
        words.push(cur);
    }
    words
}

impl Held {
    /// Starts `cmd` (split into words, looked up in PATH, no shell, like `dtrace -c`) and
    /// holds it stopped at its entry point: after its exec, with the dynamic loader done
    /// mapping its shared libraries, before the program's first instruction. So `$target`
    /// is its pid, its load objects can be probed (the pid and USDT providers read its
    /// maps), and nothing it does is missed.
    ///
    /// The child asks to be traced (`PTRACE_TRACEME`) and stops at its exec; the tool puts
    /// a temporary `int3` on the entry point (`AT_ENTRY` of its auxiliary vector), lets it
    /// run to there, puts the byte and the instruction pointer back, and keeps it stopped
    /// until [`Held::release`] detaches. Where tracing is refused, the child is held before
    /// its exec instead, as before (its probes cannot be user-space ones).
    pub fn spawn(cmd: &str) -> io::Result<Self> {
        use std::ffi::CString;
        let words = split_words(cmd);
        if words.is_empty() {
            return Err(io::Error::other("empty command"));
        }
        // Find out now whether the exec can happen, to say why not.
        resolve(&words[0])?;
        let argv: Vec<CString> = words
            .iter()
            .map(|w| CString::new(w.as_str()).map_err(|_| io::Error::other("NUL in command")))
            .collect::<io::Result<_>>()?;
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // SAFETY: the child only calls async-signal-safe functions (ptrace, raise, execvp,
        // _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above; `ptrs` is a NULL-terminated array of C strings.
            unsafe {
                let null = std::ptr::null_mut::<libc::c_void>();
                if libc::ptrace(libc::PTRACE_TRACEME, 0, null, null) != 0 {
                    libc::raise(libc::SIGSTOP);
                }
                libc::execvp(ptrs[0], ptrs.as_ptr());
                libc::_exit(127);
            }
        }
        let mut held = Self {
            pid,
            released: false,
            status: None,
            traced: false,
        };
        let sig = held.wait_stop()?;
        if sig == libc::SIGSTOP {
            // Not traced: held before its exec, released with SIGCONT.
            return Ok(held);
        }
        held.traced = true;
        held.run_to_entry()?;
        Ok(held)
    }

    /// Waits for the child's next stop; its signal. An exit is an error.
    fn wait_stop(&mut self) -> io::Result<i32> {
        let mut status = 0;
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WUNTRACED) };
        if r != self.pid {
            return Err(io::Error::last_os_error());
        }
        if libc::WIFSTOPPED(status) {
            return Ok(libc::WSTOPSIG(status));
        }
        self.status = Some(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128
        });
        self.released = true;
        Err(io::Error::other(if self.status == Some(127) {
            "it could not be executed".to_string()
        } else {
            "the command ended before it could be held".to_string()
        }))
    }

    /// From the exec stop, runs the traced child to its entry point and stops it there.
    fn run_to_entry(&mut self) -> io::Result<()> {
        let null = std::ptr::null_mut::<libc::c_void>();
        let pid = self.pid;
        let os = |what: &str| {
            let e = io::Error::last_os_error();
            io::Error::other(format!("{what}: {e}"))
        };
        // The tool's end ends the child too, should it come while the child is traced.
        // SAFETY: ptrace requests on our own stopped tracee, with integer arguments.
        unsafe {
            libc::ptrace(
                libc::PTRACE_SETOPTIONS,
                pid,
                null,
                libc::PTRACE_O_EXITKILL as usize as *mut libc::c_void,
            )
        };
        let entry = entry_point(pid as u32)?;
        // SAFETY: as above; PEEKTEXT returns the word (errno tells an error from -1).
        let word = unsafe {
            *libc::__errno_location() = 0;
            libc::ptrace(libc::PTRACE_PEEKTEXT, pid, entry as *mut libc::c_void, null)
        };
        // SAFETY: reads this thread's errno.
        if word == -1 && unsafe { *libc::__errno_location() } != 0 {
            return Err(os("cannot read its entry point"));
        }
        let trap = (word & !0xff) | 0xcc;
        // SAFETY: as above; writes one word of the tracee's text (a private copy).
        if unsafe {
            libc::ptrace(
                libc::PTRACE_POKETEXT,
                pid,
                entry as *mut libc::c_void,
                trap as *mut libc::c_void,
            )
        } != 0
        {
            return Err(os("cannot set a breakpoint at its entry point"));
        }
        let mut sig = 0;
        loop {
            // SAFETY: as above; continues the tracee, delivering `sig` if it stopped on one.
            if unsafe {
                libc::ptrace(
                    libc::PTRACE_CONT,
                    pid,
                    null,
                    sig as usize as *mut libc::c_void,
                )
            } != 0
            {
                return Err(os("cannot continue it"));
            }
            match self.wait_stop()? {
                libc::SIGTRAP => break,
                s => sig = s,
            }
        }
        // SAFETY: as above: the word back, and the instruction pointer back on it.
        unsafe {
            let mut regs: libc::user_regs_struct = std::mem::zeroed();
            libc::ptrace(
                libc::PTRACE_POKETEXT,
                pid,
                entry as *mut libc::c_void,
                word as *mut libc::c_void,
            );
            if libc::ptrace(
                libc::PTRACE_GETREGS,
                pid,
                null,
                &mut regs as *mut _ as *mut libc::c_void,
            ) != 0
            {
                return Err(os("cannot read its registers"));
            }
            if regs.rip != entry + 1 {
                return Err(io::Error::other(format!(
                    "it stopped at 0x{:x}, not at its entry point 0x{entry:x}",
                    regs.rip
                )));
            }
            regs.rip = entry;
            if libc::ptrace(
                libc::PTRACE_SETREGS,
                pid,
                null,
                &mut regs as *mut _ as *mut libc::c_void,
            ) != 0
            {
                return Err(os("cannot set its registers"));
            }
        }
        Ok(())
    }

    /// Its process id (`$target`).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Whether it is held after its exec, its libraries mapped (else before its exec).
    pub fn after_exec(&self) -> bool {
        self.traced
    }

    /// Lets it run.
    pub fn release(&mut self) {
        if !self.released {
            if self.traced {
                let null = std::ptr::null_mut::<libc::c_void>();
                // SAFETY: detaches our own stopped tracee, which then runs.
                unsafe { libc::ptrace(libc::PTRACE_DETACH, self.pid, null, null) };
            } else {
                // SAFETY: signals our own child.
                unsafe { libc::kill(self.pid, libc::SIGCONT) };
            }
            self.released = true;
        }
    }

    /// Its exit status once it has ended (127: it could not be executed).
    pub(crate) fn exited(&mut self) -> Option<i32> {
        if self.status.is_none() {
            let mut st = 0;
            // SAFETY: reaps our own child without blocking.
            if unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) } == self.pid
                && (libc::WIFEXITED(st) || libc::WIFSIGNALED(st))
            {
                self.status = Some(if libc::WIFEXITED(st) {
                    libc::WEXITSTATUS(st)
                } else {
                    128
                });
            }
        }
        self.status
    }

    pub(crate) fn kill(&mut self) {
        if self.status.is_none() {
            // SAFETY: signals and reaps our own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
            self.status = Some(128 + libc::SIGKILL);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // A command never released (the program failed to load) must not run.
        if !self.released {
            self.kill();
        }
    }
}

/// The entry point (`AT_ENTRY`) of process `pid`, from its auxiliary vector.
fn entry_point(pid: u32) -> io::Result<u64> {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv"))?;
    auxv.chunks_exact(16)
        .map(|c| {
            let w = |i: usize| u64::from_ne_bytes(c[i..i + 8].try_into().expect("8 bytes"));
            (w(0), w(8))
        })
        .find(|&(k, _)| k == libc::AT_ENTRY)
        .map(|(_, v)| v)
        .ok_or_else(|| io::Error::other("no entry point in its auxiliary vector"))
}

/// A process the run watches (`-p`): the run ends when it exits, which a pidfd says.
pub struct Watched {
    pid: u32,
    fd: Option<std::os::fd::OwnedFd>,
}

impl Watched {
    /// Watches `pid` (through a pidfd where the kernel has them, else by signal 0).
    pub fn new(pid: u32) -> Self {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        // SAFETY: a descriptor pidfd_open just returned, owned by nothing else.
        let fd = (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) });
        Self { pid, fd }
    }

    /// Whether the process has exited.
    pub fn gone(&self) -> bool {
        use std::os::fd::AsRawFd;
        match &self.fd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: polls one valid descriptor without waiting.
                unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents != 0 }
            }
            // SAFETY: signal 0 only checks that the process exists.
            None => (unsafe { libc::kill(self.pid as libc::pid_t, 0) }) != 0,
        }
    }
}

/// The file `execvp` would run for `name`: `name` itself if it has a `/`, else the first
/// executable regular file of that name in `PATH`. The error says why there is none.
pub fn resolve(name: &str) -> io::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    let check = |p: &Path| -> io::Result<PathBuf> {
        let m = std::fs::metadata(p)?;
        if m.is_dir() {
            return Err(io::Error::other("is a directory"));
        }
        if m.permissions().mode() & 0o111 == 0 {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        Ok(p.to_path_buf())
    };
    if name.contains('/') {
        return check(Path::new(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut last = io::Error::other("command not found");
    for dir in std::env::split_paths(&path) {
        match check(&dir.join(name)) {
            Ok(p) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Set by SIGINT/SIGTERM.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Turns SIGINT and SIGTERM into a clean stop; call before anything slow, since a shell's
/// background job starts with SIGINT ignored.
pub fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Whether SIGINT or SIGTERM arrived since [`catch_signals`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::{resolve, split_words};

    #[test]
    fn commands_that_cannot_run() {
        assert!(resolve("sh").is_ok());
        assert!(resolve("/bin/sh").is_ok());
        let e = resolve("no-such-command-oxtrace").unwrap_err();
        assert_eq!(e.to_string(), "command not found");
        assert_eq!(
            resolve("/no/such/file").unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        assert_eq!(resolve("/").unwrap_err().to_string(), "is a directory");
    }

    /// -c holds the command at its entry point: after its exec, its libraries mapped, its
    /// instruction pointer on AT_ENTRY; released, it runs to its end.
    #[test]
    fn held_at_the_entry_point() {
        let mut h = super::Held::spawn("sh -c 'exit 7'").unwrap();
        assert!(h.after_exec());
        let pid = h.pid();
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert!(exe.to_string_lossy().ends_with("sh") || exe.to_string_lossy().contains("dash"));
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        assert!(maps.contains("libc.so"), "{maps}");
        // Field 30 of stat is the stopped thread's instruction pointer (kstkeip); it needs
        // ptrace access, which the tracer has.
        let entry = super::entry_point(pid).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let eip: u64 = after.split(' ').nth(27).unwrap().parse().unwrap();
        assert!(eip == entry || eip == 0, "rip 0x{eip:x}, entry 0x{entry:x}");
        h.release();
        let status = loop {
            if let Some(s) = h.exited() {
                break s;
            }
            std::thread::yield_now();
        };
        assert_eq!(status, 7);
    }

    #[test]
    fn watched_processes_end() {
        let mut c = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let w = super::Watched::new(c.id());
        assert!(w.fd.is_some() && !w.gone());
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(w.gone());
    }

    #[test]
    fn split_words_like_a_shell() {
        assert_eq!(split_words("  ls -l  /tmp "), ["ls", "-l", "/tmp"]);
        assert_eq!(
            split_words(r#"sh -c 'echo "a b"; x' "q r" e\ f"#),
            ["sh", "-c", r#"echo "a b"; x"#, "q r", "e f"]
        );
        assert_eq!(split_words("a '' b"), ["a", "", "b"]);
        assert!(split_words("   ").is_empty());
    }
}
