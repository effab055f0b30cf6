//! Progress on a terminal for long work that gives no progress of its own (LOAD's one
//! ioctl attaching thousands of probes, `-l` over tens of thousands): after a second, a
//! line on standard error that says what is going on and for how long, rewritten every
//! second and erased when the work ends. Only when standard error is a terminal that can
//! erase a line (TERM set, and not `dumb`): a pipe, a file or a serial console such as the
//! test guest's (TERM=dumb, whose log would keep the line) gets nothing.

use std::io::{self, IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A progress line kept up by a thread until dropped.
pub struct Ticker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts a ticker for `what` ("attaching 12000 probes") if standard error is a
    /// terminal that can erase a line.
    pub fn start(what: &str) -> Option<Self> {
        let term = std::env::var("TERM").ok();
        (io::stderr().is_terminal() && erases(term.as_deref()))
            .then(|| Self::start_on(what, Duration::from_secs(1), io::stderr()))
    }

    /// Starts a ticker that writes to `out` once `after` has passed, then every second.
    pub fn start_on(what: &str, after: Duration, mut out: impl Write + Send + 'static) -> Self {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s = stop.clone();
        let what = what.to_string();
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let (lock, cv) = &*s;
            let mut wait = after;
            let mut shown = false;
            let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let (d, _) = cv
                    .wait_timeout_while(done, wait, |d| !*d)
                    .unwrap_or_else(|e| e.into_inner());
                done = d;
                if *done {
                    break;
                }
                let _ = write!(out, "\roxtrace: {what} ... {} s", t0.elapsed().as_secs());
                let _ = out.flush();
                shown = true;
                wait = Duration::from_secs(1);
            }
            if shown {
                // Erase the line: what follows starts on a clean one.
                let _ = write!(out, "\r\x1b[K");
                let _ = out.flush();
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

/// Whether a terminal of type `term` (the TERM variable) erases a line with `\r\e[K`: any
/// but none and `dumb`.
fn erases(term: Option<&str>) -> bool {
    term.is_some_and(|t| !t.is_empty() && t != "dumb")
}

impl Drop for Ticker {
    fn drop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_ticker_shows_what_and_erases_it() {
        let sink = Sink::default();
        let t = Ticker::start_on("attaching 3 probes", Duration::ZERO, sink.clone());
        // Wait for the condition (the line written), not for a time.
        while !String::from_utf8_lossy(&sink.0.lock().unwrap()).contains("attaching 3 probes") {
            std::thread::yield_now();
        }
        drop(t);
        let s = String::from_utf8_lossy(&sink.0.lock().unwrap()).into_owned();
        assert!(
            s.starts_with("\roxtrace: attaching 3 probes ... 0 s"),
            "{s:?}"
        );
        assert!(s.ends_with("\r\x1b[K"), "{s:?}");
    }

    #[test]
    fn dumb_terminals_get_no_progress() {
        assert!(erases(Some("xterm-256color")) && erases(Some("linux")));
        assert!(!erases(Some("dumb")) && !erases(Some("")) && !erases(None));
    }

    #[test]
    fn work_done_before_the_delay_prints_nothing() {
        let sink = Sink::default();
        drop(Ticker::start_on(
            "x",
            Duration::from_secs(3600),
            sink.clone(),
        ));
        assert!(sink.0.lock().unwrap().is_empty());
    }
}
