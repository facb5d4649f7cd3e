//! Panics of tasks on CPU threads: the first one is kept and becomes [`Error::TaskPanicked`].

use std::any::Any;
use std::sync::Mutex;

use super::barrier::LanePoisoned;
use super::platform::LaneGroup;
use crate::error::{Error, Result};

/// The first panic of a run's worker threads (the lanes of a poisoned worker unwind with
/// [`LanePoisoned`], which is not reported: the panic that poisoned it is).
#[derive(Default)]
pub struct FirstPanic(Mutex<Option<(u32, String)>>);

impl FirstPanic {
    /// Runs `lane`, a lane of worker `worker`. A panicking task must not hang the run: the
    /// worker's other lanes would wait at `barrier` forever, and the other workers until the
    /// watchdog. So a panic poisons the worker's barriers (the other lanes unwind too), calls `abort` to
    /// stop the other workers, and is kept for [`FirstPanic::into_result`].
    pub fn contain(
        &self,
        worker: u32,
        lanes: &LaneGroup,
        abort: impl FnOnce(),
        lane: impl FnOnce(),
    ) {
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(lane)) {
            lanes.poison();
            abort();
            self.record(worker, payload);
        }
    }

    /// Keeps `payload`, the panic of a lane of worker `worker`, if it is the first real one.
    fn record(&self, worker: u32, payload: Box<dyn Any + Send>) {
        if payload.is::<LanePoisoned>() {
            return;
        }
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "a panic with a non-text payload".to_string()
        };
        // A poisoned mutex only means another recording thread panicked: keep going.
        let mut first = self.0.lock().unwrap_or_else(|e| e.into_inner());
        first.get_or_insert((worker, message));
    }

    /// The first panic: its worker and message.
    pub fn into_first(self) -> Option<(u32, String)> {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err(Error::TaskPanicked)` if a task panicked.
    pub fn into_result(self) -> Result<()> {
        match self.into_first() {
            Some((worker, message)) => Err(Error::TaskPanicked { worker, message }),
            None => Ok(()),
        }
    }
}
