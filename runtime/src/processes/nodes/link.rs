//! The TCP connections between node launchers: node 0's launcher listens and greets each
//! follower; every connection has a reader thread that hands its frames over a channel, so that
//! the launchers' supervising loops never block on the network.

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use super::wire::Frame;
use super::Nodes;
use crate::error::{Error, Result};

/// How long a greeting may take once a connection is made (the follower waits for node 0's
/// answer).
const GREETING: Duration = Duration::from_secs(10);

/// How long node 0 waits for the hello of a connection it accepted: the follower sends it right
/// after connecting, and node 0's start-up loop (which watches its PEs) is held meanwhile.
const HELLO_WAIT: Duration = Duration::from_secs(1);

/// How long a send may block (the other side's buffers full) before the link counts as lost.
const SEND_LIMIT: Duration = Duration::from_secs(30);

/// One connection, with the frames its reader thread has received.
pub(crate) struct Peer {
    /// The other side's node.
    pub node: u32,
    writer: TcpStream,
    frames: Receiver<Result<Frame>>,
    /// The connection ended or failed; nothing more will come.
    closed: bool,
    /// When a frame last came.
    last_heard: Instant,
}

/// How long a dropped connection waits for the other side to end its own.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

impl Drop for Peer {
    fn drop(&mut self) {
        // The end of this side's frames first (the other side reads everything sent, then the
        // end), then the other side's end, at most CLOSE_WAIT: a socket closed with frames of
        // the other side unread would reset the connection, and the other side could lose the
        // last frames this side sent (the run's results or its error). Then both directions, so
        // that this side's reader thread, blocked in a read on its clone of the socket, ends
        // even if the other side never closes.
        let _ = self.writer.shutdown(std::net::Shutdown::Write);
        let deadline = Instant::now() + CLOSE_WAIT;
        while !self.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.frames.recv_timeout(left) {
                Ok(Ok(_)) => {}
                Ok(Err(_)) | Err(mpsc::RecvTimeoutError::Disconnected) => self.closed = true,
                Err(mpsc::RecvTimeoutError::Timeout) => break,
            }
        }
        let _ = self.writer.shutdown(std::net::Shutdown::Both);
    }
}

impl Peer {
    /// Starts the reader thread of `stream` (greeted already).
    fn new(node: u32, stream: TcpStream) -> Result<Peer> {
        let mut reader = stream
            .try_clone()
            .map_err(|e| link_error(node, format!("cannot share the connection: {e}")))?;
        // Frames come at the other side's pace; the thread blocks on them.
        reader
            .set_read_timeout(None)
            .map_err(|e| link_error(node, e.to_string()))?;
        let (tx, frames) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("mgws-node-{node}"))
            .spawn(move || loop {
                let frame = Frame::read_from(&mut reader);
                let end = !matches!(frame, Ok(Some(_)));
                let item = match frame {
                    Ok(Some(f)) => Ok(f),
                    Ok(None) => Err(link_error(node, "the connection was closed".into())),
                    Err(e) => Err(e),
                };
                if tx.send(item).is_err() || end {
                    return;
                }
            })
            .map_err(|e| link_error(node, format!("cannot start its reader thread: {e}")))?;
        stream
            .set_write_timeout(Some(SEND_LIMIT))
            .map_err(|e| link_error(node, e.to_string()))?;
        Ok(Peer {
            node,
            writer: stream,
            frames,
            closed: false,
            last_heard: Instant::now(),
        })
    }

    /// How long since a frame last came from the other side.
    pub fn silent_for(&self) -> Duration {
        self.last_heard.elapsed()
    }

    /// Sends a frame.
    pub fn send(&mut self, frame: &Frame) -> Result<()> {
        frame
            .write_to(&mut self.writer)
            .map_err(|e| link_error(self.node, format!("sending: {e}")))
    }

    /// The next frame received, if one is there; an error once the connection ended.
    pub fn try_next(&mut self) -> Result<Option<Frame>> {
        if self.closed {
            return Err(link_error(self.node, "the connection is closed".into()));
        }
        match self.frames.try_recv() {
            Ok(Ok(frame)) => {
                self.last_heard = Instant::now();
                Ok(Some(frame))
            }
            Ok(Err(e)) => {
                self.closed = true;
                Err(e)
            }
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => {
                self.closed = true;
                Err(link_error(self.node, "its reader thread ended".into()))
            }
        }
    }

    /// The next frame, waiting at most `timeout`.
    pub fn next_within(&mut self, timeout: Duration) -> Result<Option<Frame>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(f) = self.try_next()? {
                return Ok(Some(f));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn link_error(node: u32, what: String) -> Error {
    Error::Process(format!("the link to node {node}'s launcher: {what}"))
}

/// Node 0's listener.
pub(crate) struct Listener {
    listener: TcpListener,
    address: String,
}

impl Listener {
    /// Listens at the coordinator address of `nodes`.
    pub fn bind(nodes: &Nodes) -> Result<Listener> {
        let listener = TcpListener::bind(&nodes.coordinator).map_err(|e| {
            Error::Process(format!(
                "node 0 cannot listen at the coordinator address {} (--coordinator): {e}; it \
                 must be an address of node 0's machine with a free port",
                nodes.coordinator
            ))
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::Process(format!("the listener at {}: {e}", nodes.coordinator)))?;
        Ok(Listener {
            listener,
            address: nodes.coordinator.clone(),
        })
    }

    /// A follower that connected and said hello, if one is waiting: its node, its hello and
    /// the connection (not yet answered).
    pub fn accept(&self) -> Result<Option<(TcpStream, Frame)>> {
        let (mut stream, from) = match self.listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => {
                return Err(Error::Process(format!(
                    "accepting a node launcher at {}: {e}",
                    self.address
                )))
            }
        };
        let greet = || -> std::io::Result<()> {
            stream.set_nonblocking(false)?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(HELLO_WAIT))
        };
        if let Err(e) = greet() {
            tracing::warn!(%from, error = %e, "a connection to the coordinator failed");
            return Ok(None);
        }
        match Frame::read_hello(&mut stream) {
            Ok(hello) => Ok(Some((stream, hello))),
            Err(e) => {
                // Not a node launcher (or one that gave up): it is no part of the run.
                tracing::warn!(%from, error = %e, "a connection to the coordinator sent no hello");
                Ok(None)
            }
        }
    }
}

