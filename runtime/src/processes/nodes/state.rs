//! What a node's launcher does with its link: node 0 (the coordinator) or a follower, through
//! the start, the run and the end of a run across nodes.

use std::borrow::Cow;
use std::ops::Range;
use std::time::{Duration, Instant};

use mgws_core::{
    AtomicWord, Env, HostWord, Ordering, Scope, WorkerProgress, WorkerStats, AREA_WRITABLE,
};
use mgws_tasks::TaskStruct;
use sha1::{Digest, Sha1};

use super::link::{self, Listener, Peer};
use super::wire::{self, Frame, Reader, Writer};
use super::Nodes;
use crate::error::{Error, Result};
use crate::initial::task_bytes;
use crate::processes::layout::Header;
use crate::processes::monotonic_ns;

/// How often a follower sends its workers' records to node 0 (at most; it sends at its
/// supervisor's polls, every 1 to 50 ms).
const RECORDS_EVERY: Duration = Duration::from_millis(20);

/// How often node 0 tells its followers that it is alive during the run.
const ALIVE_EVERY: Duration = Duration::from_secs(1);

/// How long a follower hears nothing from node 0 during the run before it counts node 0 as lost.
pub(crate) const NODE0_SILENCE: Duration = Duration::from_secs(30);

/// The fingerprint of a run: what every node must agree on (the build, the registry, the
/// settings, the topology, the initial tasks and the data areas, `tasks` and `areas` as the
/// heap holds them).
pub(crate) fn fingerprint(header: &Header, tasks: &[u8], areas: &[&[u8]]) -> [u8; 20] {
    let mut h = Sha1::new();
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.update(std::env::consts::ARCH.as_bytes());
    h.update(header.registry_fingerprint.to_le_bytes());
    h.update(format!("{:?}", header.config).as_bytes());
    h.update(format!("{:?}", header.topology).as_bytes());
    for word in [
        header.lanes,
        header.kind,
        header.max_registers,
        header.pe_transport,
    ] {
        h.update(word.to_le_bytes());
    }
    for word in header
        .chaos
        .iter()
        .chain([
            &header.chaos_on,
            &header.initial_len,
            &header.initial_indexed,
            &header.area_copies,
        ])
        .chain(&header.area_limits)
    {
        h.update(word.to_le_bytes());
    }
    h.update(task_bytes(std::slice::from_ref(&header.initial_template)));
    for bytes in std::iter::once(tasks).chain(areas.iter().copied()) {
        h.update((bytes.len() as u64).to_le_bytes());
        for digest in chunk_digests(bytes) {
            h.update(digest);
        }
    }
    h.finalize().into()
}

/// The bytes of one chunk [`chunk_digests`] hashes on its own.
const CHUNK_BYTES: usize = 64 << 20;

/// The SHA-1 of each 64 MiB chunk of `bytes`, hashed on as many threads as the process may use
/// (one thread took about 5 s for the 8 GiB of a MEMSET of 2^27 tasks). The chunks are fixed, so
/// every node gets the same digests whatever its number of CPUs.
fn chunk_digests(bytes: &[u8]) -> Vec<[u8; 20]> {
    let chunks: Vec<&[u8]> = bytes.chunks(CHUNK_BYTES).collect();
    let mut digests = vec![[0u8; 20]; chunks.len()];
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, chunks.len().max(1));
    let per_thread = chunks.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for (mine, out) in chunks
            .chunks(per_thread)
            .zip(digests.chunks_mut(per_thread))
        {
            scope.spawn(move || {
                for (chunk, digest) in mine.iter().zip(out) {
                    *digest = Sha1::digest(chunk).into();
                }
            });
        }
    });
    digests
}

/// Where a node's launcher stands after a look at its link during the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeStart {
    /// Still waiting (for followers, for readiness, for the opening).
    Waiting,
    /// Every node's PEs are at their gates: node 0 opens; a follower was told to open.
    Open,
}

/// A node launcher's link to the other nodes.
pub(crate) enum NodeLink {
    Coordinator(Coordinator),
    Follower(Follower),
}

