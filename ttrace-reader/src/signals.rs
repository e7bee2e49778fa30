//! The signals that end a command (SIGINT, SIGTERM, SIGHUP), taken by a thread of their own
//! so that the command ends the way it chooses: `demo` removes its temporary device, `mount`
//! unmounts, `follow` prints its last events and its counts.

/// The ending signals, blocked in the thread that took them and in the threads it starts
/// afterwards: until [`Ending::on_signal`] is called, they wait.
pub struct Ending {
    set: libc::sigset_t,
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread. Call it before starting other
/// threads: a thread started earlier keeps the default action, which ends the process.
pub fn take() -> Ending {
    // SAFETY: the set is initialized by sigemptyset before it is used; pthread_sigmask only
    // reads it.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    Ending { set }
}

impl Ending {
    /// Runs `then` with the number of the first ending signal, on a thread of its own.
    pub fn on_signal(self, then: impl FnOnce(i32) + Send + 'static) {
        let set = self.set;
        std::thread::spawn(move || {
            let mut sig = 0;
            // SAFETY: `set` is an initialized set; sigwait writes the signal number.
            if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
                then(sig);
            }
        });
    }
}

/// Ends the process by `sig`, as its default action would have (so that a shell sees the
/// signal in the exit status).
pub fn end_by(sig: i32) -> ! {
    // SAFETY: the default action restored, the signal unblocked in this thread and sent to
    // it: it ends the process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut one: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}