/// Answers a hello: welcome (the follower becomes a [`Peer`]) or refuse with `refusal`.
pub(crate) fn answer(mut stream: TcpStream, node: u32, refusal: Option<String>) -> Result<Peer> {
    match refusal {
        Some(why) => {
            let _ = Frame::Refused(why.clone()).write_to(&mut stream);
            Err(link_error(node, why))
        }
        None => {
            Frame::Welcome
                .write_to(&mut stream)
                .map_err(|e| link_error(node, format!("answering its hello: {e}")))?;
            Peer::new(node, stream)
        }
    }
}

/// A follower's connection to node 0: connects (trying again until `limit` passes, since node 0
/// may start later), says hello and waits for the answer.
pub(crate) fn connect(nodes: &Nodes, fingerprint: [u8; 20], limit: Duration) -> Result<Peer> {
    let began = Instant::now();
    let mut stream = loop {
        let addrs: Vec<_> = nodes
            .coordinator
            .to_socket_addrs()
            .map_err(|e| {
                Error::Config(format!(
                    "the coordinator address {} (--coordinator): {e}",
                    nodes.coordinator
                ))
            })?
            .collect();
        let mut last = None;
        let mut connected = None;
        for addr in &addrs {
            match TcpStream::connect_timeout(addr, Duration::from_secs(1)) {
                Ok(s) => {
                    connected = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(s) = connected {
            break s;
        }
        if began.elapsed() >= limit {
            return Err(Error::Process(format!(
                "node {} could not reach node 0's launcher at {} within {limit:?} ({}); start \
                 node 0 with the same --coordinator, or raise --start-timeout-ms",
                nodes.rank,
                nodes.coordinator,
                last.map_or("no address".into(), |e| e.to_string())
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let io = |e: std::io::Error| link_error(0, format!("greeting: {e}"));
    stream.set_nodelay(true).map_err(io)?;
    stream.set_read_timeout(Some(GREETING)).map_err(io)?;
    Frame::Hello {
        node: nodes.rank,
        nodes: nodes.count,
        fingerprint,
    }
    .write_to(&mut stream)
    .map_err(io)?;
    match Frame::read_from(&mut stream)? {
        Some(Frame::Welcome) => Peer::new(0, stream),
        Some(Frame::Refused(why)) => Err(Error::Config(format!(
            "node 0's launcher refused node {}: {why}",
            nodes.rank
        ))),
        other => Err(link_error(
            0,
            format!("answered the hello with {other:?}, not a welcome"),
        )),
    }
}