/// Node 0's side: the listener and one connection per follower.
pub(crate) struct Coordinator {
    nodes: Nodes,
    fingerprint: [u8; 20],
    listener: Listener,
    /// Welcomed followers.
    peers: Vec<Peer>,
    ready: Vec<bool>,
    /// Each follower's final results ([`Frame::Done`]), by node.
    done: Vec<Option<Vec<u8>>>,
    /// NVSHMEM's unique ID, once PE 0 made it.
    unique_id: Option<Box<[u8; 128]>>,
    /// When the gates opened, on this machine's monotonic clock.
    open_ns: u64,
    /// The followers were sent the run's results or its failure.
    concluded: bool,
    /// When node 0 last told its followers it is alive.
    last_alive: Option<Instant>,
}

/// A follower's side: its connection to node 0.
pub(crate) struct Follower {
    rank: u32,
    peer: Peer,
    ready_sent: bool,
    /// When node 0 said to open, on this machine's monotonic clock.
    open_ns: Option<u64>,
    /// Node 0 asked for an abort.
    abort_seen: bool,
    /// The run's results, once node 0 sent them.
    results: Option<Vec<u8>>,
    last_records: Option<Instant>,
    /// Node 0 was told of this node's failure.
    concluded: bool,
}

impl NodeLink {
    /// Node 0 listens; a follower connects and is greeted (waiting for node 0 up to `limit`).
    pub fn open(nodes: &Nodes, fingerprint: [u8; 20], limit: Duration) -> Result<NodeLink> {
        if nodes.rank == 0 {
            let listener = Listener::bind(nodes)?;
            let n = nodes.count as usize;
            Ok(NodeLink::Coordinator(Coordinator {
                nodes: nodes.clone(),
                fingerprint,
                listener,
                peers: Vec::new(),
                ready: vec![false; n],
                done: vec![None; n],
                unique_id: None,
                open_ns: 0,
                concluded: false,
                last_alive: None,
            }))
        } else {
            let peer = link::connect(nodes, fingerprint, limit)?;
            Ok(NodeLink::Follower(Follower {
                rank: nodes.rank,
                peer,
                ready_sent: false,
                open_ns: None,
                abort_seen: false,
                results: None,
                last_records: None,
                concluded: false,
            }))
        }
    }

    /// One look during the start: `local_ready` says whether this node's PEs are all at its
    /// gate. Node 0 greets followers, forwards the unique ID and collects readiness; a follower
    /// passes the ID into its heap and reports readiness.
    pub fn poll_start(&mut self, header: &Header, local_ready: bool) -> Result<NodeStart> {
        match self {
            NodeLink::Coordinator(c) => c.poll_start(header, local_ready),
            NodeLink::Follower(f) => f.poll_start(header, local_ready),
        }
    }

    /// Node 0: tells every follower to open its gate. Returns when the gates opened, on this
    /// machine's monotonic clock.
    pub fn open_gates(&mut self) -> Result<()> {
        if let NodeLink::Coordinator(c) = self {
            c.open_ns = monotonic_ns();
            for p in &mut c.peers {
                p.send(&Frame::Open)?;
            }
        }
        Ok(())
    }

    /// Node 0: which nodes are not ready yet (for a start-up timeout's error).
    pub fn late_nodes(&self) -> String {
        match self {
            NodeLink::Coordinator(c) => {
                let late: Vec<String> = (1..c.nodes.count)
                    .filter(|&n| !c.ready[n as usize])
                    .map(|n| {
                        if c.peers.iter().any(|p| p.node == n) {
                            format!("node {n} (connected, its PEs not ready)")
                        } else {
                            format!("node {n} (never connected to {})", c.nodes.coordinator)
                        }
                    })
                    .collect();
                late.join(", ")
            }
            NodeLink::Follower(_) => "node 0 did not open the gates".into(),
        }
    }

    /// One look during the run. Node 0 writes followers' records into its heap (`env`) and
    /// keeps their final results; a follower sends its records (at most every 20 ms) and notes
    /// an abort or the results. A failure on the other side is an error.
    pub fn poll_run(&mut self, env: &Env<HostWord, TaskStruct>, pes: Range<u32>) -> Result<()> {
        match self {
            NodeLink::Coordinator(c) => c.poll_run(env),
            NodeLink::Follower(f) => f.poll_run(env, pes),
        }
    }

