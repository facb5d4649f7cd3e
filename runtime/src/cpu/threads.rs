//! The CPU backend's threads: created on a scheduler's first run and reused by every later run
//! of that scheduler (and of its clones), as rayon's and tokio's pools keep theirs. Spawning a
//! thread costs as much as a whole short run on some virtual machines; a benchmark's
//! repetitions would otherwise measure thread creation.
//!
//! A run takes a set of exactly as many threads as it needs at once (every lane of every worker,
//! plus the supervisor) and runs one closure on each of them ([`ThreadSet::broadcast`]); the call
//! returns when all have finished. Between runs the threads sleep on a condition variable: unlike
//! a work-stealing pool's idle threads they do not spin, so they take no CPU time from the next
//! run (or from the baselines measured next to it).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The closure of one broadcast, with its lifetime erased (see `broadcast`).
type Job = &'static (dyn Fn(usize) + Sync);

#[derive(Default)]
struct State {
    /// Bumped by every broadcast; a thread runs the job once per generation.
    generation: u64,
    job: Option<Job>,
    /// Threads that have not finished the current job.
    running: usize,
    /// The first panic of the current job.
    panic: Option<Box<dyn std::any::Any + Send>>,
    shutdown: bool,
}

struct Inner {
    state: Mutex<State>,
    /// Wakes the threads for a job or for shutdown.
    start: Condvar,
    /// Wakes the broadcaster when the last thread finished.
    done: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic is caught before it could poison the lock; recover the state regardless.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A fixed set of threads that run one closure each per [`ThreadSet::broadcast`].
pub struct ThreadSet {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    /// One broadcast at a time (a second caller waits).
    busy: Mutex<()>,
}

impl ThreadSet {
    /// Starts `count` threads named `{name}-{i}`; with `pin`, thread `i` is bound to a CPU as
    /// [`cpu_binding`] says.
    pub fn new(count: usize, name: &str, pin: bool) -> Result<ThreadSet> {
        let cpus = cpu_binding(count, pin);
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            start: Condvar::new(),
            done: Condvar::new(),
        });
        let mut set = ThreadSet {
            inner: inner.clone(),
            threads: Vec::with_capacity(count),
            busy: Mutex::new(()),
        };
        for index in 0..count {
            let inner = inner.clone();
            let cpu = cpus.get(index).copied();
            let handle = std::thread::Builder::new()
                .name(format!("{name}-{index}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        pin_current_thread(cpu);
                    }
                    thread_loop(&inner, index)
                })
                .map_err(|e| Error::Config(format!("cannot start CPU thread {index}: {e}")))?;
            set.threads.push(handle);
        }
        Ok(set)
    }

    /// The number of threads.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Whether the set has no thread.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Runs `job(i)` on thread `i` of the set, for every thread at once, and returns their
    /// results in thread order when all have finished. A panic of any thread is resumed here
    /// after all have finished.
    pub fn broadcast<R: Send>(&self, job: impl Fn(usize) -> R + Sync) -> Vec<R> {
        self.broadcast_while(job, |_| ()).0
    }

    /// [`Self::broadcast`], running `meanwhile` on the calling thread while the set runs `job`
    /// (the caller is awake already: a supervisor there costs no extra thread wake-up).
    /// `meanwhile` gets the job's [`Completion`], to sleep on until the threads finish.
    pub fn broadcast_while<R: Send, M>(
        &self,
        job: impl Fn(usize) -> R + Sync,
        meanwhile: impl FnOnce(&Completion<'_>) -> M,
    ) -> (Vec<R>, M) {
        let _one_at_a_time = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let results: Vec<Mutex<Option<R>>> = (0..self.len()).map(|_| Mutex::new(None)).collect();
        let run = |i: usize| {
            let r = job(i);
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        };
        let run: &(dyn Fn(usize) + Sync) = &run;
        // SAFETY: the erased reference is used only by the set's threads for this generation,
        // and this function does not return (nor unwind) before every thread has finished with
        // it: it waits for `running` to reach 0 below, and a thread's panic is caught in `thread_loop`.
        let run: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(run) };
        {
            let mut state = self.inner.lock();
            state.job = Some(run);
            state.running = self.len();
            state.generation += 1;
            self.inner.start.notify_all();
        }
        // The threads must be waited for even if `meanwhile` panics (they use `run`).
        let completion = Completion { inner: &self.inner };
        let meanwhile = catch_unwind(AssertUnwindSafe(|| meanwhile(&completion)));
        let mut state = self.inner.lock();
        while state.running > 0 {
            state = self
                .inner
                .done
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
        state.job = None;
        let panic = state.panic.take();
        drop(state);
        if let Some(p) = panic {
            resume_unwind(p);
        }
        let meanwhile = meanwhile.unwrap_or_else(|p| resume_unwind(p));
        let results = results
            .into_iter()
            .map(|r| {
                r.into_inner()
                    .unwrap_or_else(|e| e.into_inner())
                    .expect("every thread ran the job")
            })
            .collect();
        (results, meanwhile)
    }
}

