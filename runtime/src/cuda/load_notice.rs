//! Notices while a GPU loads its kernel. The driver's JIT compile (and, for the device API, its
//! link with NVSHMEM's device library) runs inside one driver call that cannot be cancelled and
//! reports nothing; it runs before the run's start timeout and watchdog begin. A compile that
//! takes far longer than it should (docs/results.md: minutes for an entry that kept every function
//! of its module) would otherwise leave the process silent.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::ptx::PtxSource;

/// When the first notice is given: a first load on a fresh machine takes under 3 s
/// (docs/results.md), so a load past 10 s is worth a word.
const FIRST_NOTICE: Duration = Duration::from_secs(10);

/// How often it is repeated after the first.
const NOTICE_EVERY: Duration = Duration::from_secs(30);

/// Runs `load` on this thread; while it runs, calls `notice` with the time spent so far after
/// `first`, then every `every`, from a watcher thread. Returns what `load` returned; the watcher
/// has exited by then.
fn while_loading<T>(
    first: Duration,
    every: Duration,
    notice: impl Fn(Duration) + Sync,
    load: impl FnOnce() -> T,
) -> T {
    let started = Instant::now();
    let (done, watched) = mpsc::channel::<()>();
    let notice = &notice;
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut wait = first;
            // Ends once `done` is dropped (the load returned or panicked).
            while let Err(mpsc::RecvTimeoutError::Timeout) = watched.recv_timeout(wait) {
                notice(started.elapsed());
                wait = every;
            }
        });
        let loaded = load();
        drop(done);
        loaded
    })
}

/// Runs `load`, GPU `ordinal`'s load of kernel entry `entry` from `src` (`linked`: compiled and
/// linked with NVSHMEM's device library), warning after [`FIRST_NOTICE`] and every
/// [`NOTICE_EVERY`] while it runs.
pub fn watched_load<T>(
    ordinal: u32,
    entry: &str,
    src: &PtxSource,
    linked: bool,
    load: impl FnOnce() -> T,
) -> T {
    let warning = slow_load_warning(ordinal, entry, &src.origin, src.text.len(), linked);
    while_loading(FIRST_NOTICE, NOTICE_EVERY, warning, load)
}

/// The notice of a slow load, for [`while_loading`]: a warning naming the GPU, the entry, its
/// origin and how much PTX the driver compiles (`linked`: and links with NVSHMEM's device library).
fn slow_load_warning<'a>(
    ordinal: u32,
    entry: &'a str,
    origin: &'a str,
    ptx_bytes: usize,
    linked: bool,
) -> impl Fn(Duration) + Sync + 'a {
    let way = if linked {
        "compiling it and linking it with NVSHMEM's device library"
    } else {
        "JIT-compiling it"
    };
    move |spent| {
        tracing::warn!(
            "GPU {ordinal} has spent {:.0} s loading kernel entry `{entry}` of {origin} \
             ({ptx_bytes} bytes of PTX): the driver is {way}; the run starts once it is done",
            spent.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    // The counters are read after `while_loading` returned, when its scope has joined the
    // watcher: the join orders the watcher's adds before the reads, so Relaxed suffices.

    #[test]
    fn a_slow_load_is_announced_until_it_ends() {
        let notices = AtomicU32::new(0);
        let spent = std::sync::Mutex::new(Vec::new());
        let out = while_loading(
            Duration::from_millis(20),
            Duration::from_millis(20),
            |t| {
                notices.fetch_add(1, Ordering::Relaxed);
                spent.lock().unwrap().push(t);
            },
            || {
                std::thread::sleep(Duration::from_millis(170));
                7
            },
        );
        assert_eq!(out, 7);
        let after = notices.load(Ordering::Relaxed);
        assert!(
            after >= 2,
            "a load of 170 ms with notices every 20 ms: {after} notices"
        );
        let spent = spent.into_inner().unwrap();
        assert!(spent[0] >= Duration::from_millis(20), "{spent:?}");
        assert!(spent.windows(2).all(|w| w[0] < w[1]), "{spent:?}");
        // The watcher has exited: nothing is announced after the load.
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(notices.load(Ordering::Relaxed), after);
    }

    #[test]
    fn a_quick_load_is_not_announced() {
        let notices = AtomicU32::new(0);
        let started = Instant::now();
        while_loading(
            Duration::from_secs(5),
            Duration::from_secs(5),
            |_| {
                notices.fetch_add(1, Ordering::Relaxed);
            },
            || (),
        );
        assert_eq!(notices.load(Ordering::Relaxed), 0);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the watcher held the load up"
        );
    }
}
