//! The traced command (`-c`) and the signals that stop a run: a child held stopped before
//! its exec until the probes are on, and SIGINT/SIGTERM turned into a flag the run polls.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// A child process held stopped until [`Held::release`].
pub struct Held {
    pid: libc::pid_t,
    released: bool,
    status: Option<i32>,
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
    /// Starts `cmd` (split into words, looked up in PATH, no shell, like `dtrace -c`), held
    /// stopped just before its exec until released, so `$target` is its pid and nothing it
    /// does is missed.
    pub fn spawn(cmd: &str) -> io::Result<Self> {
        use std::ffi::CString;
        let words = split_words(cmd);
        if words.is_empty() {
            return Err(io::Error::other("empty command"));
        }
        // The exec happens only once the probes are on: find out now whether it can.
        resolve(&words[0])?;
        let argv: Vec<CString> = words
            .iter()
            .map(|w| CString::new(w.as_str()).map_err(|_| io::Error::other("NUL in command")))
            .collect::<io::Result<_>>()?;
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // SAFETY: the child only calls async-signal-safe functions (raise, execvp, _exit) on
        // memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above; `ptrs` is a NULL-terminated array of C strings.
            unsafe {
                libc::raise(libc::SIGSTOP);
                libc::execvp(ptrs[0], ptrs.as_ptr());
                libc::_exit(127);
            }
        }
        let mut status = 0;
        // SAFETY: waits for our own child; WUNTRACED returns when it has stopped.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if r != pid || !libc::WIFSTOPPED(status) {
            return Err(io::Error::other(
                "the command exited before it could be held",
            ));
        }
        Ok(Self {
            pid,
            released: false,
            status: None,
        })
    }

    /// Its process id (`$target`).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets it run.
    pub fn release(&mut self) {
        if !self.released {
            // SAFETY: signals our own child.
            unsafe { libc::kill(self.pid, libc::SIGCONT) };
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