    /// Node 0: the followers that have not sent their final results (for an error).
    pub fn nodes_not_done(&self) -> String {
        match self {
            NodeLink::Coordinator(c) => {
                let late: Vec<String> = (1..c.nodes.count as usize)
                    .filter(|&n| c.done[n].is_none())
                    .map(|n| format!("node {n}"))
                    .collect();
                late.join(", ")
            }
            NodeLink::Follower(_) => String::new(),
        }
    }

    /// Node 0: whether every follower sent its final results. A follower: always.
    pub fn all_done(&self) -> bool {
        match self {
            NodeLink::Coordinator(c) => c.done[1..].iter().all(Option::is_some),
            NodeLink::Follower(_) => true,
        }
    }

    /// A follower: whether node 0 asked for an abort.
    pub fn abort_requested(&self) -> bool {
        matches!(self, NodeLink::Follower(f) if f.abort_seen)
    }

    /// Node 0: asks every follower to abort (best effort: a follower that is gone has stopped).
    pub fn abort(&mut self) {
        if let NodeLink::Coordinator(c) = self {
            for p in &mut c.peers {
                let _ = p.send(&Frame::Abort);
            }
        }
    }

    /// Tells the other side that this node's part failed with `e` (best effort), once.
    pub fn fail(&mut self, e: &Error) {
        let frame = Frame::Failed {
            kind: e.kind().into(),
            message: e.to_string(),
        };
        match self {
            NodeLink::Coordinator(c) if !c.concluded => {
                c.concluded = true;
                for p in &mut c.peers {
                    let _ = p.send(&frame);
                }
            }
            NodeLink::Follower(f) if !f.concluded => {
                f.concluded = true;
                let _ = f.peer.send(&frame);
            }
            _ => {}
        }
    }

    /// Node 0, at the end: adds every follower's results into its heap (`env`; `area(i)` is
    /// writable area `i` in the heap, `None` where area `i` is not writable), converting their
    /// PEs' times to this machine's clock. `set_span(pe, start_ns, elapsed_ns)` records a PE's
    /// time.
    ///
    /// # Safety
    /// Every PE of this node has finished, and `area` returns memory of the heap that nothing
    /// else reads or writes until this returns.
    pub unsafe fn merge_done(
        &mut self,
        env: &Env<HostWord, TaskStruct>,
        mut area: impl FnMut(usize) -> Option<(*mut u8, usize)>,
        mut set_span: impl FnMut(u32, u64, u64),
    ) -> Result<()> {
        let NodeLink::Coordinator(c) = self else {
            return Ok(());
        };
        for node in 1..c.nodes.count as usize {
            let bytes = c.done[node]
                .take()
                .ok_or_else(|| Error::Process(format!("node {node} sent no results")))?;
            let mut r = Reader::new(&bytes);
            apply_records(env, &mut r)?;
            if r.u64()? != 0 {
                let first = r.u32()? as usize;
                let stats: Vec<WorkerStats> = r.records()?;
                check_range(
                    first,
                    stats.len(),
                    env.config.workers as usize,
                    "statistics",
                )?;
                for (i, s) in stats.into_iter().enumerate() {
                    // SAFETY: the heap holds one statistics block per worker (range checked);
                    // every PE has finished.
                    unsafe { env.stats.add(first + i).write_volatile(s) };
                }
            }
            for _ in 0..r.u32()? {
                let (pe, after_open, elapsed) = (r.u32()?, r.u64()?, r.u64()?);
                set_span(pe, c.open_ns + after_open, elapsed);
            }
            for _ in 0..r.u32()? {
                let index = r.u32()? as usize;
                let (at, len) = area(index).ok_or_else(|| {
                    Error::Process(format!(
                        "node {node} sent changes of data area {index}, which is not writable"
                    ))
                })?;
                // SAFETY: the caller's contract: the area's bytes in the heap, used by nothing
                // else now.
                let dst = unsafe { std::slice::from_raw_parts_mut(at, len) };
                wire::apply_area_delta(&mut r, dst)?;
            }
        }
        Ok(())
    }