/// The end of the current broadcast, as the calling thread sees it.
pub struct Completion<'a> {
    inner: &'a Inner,
}

impl Completion<'_> {
    /// Sleeps until every thread has finished the job or `timeout` has passed; true if they
    /// have finished. The last thread to finish wakes the sleeper, so a supervisor that polls
    /// through this costs a run no wake-up of its own unless the run outlasts `timeout`.
    pub fn wait(&self, timeout: Duration) -> bool {
        let state = self.inner.lock();
        let (state, _) = self
            .inner
            .done
            .wait_timeout_while(state, timeout, |s| s.running > 0)
            .unwrap_or_else(|e| e.into_inner());
        state.running == 0
    }
}

/// How long a run lasted: from its start until the last of its threads left the worker loop
/// (each thread calls [`RunClock::finished`] right after its loop). Both CPU backends are timed
/// this way, not until the calling thread has been woken, so that their figures compare.
pub struct RunClock {
    start: Instant,
    last_finish_ns: AtomicU64,
}

impl RunClock {
    /// A clock started now.
    pub fn start() -> RunClock {
        RunClock {
            start: Instant::now(),
            last_finish_ns: AtomicU64::new(0),
        }
    }

    /// When the run started (the workers' platform clocks count from it).
    pub fn started_at(&self) -> Instant {
        self.start
    }

    /// Records that the calling thread has left its loop.
    pub fn finished(&self) {
        // Relaxed: a maximum of independent samples, read after every thread has been joined.
        self.last_finish_ns
            .fetch_max(self.start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// The run's duration: until the last [`Self::finished`].
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.last_finish_ns.load(Ordering::Relaxed))
    }
}

/// The CPUs to bind `count` threads to, thread `i` to entry `i`: the CPUs this process may use
/// when `pin` is set and there are at least `count` of them; else none (with more threads than
/// CPUs, binding would stop the kernel from spreading the extra ones where they fit).
pub fn cpu_binding(count: usize, pin: bool) -> Vec<usize> {
    let cpus = if pin { allowed_cpus() } else { Vec::new() };
    if cpus.len() < count {
        return Vec::new();
    }
    cpus
}

/// The CPUs the process may run on (empty where that cannot be asked).
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

/// Binds the calling thread to `cpu`. Without it, a woken worker may wait for the scheduler's
/// periodic load balancing (milliseconds) on a busy CPU while another CPU idles; on a 2-CPU
/// virtual machine that delayed one worker of every short run. A failure leaves the
/// thread unbound, which is only slower.
pub fn pin_current_thread(cpu: usize) {
    if !bind_current_thread(&[cpu]) {
        tracing::debug!(cpu, "could not bind a CPU worker thread");
    }
}

