//! The PE processes of one run, as their launcher starts, watches and stops them.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use mgws_core::launch::{PE_DONE, PE_FAILED};

use super::device::ProcessPlaced;
use super::layout::{Header, PeKind, StartStage};
use super::pe::{HEAP_FD_VAR, PE_VAR};
use crate::error::{Error, Result};

/// How long the launcher waits for killed PEs to exit ([`Children::kill_all`]).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// The PE processes of one run.
pub(super) struct Children {
    /// The run's index of the first PE (`pes[i]` is PE `first + i`).
    pub(super) first: u32,
    pub(super) pes: Vec<PeProcess>,
    /// A PE that died early has been reported (later looks only reap).
    pub(super) reported: bool,
    /// When the launcher first saw every PE finished (its results final), while some PEs were
    /// still tearing down.
    pub(super) all_finished_at: Option<Instant>,
}

/// One PE process.
pub(super) struct PeProcess {
    pub(super) child: Child,
    /// How it exited, once reaped.
    pub(super) status: Option<ExitStatus>,
    /// A descriptor that becomes readable when it exits (`pidfd_open`, Linux 5.3), to sleep on;
    /// `None` where the kernel has none (then the launcher looks every millisecond).
    pub(super) exit_fd: Option<OwnedFd>,
}

impl PeProcess {
    fn new(child: Child) -> PeProcess {
        #[cfg(target_os = "linux")]
        // SAFETY: pidfd_open with a pid and no flags; it returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
        #[cfg(not(target_os = "linux"))]
        let fd = -1;
        PeProcess {
            child,
            status: None,
            // SAFETY: a descriptor pidfd_open just returned, owned by nothing else.
            exit_fd: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) }),
        }
    }
}