    /// Node 0: sends the run's results to every follower.
    pub fn send_results(&mut self, results: Vec<u8>) -> Result<()> {
        let mut first_error = None;
        if let NodeLink::Coordinator(c) = self {
            c.concluded = true;
            let frame = Frame::Results(results);
            // Every follower, whatever happened to another: one that misses them fails on its
            // own (its connection ends with this process).
            for p in &mut c.peers {
                if let Err(e) = p.send(&frame) {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// A follower, at the end: sends its results and waits (at most `limit`) for the run's.
    pub fn exchange_results(&mut self, done: Vec<u8>, limit: Duration) -> Result<Vec<u8>> {
        let NodeLink::Follower(f) = self else {
            unreachable!("node 0 sends results, it does not wait for them");
        };
        f.peer.send(&Frame::Done(done))?;
        let began = Instant::now();
        loop {
            if let Some(results) = f.results.take() {
                f.concluded = true;
                return Ok(results);
            }
            match f.peer.next_within(Duration::from_millis(10))? {
                Some(Frame::Results(r)) => f.results = Some(r),
                Some(Frame::Failed { kind, message }) => {
                    f.concluded = true;
                    return Err(Error::on_node(0, &kind, message));
                }
                Some(_) | None => {}
            }
            if began.elapsed() > limit {
                return Err(Error::Process(format!(
                    "node {}'s PEs finished, but node 0 sent no results within {limit:?}",
                    f.rank
                )));
            }
        }
    }

    /// A follower: when the gates opened on this machine's clock (0 before).
    pub fn open_ns(&self) -> u64 {
        match self {
            NodeLink::Coordinator(c) => c.open_ns,
            NodeLink::Follower(f) => f.open_ns.unwrap_or(0),
        }
    }
}

impl Drop for NodeLink {
    fn drop(&mut self) {
        // The other side must not wait for a node that is gone.
        self.fail(&Error::Process(
            "its launcher ended before the run's results".into(),
        ));
    }
}

impl Coordinator {
    fn poll_start(&mut self, header: &Header, local_ready: bool) -> Result<NodeStart> {
        while let Some((stream, hello)) = self.listener.accept()? {
            let Frame::Hello {
                node,
                nodes,
                fingerprint,
            } = hello
            else {
                unreachable!("accept returns hellos")
            };
            let refusal = if nodes != self.nodes.count || node == 0 || node >= nodes {
                Some(format!(
                    "it is node {node} of {nodes}, but this run has {} nodes (followers 1 to {})",
                    self.nodes.count,
                    self.nodes.count - 1
                ))
            } else if self.peers.iter().any(|p| p.node == node) {
                Some(format!("node {node} is connected already"))
            } else if fingerprint != self.fingerprint {
                Some(
                    "it runs another job (its registry, settings, PE count, data area sizes or \
                     initial tasks differ from node 0's; every node must run the same command \
                     on the same inputs and the same build of mgws)"
                        .into(),
                )
            } else {
                None
            };
            match link::answer(stream, node, refusal) {
                Ok(mut peer) => {
                    if let Some(id) = &self.unique_id {
                        peer.send(&Frame::UniqueId(id.clone()))?;
                    }
                    tracing::debug!(node, "a follower joined");
                    self.peers.push(peer);
                }
                // A refused launcher learns why; the run goes on without it (and fails at the
                // start-up timeout if the right one never comes).
                Err(e) => tracing::warn!(error = %e, "a node launcher was refused"),
            }
        }
        if self.unique_id.is_none() {
            if let Some(id) = header.wait_unique_id(|| false) {
                let id = Box::new(id);
                for p in &mut self.peers {
                    p.send(&Frame::UniqueId(id.clone()))?;
                }
                self.unique_id = Some(id);
            }
        }
        for p in &mut self.peers {
            while let Some(frame) = p.try_next()? {
                match frame {
                    Frame::Ready => self.ready[p.node as usize] = true,
                    Frame::Failed { kind, message } => {
                        return Err(Error::on_node(p.node, &kind, message))
                    }
                    other => tracing::warn!(node = p.node, ?other, "unexpected at the start"),
                }
            }
        }
        let all = local_ready && self.ready[1..].iter().all(|&r| r);
        Ok(if all {
            NodeStart::Open
        } else {
            NodeStart::Waiting
        })
    }

    fn poll_run(&mut self, env: &Env<HostWord, TaskStruct>) -> Result<()> {
        if self.last_alive.is_none_or(|t| t.elapsed() >= ALIVE_EVERY) {
            self.last_alive = Some(Instant::now());
            for p in &mut self.peers {
                // A follower that is gone shows when its frames are read below.
                let _ = p.send(&Frame::Alive);
            }
        }
        for p in &mut self.peers {
            if self.done[p.node as usize].is_some() {
                // Finished: the connection now only carries the end of the run.
                continue;
            }
            while let Some(frame) = p.try_next()? {
                match frame {
                    Frame::Records(bytes) => apply_records(env, &mut Reader::new(&bytes))?,
                    Frame::Done(bytes) => {
                        self.done[p.node as usize] = Some(bytes);
                        break;
                    }
                    Frame::Failed { kind, message } => {
                        return Err(Error::on_node(p.node, &kind, message))
                    }
                    other => tracing::warn!(node = p.node, ?other, "unexpected during the run"),
                }
            }
        }
        Ok(())
    }
}

impl Follower {
    fn poll_start(&mut self, header: &Header, local_ready: bool) -> Result<NodeStart> {
        if local_ready && !self.ready_sent {
            self.peer.send(&Frame::Ready)?;
            self.ready_sent = true;
        }
        while let Some(frame) = self.peer.try_next()? {
            match frame {
                Frame::UniqueId(id) => header.publish_unique_id(&id),
                Frame::Open => self.open_ns = Some(monotonic_ns()),
                Frame::Failed { kind, message } => return Err(Error::on_node(0, &kind, message)),
                Frame::Abort => {
                    return Err(Error::Process("node 0 stopped the run's start".into()))
                }
                other => tracing::warn!(?other, "unexpected at the start"),
            }
        }
        Ok(if self.open_ns.is_some() {
            NodeStart::Open
        } else {
            NodeStart::Waiting
        })
    }

    fn poll_run(&mut self, env: &Env<HostWord, TaskStruct>, pes: Range<u32>) -> Result<()> {
        if self
            .last_records
            .is_none_or(|t| t.elapsed() >= RECORDS_EVERY)
        {
            let mut w = Writer::default();
            encode_records(env, pes, &mut w);
            self.peer.send(&Frame::Records(w.0))?;
            self.last_records = Some(Instant::now());
        }
        while let Some(frame) = self.peer.try_next()? {
            match frame {
                Frame::Alive => {}
                Frame::Abort => self.abort_seen = true,
                Frame::Results(r) => self.results = Some(r),
                Frame::Failed { kind, message } => {
                    self.concluded = true;
                    return Err(Error::on_node(0, &kind, message));
                }
                other => tracing::warn!(?other, "unexpected during the run"),
            }
        }
        if self.peer.silent_for() > NODE0_SILENCE {
            return Err(Error::Process(format!(
                "node 0's launcher sent nothing for {NODE0_SILENCE:?} during the run (it tells \
                 every node it is alive once a second): node 0 is lost"
            )));
        }
        Ok(())
    }
}

fn check_range(first: usize, len: usize, total: usize, what: &str) -> Result<()> {
    if first.checked_add(len).is_none_or(|end| end > total) {
        return Err(Error::Process(format!(
            "a node sent {what} {first}..+{len} of a run with {total}"
        )));
    }
    Ok(())
}

/// The watched records of the workers, queues and idle counters of PEs `pes`, from the heap.
pub(crate) fn encode_records(env: &Env<HostWord, TaskStruct>, pes: Range<u32>, w: &mut Writer) {
    let t = &env.topology;
    let workers = t.first_worker[pes.start as usize]..t.first_worker[pes.end as usize];
    let queues = t.first_queue[pes.start as usize]..t.first_queue[pes.end as usize];
    let progress: Vec<WorkerProgress> = workers
        .clone()
        // SAFETY: one record per worker in the heap; the PEs write them with volatile stores
        // and a torn read only delays the watchdog.
        .map(|wk| unsafe { env.progress.add(wk as usize).read_volatile() })
        .collect();
    let tags: Vec<u64> = workers
        .clone()
        // SAFETY: one task-tag word per worker in the heap, as above.
        .map(|wk| unsafe { env.task_tags.add(wk as usize).read_volatile() })
        .collect();
    // Relaxed loads: diagnostics for the hang report.
    let words: Vec<u64> = queues
        .clone()
        .map(|q| {
            // SAFETY: the heap holds every queue's header.
            unsafe { env.header(q) }
                .word
                .load(Ordering::Relaxed, Scope::System)
        })
        .collect();
    let idle: Vec<u64> = pes
        .clone()
        .map(|p| {
            // SAFETY: the heap holds one idle counter per PE.
            unsafe { &*env.device_idle[p as usize] }
                .count
                .load(Ordering::Relaxed, Scope::System)
        })
        .collect();
    w.u32(workers.start)
        .blob(bytemuck::cast_slice(&progress))
        .blob(bytemuck::cast_slice(&tags))
        .u32(queues.start)
        .blob(bytemuck::cast_slice(&words))
        .u32(pes.start)
        .blob(bytemuck::cast_slice(&idle));
}

/// Writes records [`encode_records`] made into the heap of `env`.
pub(crate) fn apply_records(env: &Env<HostWord, TaskStruct>, r: &mut Reader<'_>) -> Result<()> {
    let t = &env.topology;
    let first = r.u32()? as usize;
    let progress: Vec<WorkerProgress> = r.records()?;
    let tags: Vec<u64> = r.records()?;
    check_range(
        first,
        progress.len(),
        t.workers() as usize,
        "worker records",
    )?;
    check_range(first, tags.len(), t.workers() as usize, "task tags")?;
    for (i, p) in progress.into_iter().enumerate() {
        // SAFETY: one record per worker in the heap (range checked); the watchdog reads them
        // volatile.
        unsafe { env.progress.add(first + i).write_volatile(p) };
    }
    for (i, tag) in tags.into_iter().enumerate() {
        // SAFETY: one word per worker in the heap (range checked).
        unsafe { env.task_tags.add(first + i).write_volatile(tag) };
    }
    let first_queue = r.u32()?;
    let words: Vec<u64> = r.records()?;
    check_range(
        first_queue as usize,
        words.len(),
        t.queues() as usize,
        "queue words",
    )?;
    for (i, word) in words.into_iter().enumerate() {
        // SAFETY: the heap holds every queue's header (range checked). Relaxed: diagnostics.
        unsafe { env.header(first_queue + i as u32) }.word.store(
            word,
            Ordering::Relaxed,
            Scope::System,
        );
    }
    let first_pe = r.u32()? as usize;
    let idle: Vec<u64> = r.records()?;
    check_range(first_pe, idle.len(), t.devices as usize, "idle counters")?;
    for (i, count) in idle.into_iter().enumerate() {
        // SAFETY: the heap holds one counter per PE (range checked). Relaxed: diagnostics.
        unsafe { &*env.device_idle[first_pe + i] }.count.store(
            count,
            Ordering::Relaxed,
            Scope::System,
        );
    }
    Ok(())
}

/// A follower's final results: its records, its workers' statistics (if the run collects
/// them), each PE's start after the gates opened and its time, and the changes its PEs made to
/// each writable area (`areas`: index, the heap's bytes now, the job's bytes before the run).
pub(crate) fn encode_done(
    env: &Env<HostWord, TaskStruct>,
    pes: Range<u32>,
    stats: bool,
    spans: &[(u32, u64, u64)],
    areas: &[(u32, &[u8], &[u8])],
) -> Vec<u8> {
    let mut w = Writer::default();
    encode_records(env, pes.clone(), &mut w);
    let t = &env.topology;
    let workers = t.first_worker[pes.start as usize]..t.first_worker[pes.end as usize];
    if stats {
        let s: Vec<WorkerStats> = workers
            .clone()
            // SAFETY: one statistics block per worker in the heap; the PEs finished.
            .map(|wk| unsafe { env.stats.add(wk as usize).read_volatile() })
            .collect();
        w.u64(1).u32(workers.start).blob(bytemuck::cast_slice(&s));
    } else {
        w.u64(0);
    }
    w.u32(spans.len() as u32);
    for &(pe, after_open, elapsed) in spans {
        w.u32(pe).u64(after_open).u64(elapsed);
    }
    w.u32(areas.len() as u32);
    for &(index, now, was) in areas {
        w.u32(index);
        wire::encode_area_delta(&mut w, now, was);
    }
    w.0
}

/// The run's results node 0 sends every follower: node 0 encodes them from what it read back
/// (borrowed: a writable area may be gigabytes), a follower decodes them (owned).
#[derive(Debug, PartialEq)]
pub(crate) struct RunResults<'a> {
    pub elapsed_ns: u64,
    pub launch_s: f64,
    pub error: u64,
    pub exited_workers: Option<u64>,
    pub stats: Option<Cow<'a, [WorkerStats]>>,
    pub progress: Cow<'a, [WorkerProgress]>,
    /// Writable areas: index and bytes.
    pub areas: Vec<(u32, Cow<'a, [u8]>)>,
}

impl RunResults<'_> {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u64(self.elapsed_ns)
            .u64(self.launch_s.to_bits())
            .u64(self.error)
            .u64(self.exited_workers.unwrap_or(u64::MAX));
        match &self.stats {
            Some(s) => w.u64(1).blob(bytemuck::cast_slice(s)),
            None => w.u64(0),
        };
        w.blob(bytemuck::cast_slice(&self.progress));
        w.u32(self.areas.len() as u32);
        for (index, bytes) in &self.areas {
            w.u32(*index).blob(bytes);
        }
        w.0
    }

    pub fn decode(bytes: &[u8]) -> Result<RunResults<'static>> {
        let mut r = Reader::new(bytes);
        let elapsed_ns = r.u64()?;
        let launch_s = f64::from_bits(r.u64()?);
        let error = r.u64()?;
        let exited_workers = Some(r.u64()?).filter(|&n| n != u64::MAX);
        let stats = if r.u64()? != 0 {
            Some(Cow::Owned(r.records()?))
        } else {
            None
        };
        let progress = Cow::Owned(r.records()?);
        let mut areas = Vec::new();
        for _ in 0..r.u32()? {
            let index = r.u32()?;
            areas.push((index, Cow::Owned(r.blob()?.to_vec())));
        }
        if !r.is_empty() {
            return Err(Error::Process(
                "node 0's results carry bytes past their end: another version of mgws".into(),
            ));
        }
        Ok(RunResults {
            elapsed_ns,
            launch_s,
            error,
            exited_workers,
            stats,
            progress,
            areas,
        })
    }
}

/// Whether area limit `limit` is a writable area with bytes.
pub(crate) fn writable(limit: u64) -> bool {
    limit & AREA_WRITABLE != 0 && limit & !AREA_WRITABLE != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_digests_are_each_chunks_own_whatever_the_threads() {
        let bytes: Vec<u8> = (0..2 * CHUNK_BYTES + 100)
            .map(|i| (i % 251) as u8)
            .collect();
        let d = chunk_digests(&bytes);
        assert_eq!(d.len(), 3);
        for (i, chunk) in bytes.chunks(CHUNK_BYTES).enumerate() {
            assert_eq!(d[i], <[u8; 20]>::from(Sha1::digest(chunk)));
        }
        assert!(chunk_digests(&[]).is_empty());
    }

    #[test]
    fn run_results_read_back_as_written() {
        let r = RunResults {
            elapsed_ns: 123,
            launch_s: 0.25,
            error: 7,
            exited_workers: Some(4),
            stats: Some(vec![WorkerStats::default(); 3].into()),
            progress: vec![WorkerProgress::default(); 3].into(),
            areas: vec![(0, vec![1, 2, 3].into()), (2, Vec::new().into())],
        };
        assert_eq!(RunResults::decode(&r.encode()).unwrap(), r);
        let none = RunResults {
            exited_workers: None,
            stats: None,
            ..r
        };
        assert_eq!(RunResults::decode(&none.encode()).unwrap(), none);
        assert!(RunResults::decode(&none.encode()[..20]).is_err());
    }
}