/// Binds the calling thread to `cpus` (ids the process may use, as `allowed_cpus` lists them);
/// threads it starts later inherit the set. Returns whether the OS accepted it.
#[cfg(target_os = "linux")]
pub fn bind_current_thread(cpus: &[usize]) -> bool {
    // SAFETY: the set is a local, initialised by zeroing and CPU_SET, which stays within it for
    // ids below CPU_SETSIZE (those sched_getaffinity reports); pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(not(target_os = "linux"))]
pub fn bind_current_thread(_cpus: &[usize]) -> bool {
    false
}

/// Thread `index`'s loop: run each generation's job once, sleep in between.
fn thread_loop(inner: &Inner, index: usize) {
    let mut seen = 0u64;
    loop {
        let job = {
            let mut state = inner.lock();
            while state.generation == seen && !state.shutdown {
                state = inner.start.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            if state.shutdown {
                return;
            }
            seen = state.generation;
            state.job.expect("a job comes with its generation")
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| job(index)));
        let mut state = inner.lock();
        if let Err(p) = outcome {
            state.panic.get_or_insert(p);
        }
        state.running -= 1;
        if state.running == 0 {
            inner.done.notify_all();
        }
    }
}

impl Drop for ThreadSet {
    fn drop(&mut self) {
        self.inner.lock().shutdown = true;
        self.inner.start.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Thread sets of one scheduler, by size.
#[derive(Default)]
pub struct ThreadSets {
    sets: Mutex<Vec<Arc<ThreadSet>>>,
}

impl std::fmt::Debug for ThreadSets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes: Vec<usize> = self.lock().iter().map(|s| s.len()).collect();
        f.debug_struct("ThreadSets").field("sizes", &sizes).finish()
    }
}

impl ThreadSets {
    fn lock(&self) -> MutexGuard<'_, Vec<Arc<ThreadSet>>> {
        self.sets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The set of `threads` threads named `{name}-{i}`, created on first use (`pin`: see
    /// [`ThreadSet::new`]).
    pub fn get(&self, threads: usize, name: &str, pin: bool) -> Result<Arc<ThreadSet>> {
        let mut sets = self.lock();
        if let Some(set) = sets.iter().find(|s| s.len() == threads) {
            return Ok(set.clone());
        }
        let set = Arc::new(ThreadSet::new(threads, name, pin)?);
        sets.push(set.clone());
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_thread_runs_each_broadcast_once_and_all_at_once() {
        let set = ThreadSet::new(4, "test", true).unwrap();
        for round in 0..50 {
            // A barrier inside the job: it completes only if all four run concurrently.
            let barrier = std::sync::Barrier::new(4);
            let count = AtomicUsize::new(0);
            let out = set.broadcast(|i| {
                count.fetch_add(1, Ordering::Relaxed);
                barrier.wait();
                i * 10 + round
            });
            assert_eq!(out, vec![round, 10 + round, 20 + round, 30 + round]);
            assert_eq!(count.load(Ordering::Relaxed), 4);
        }
        // The caller's part runs while the set runs (here: it releases them, then sleeps until
        // they have finished; before the release, they cannot have).
        let go = AtomicUsize::new(0);
        let (out, caller) = set.broadcast_while(
            |i| {
                while go.load(Ordering::Acquire) == 0 {
                    std::hint::spin_loop();
                }
                i
            },
            |done| {
                assert!(!done.wait(std::time::Duration::from_millis(10)));
                go.store(1, Ordering::Release);
                assert!(done.wait(std::time::Duration::from_secs(60)));
                "caller"
            },
        );
        assert_eq!((out, caller), (vec![0, 1, 2, 3], "caller"));
    }

    #[test]
    fn a_panic_is_resumed_after_every_thread_finished_and_the_set_stays_usable() {
        let set = ThreadSet::new(3, "test", false).unwrap();
        let finished = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            set.broadcast(|i| {
                if i == 1 {
                    panic!("thread 1 fails");
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
                finished.fetch_add(1, Ordering::Relaxed);
            })
        }));
        assert!(r.is_err());
        assert_eq!(finished.load(Ordering::Relaxed), 2);
        assert_eq!(set.broadcast(|i| i), vec![0, 1, 2]);
    }

    #[test]
    fn a_run_clock_stops_at_the_last_thread_to_finish() {
        let set = ThreadSet::new(2, "test", false).unwrap();
        let clock = RunClock::start();
        assert_eq!(clock.elapsed(), Duration::ZERO);
        set.broadcast(|i| {
            std::thread::sleep(Duration::from_millis(if i == 1 { 40 } else { 1 }));
            clock.finished();
        });
        let elapsed = clock.elapsed();
        assert!(elapsed >= Duration::from_millis(40), "{elapsed:?}");
        assert!(elapsed <= clock.started_at().elapsed());
    }

    #[test]
    fn sets_are_kept_by_size() {
        let sets = ThreadSets::default();
        let a = sets.get(2, "test", false).unwrap();
        let b = sets.get(2, "test", false).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(sets.get(3, "test", false).unwrap().len(), 3);
    }
}