impl Children {
    /// Starts PEs `pes` as copies of `program`, each inheriting the heap's descriptor, with
    /// `env` added to their environment.
    pub(super) fn spawn(
        program: &Path,
        placed: &ProcessPlaced,
        pes: std::ops::Range<u32>,
        env: &[(OsString, OsString)],
    ) -> Result<Children> {
        let fd = placed.heap.inherit_fd();
        let launcher = std::process::id() as i32;
        let mut children = Children {
            first: pes.start,
            pes: Vec::new(),
            reported: false,
            all_finished_at: None,
        };
        for pe in pes {
            let mut command = Command::new(program);
            command
                .envs(env.iter().map(|(k, v)| (k, v)))
                .env(HEAP_FD_VAR, fd.to_string())
                .env(PE_VAR, pe.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            // SAFETY: the closure runs in the child between fork and exec and calls only
            // async-signal-safe functions (fcntl, prctl, getppid) on values copied into it.
            unsafe {
                command.pre_exec(move || inherit_and_follow_parent(fd, launcher));
            }
            match command.spawn() {
                Ok(child) => children.pes.push(PeProcess::new(child)),
                Err(e) => {
                    children.kill_all();
                    return Err(Error::Process(format!(
                        "cannot start PE {pe} as {}: {e}",
                        program.display()
                    )));
                }
            }
        }
        Ok(children)
    }

    /// Reaps every PE that has exited; the first one that exited before reporting its run as
    /// done is an error, returned once.
    pub(super) fn exited_early(&mut self, placed: &ProcessPlaced) -> Result<Option<Error>> {
        let header = placed.header();
        for (i, p) in self.pes.iter_mut().enumerate() {
            let pe = self.first as usize + i;
            if p.status.is_none() {
                p.status = p.child.try_wait().map_err(|e| {
                    Error::Process(format!(
                        "cannot wait for PE {pe} (pid {}): {e}",
                        p.child.id()
                    ))
                })?;
            }
            if self.reported {
                continue;
            }
            // Acquired: a finished or failed state publishes the PE's record.
            let state = header.pes[pe].state.load();
            let pid = p.child.id();
            // A PE that failed is reported at once, exited or not (a GPU PE may still be in
            // its driver's teardown, and the other PEs would wait for it).
            if state == PE_FAILED {
                self.reported = true;
                return Ok(Some(Error::Process(format!(
                    "PE {pe} (pid {pid}) failed: {}",
                    header.pes[pe].panic_message()
                ))));
            }
            let Some(status) = p.status else { continue };
            if state == PE_DONE {
                if !status.success() {
                    // Its results were final when it finished (a GPU PE ends with NVSHMEM's
                    // collective teardown, after its results).
                    tracing::warn!(pe, pid, %status, "a PE exited abnormally after finishing");
                }
                continue;
            }
            self.reported = true;
            return Ok(Some(Error::Process(
                if state == 0 && status.code() == Some(super::pe::EXIT_PE_FAILED) {
                    format!(
                        "PE {pe} (pid {pid}) could not join the run ({status}); it printed why \
                         on stderr"
                    )
                } else if state == 0 && header.pes[pe].stage() != StartStage::NotStarted {
                    // It read the heap, so it is a PE: it died in its set-up (a signal, or a
                    // library that exits on a fatal error).
                    format!(
                        "PE {pe} (pid {pid}) exited ({status}) while {}, before it was ready",
                        header.pes[pe].stage().describe()
                    )
                } else if state == 0 && status.code().is_none() {
                    // Ended by a signal before it read the heap: no sign the program is wrong.
                    format!(
                        "PE {pe} (pid {pid}) was ended ({status}) before it read the run's heap"
                    )
                } else if state == 0 {
                    format!(
                        "PE {pe} (pid {pid}) exited ({status}) before it joined the run: a \
                         program that runs jobs over processes must call \
                         mgws::processes::Pe::from_env() first in main and serve the PE it \
                         returns"
                    )
                } else if !header.gate.opened() {
                    // Ready, but the gate is closed: no worker of any PE ran.
                    format!(
                        "PE {pe} (pid {pid}) exited ({status}) at the launch gate, before the run \
                         started"
                    )
                } else {
                    format!(
                        "PE {pe} (pid {pid}) exited ({status}) before its workers finished; its \
                         tasks are lost, so the run stopped"
                    )
                },
            )));
        }
        Ok(None)
    }

    /// What each PE that is not ready is doing (its [`StartStage`]), for the error of a start-up
    /// that did not finish in time; a PE that is ready is left out.
    pub(super) fn late_report(&self, header: &Header, kind: PeKind) -> String {
        let late: Vec<String> = self
            .pes
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let pe = self.first as usize + i;
                let stage = header.pes[pe].stage();
                (stage != StartStage::Ready).then(|| {
                    let gpu = match kind {
                        PeKind::Cuda => format!(", GPU {}", header.gpus[pe]),
                        PeKind::Cpu => String::new(),
                    };
                    format!("PE {pe} (pid {}{gpu}) {}", p.child.id(), stage.describe())
                })
            })
            .collect();
        late.join("; ")
    }

    /// Whether every PE has exited (as reaped by [`Self::exited_early`]).
    pub(super) fn all_exited(&self) -> bool {
        self.pes.iter().all(|p| p.status.is_some())
    }

    /// Whether every PE has reported its part finished (acquired: its results are final).
    pub(super) fn all_finished(&self, header: &Header) -> bool {
        (0..self.pes.len()).all(|i| header.pes[self.first as usize + i].state.is_finished())
    }

    /// Sleeps until a PE that was running exits, or `timeout` passes (at most a millisecond
    /// where a PE has no exit descriptor).
    pub(super) fn sleep_until_an_exit(&self, timeout: Duration) {
        let running: Vec<&PeProcess> = self.pes.iter().filter(|p| p.status.is_none()).collect();
        let mut fds: Vec<libc::pollfd> = running
            .iter()
            .filter_map(|p| p.exit_fd.as_ref())
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if fds.len() < running.len() {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return;
        }
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` holds `fds.len()` initialised pollfds of open descriptors (owned by
        // `self`, which outlives the call).
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }

    /// Kills every PE still running and reaps them, waiting at most [`KILL_WAIT`]: a process
    /// in an uninterruptible wait (a hung file system, a GPU driver's teardown) dies only when
    /// that ends, and the launcher must not wait on it forever. True when every PE is reaped.
    pub(super) fn kill_all(&mut self) -> bool {
        for p in &mut self.pes {
            if p.status.is_none() {
                // A PE that exited meanwhile makes kill fail; it is reaped below either way.
                let _ = p.child.kill();
            }
        }
        let deadline = Instant::now() + KILL_WAIT;
        loop {
            for p in &mut self.pes {
                if p.status.is_none() {
                    p.status = p.child.try_wait().ok().flatten();
                }
            }
            if self.all_exited() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                let left: Vec<u32> = self
                    .pes
                    .iter()
                    .filter(|p| p.status.is_none())
                    .map(|p| p.child.id())
                    .collect();
                tracing::error!(
                    pids = ?left,
                    "PE processes killed {KILL_WAIT:?} ago have not exited (an uninterruptible \
                     wait); left behind"
                );
                return false;
            }
            self.sleep_until_an_exit(deadline - now);
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// In a PE process before exec: keep the heap's descriptor open across exec, and die with the
/// launching thread (a PE must not outlive its launcher; `launcher` is its pid, to catch a
/// launcher that died before the request took effect).
fn inherit_and_follow_parent(fd: i32, launcher: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor number with plain integer arguments.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // An error from the OS's number: building one with a message would allocate, which is not
    // async-signal-safe here (the parent learns only the number anyway).
    // SAFETY: getppid has no arguments and cannot fail.
    if unsafe { libc::getppid() } != launcher {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}
