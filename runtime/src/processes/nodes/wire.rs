//! The frames node launchers exchange: a tag byte, the payload's length (8 bytes,
//! little-endian), the payload. Integers are little-endian; records (progress, statistics) go as
//! their bytes, which is why every node must run the same build (its fingerprint says so).

use std::io::{Read, Write};

use crate::error::{Error, Result};

/// The largest payload a frame may announce (a writable data area travels in one frame).
const MAX_PAYLOAD: u64 = 1 << 40;

/// A hello's payload: node, node count, fingerprint.
const HELLO_BYTES: u64 = 4 + 4 + 20;

/// One message between a node's launcher and node 0's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Follower to node 0, first: who it is and what it runs (`Header`'s fingerprint).
    Hello {
        node: u32,
        nodes: u32,
        fingerprint: [u8; 20],
    },
    /// Node 0's answer to a hello it accepts.
    Welcome,
    /// Node 0's answer to a hello it refuses, and why.
    Refused(String),
    /// Node 0 to followers: NVSHMEM's unique ID, which PE 0 made.
    UniqueId(Box<[u8; 128]>),
    /// Follower to node 0: every PE of the node is at the launch gate.
    Ready,
    /// Node 0 to followers: open the gate.
    Open,
    /// Follower to node 0, during the run: the watched records of the node's workers.
    Records(Vec<u8>),
    /// Either way: the sender's part failed, and how (`Error::kind`, then the message).
    Failed { kind: String, message: String },
    /// Node 0 to followers: the run is being aborted.
    Abort,
    /// Node 0 to followers, every second during the run: node 0's launcher is alive.
    Alive,
    /// Follower to node 0: the node's PEs finished; their results.
    Done(Vec<u8>),
    /// Node 0 to followers: the run's results.
    Results(Vec<u8>),
}

impl Frame {
    fn tag(&self) -> u8 {
        match self {
            Frame::Hello { .. } => 1,
            Frame::Welcome => 2,
            Frame::Refused(_) => 3,
            Frame::UniqueId(_) => 4,
            Frame::Ready => 5,
            Frame::Open => 6,
            Frame::Records(_) => 7,
            Frame::Failed { .. } => 8,
            Frame::Abort => 9,
            Frame::Done(_) => 10,
            Frame::Results(_) => 11,
            Frame::Alive => 12,
        }
    }

    /// Writes the frame to `w` (one write of the header, one of the payload).
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        let mut payload = Writer::default();
        let body: &[u8] = match self {
            Frame::Hello {
                node,
                nodes,
                fingerprint,
            } => {
                payload.u32(*node).u32(*nodes).bytes(fingerprint);
                &payload.0
            }
            Frame::Refused(s) => {
                payload.bytes(s.as_bytes());
                &payload.0
            }
            Frame::UniqueId(id) => &id[..],
            Frame::Failed { kind, message } => {
                payload.string(kind).string(message);
                &payload.0
            }
            Frame::Records(b) | Frame::Done(b) | Frame::Results(b) => b,
            Frame::Welcome | Frame::Ready | Frame::Open | Frame::Abort | Frame::Alive => &[],
        };
        let mut head = [0u8; 9];
        head[0] = self.tag();
        head[1..].copy_from_slice(&(body.len() as u64).to_le_bytes());
        w.write_all(&head)?;
        w.write_all(body)?;
        w.flush()
    }

    /// Reads a hello from a connection not yet trusted: its header must announce a hello of
    /// the hello's size before anything is allocated (a stray client cannot make the reader
    /// allocate what its header claims).
    pub fn read_hello(r: &mut impl Read) -> Result<Frame> {
        let mut head = [0u8; 9];
        r.read_exact(&mut head)
            .map_err(|e| wire_error(format!("reading a hello: {e}")))?;
        let len = u64::from_le_bytes(head[1..].try_into().expect("8 bytes"));
        if head[0] != 1 || len != HELLO_BYTES {
            return Err(wire_error(format!(
                "a connection began with a frame of kind {} and {len} bytes, not a hello: not an \
                 mgws node launcher of this version",
                head[0]
            )));
        }
        let mut body = [0u8; HELLO_BYTES as usize];
        r.read_exact(&mut body)
            .map_err(|e| wire_error(format!("reading a hello: {e}")))?;
        let mut p = Reader::new(&body);
        Ok(Frame::Hello {
            node: p.u32()?,
            nodes: p.u32()?,
            fingerprint: p.array()?,
        })
    }

    /// Reads one frame from `r`; `Ok(None)` at the end of the stream before a frame began. A
    /// connection reset there ends the stream too: a peer whose process died with bytes it had
    /// not read resets the connection rather than closing it, and either way it is gone.
    pub fn read_from(r: &mut impl Read) -> Result<Option<Frame>> {
        use std::io::ErrorKind;
        let mut head = [0u8; 9];
        match r.read_exact(&mut head[..1]) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::UnexpectedEof
                        | ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(wire_error(format!("reading a frame: {e}"))),
        }
        r.read_exact(&mut head[1..])
            .map_err(|e| wire_error(format!("reading a frame's length: {e}")))?;
        let len = u64::from_le_bytes(head[1..].try_into().expect("8 bytes"));
        if len > MAX_PAYLOAD {
            return Err(wire_error(format!(
                "a frame announces {len} bytes: not an mgws node launcher"
            )));
        }
        let mut body = vec![0u8; len as usize];
        r.read_exact(&mut body)
            .map_err(|e| wire_error(format!("reading a frame of {len} bytes: {e}")))?;
        let mut p = Reader::new(&body);
        let frame = match head[0] {
            1 => Frame::Hello {
                node: p.u32()?,
                nodes: p.u32()?,
                fingerprint: p.array()?,
            },
            2 => Frame::Welcome,
            3 => Frame::Refused(String::from_utf8_lossy(&body).into_owned()),
            4 => Frame::UniqueId(Box::new(p.array()?)),
            5 => Frame::Ready,
            6 => Frame::Open,
            7 => Frame::Records(body),
            8 => Frame::Failed {
                kind: p.string()?,
                message: p.string()?,
            },
            9 => Frame::Abort,
            10 => Frame::Done(body),
            11 => Frame::Results(body),
            12 => Frame::Alive,
            tag => {
                return Err(wire_error(format!(
                    "a frame of kind {tag}: not an mgws node launcher of this version"
                )))
            }
        };
        Ok(Some(frame))
    }
}

fn wire_error(what: String) -> Error {
    Error::Process(format!("the link between node launchers: {what}"))
}

/// Builds a payload.
#[derive(Default)]
pub(crate) struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Raw bytes, no length (the reader knows how many).
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }

    /// Bytes with their length first.
    pub fn blob(&mut self, b: &[u8]) -> &mut Self {
        self.u64(b.len() as u64).bytes(b)
    }

    pub fn string(&mut self, s: &str) -> &mut Self {
        self.blob(s.as_bytes())
    }
}

/// Reads a payload; every read past its end is an error.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.rest.len() {
            return Err(wire_error(format!(
                "a payload ended {} bytes early",
                n - self.rest.len()
            )));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn blob(&mut self) -> Result<&'a [u8]> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| wire_error(format!("a blob of {n} bytes")))?;
        self.take(n)
    }

    pub fn string(&mut self) -> Result<String> {
        Ok(String::from_utf8_lossy(self.blob()?).into_owned())
    }

    /// Records of `T`, as a blob of their bytes.
    pub fn records<T: bytemuck::Pod>(&mut self) -> Result<Vec<T>> {
        let b = self.blob()?;
        if !b.len().is_multiple_of(size_of::<T>()) {
            return Err(wire_error(format!(
                "{} bytes are no whole number of {}-byte records",
                b.len(),
                size_of::<T>()
            )));
        }
        Ok(b.chunks_exact(size_of::<T>())
            .map(bytemuck::pod_read_unaligned)
            .collect())
    }

    /// Whether the payload is used up.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

/// A writable data area's change on one node: `now - was` word by word (wrapping), as runs of
/// changed words, then the changed bytes past the last whole word. `now` and `was` have the
/// same length.
pub(crate) fn encode_area_delta(w: &mut Writer, now: &[u8], was: &[u8]) {
    assert_eq!(now.len(), was.len(), "an area's two copies");
    let words = now.len() / 8;
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
    // The count of runs goes first; it is known at the end, and filled in then.
    let count_at = w.0.len();
    w.u64(0);
    let mut count = 0u64;
    let mut i = 0;
    while i < words {
        if word(now, i) == word(was, i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < words && word(now, i) != word(was, i) {
            i += 1;
        }
        w.u64(start as u64).u64((i - start) as u64);
        for j in start..i {
            w.u64(word(now, j).wrapping_sub(word(was, j)));
        }
        count += 1;
    }
    w.0[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
    let tail: Vec<(usize, u8)> = (words * 8..now.len())
        .filter(|&b| now[b] != was[b])
        .map(|b| (b, now[b]))
        .collect();
    w.u64(tail.len() as u64);
    for (at, byte) in tail {
        w.u64(at as u64).bytes(&[byte]);
    }
}

/// Adds a change [`encode_area_delta`] wrote into `area` (wrapping, word by word; changed tail
/// bytes are stored).
pub(crate) fn apply_area_delta(r: &mut Reader<'_>, area: &mut [u8]) -> Result<()> {
    let words = area.len() / 8;
    for _ in 0..r.u64()? {
        let (start, len) = (r.u64()? as usize, r.u64()? as usize);
        if start.checked_add(len).is_none_or(|end| end > words) {
            return Err(wire_error(format!(
                "a change of words {start}..+{len} of an area of {words} words"
            )));
        }
        for i in start..start + len {
            let at = i * 8;
            let was = u64::from_le_bytes(area[at..at + 8].try_into().expect("8"));
            area[at..at + 8].copy_from_slice(&was.wrapping_add(r.u64()?).to_le_bytes());
        }
    }
    for _ in 0..r.u64()? {
        let at = r.u64()? as usize;
        let byte = r.take(1)?[0];
        if at < words * 8 || at >= area.len() {
            return Err(wire_error(format!(
                "a change of byte {at} of an area of {} bytes",
                area.len()
            )));
        }
        area[at] = byte;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(f: Frame) {
        let mut bytes = Vec::new();
        f.write_to(&mut bytes).unwrap();
        let mut r = &bytes[..];
        assert_eq!(Frame::read_from(&mut r).unwrap(), Some(f));
        assert_eq!(
            Frame::read_from(&mut r).unwrap(),
            None,
            "one frame, then the end"
        );
    }

    #[test]
    fn every_frame_reads_back_as_written() {
        round_trip(Frame::Hello {
            node: 3,
            nodes: 4,
            fingerprint: [7; 20],
        });
        round_trip(Frame::Welcome);
        round_trip(Frame::Refused("another job".into()));
        round_trip(Frame::UniqueId(Box::new([9; 128])));
        round_trip(Frame::Ready);
        round_trip(Frame::Open);
        round_trip(Frame::Records(vec![1, 2, 3]));
        round_trip(Frame::Failed {
            kind: "hang".into(),
            message: "no progress".into(),
        });
        round_trip(Frame::Abort);
        round_trip(Frame::Done(vec![]));
        round_trip(Frame::Results(vec![0; 1000]));
        round_trip(Frame::Alive);
        let mut bytes = Vec::new();
        let hello = Frame::Hello {
            node: 1,
            nodes: 2,
            fingerprint: [3; 20],
        };
        hello.write_to(&mut bytes).unwrap();
        assert_eq!(Frame::read_hello(&mut &bytes[..]).unwrap(), hello);
    }

    #[test]
    fn a_connection_that_does_not_begin_with_a_hello_is_refused_before_any_allocation() {
        // A header announcing a terabyte of records, and a hello of the wrong size.
        let mut huge = vec![7u8];
        huge.extend_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(Frame::read_hello(&mut &huge[..]).is_err());
        let mut wrong = vec![1u8];
        wrong.extend_from_slice(&1000u64.to_le_bytes());
        wrong.extend_from_slice(&[0; 1000]);
        assert!(Frame::read_hello(&mut &wrong[..]).is_err());
    }

    #[test]
    fn a_reset_between_frames_ends_the_stream_and_one_inside_a_frame_is_an_error() {
        /// Yields its bytes, then fails every read with `kind`.
        struct ThenFails(Vec<u8>, std::io::ErrorKind);
        impl Read for ThenFails {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    return Err(self.1.into());
                }
                let n = buf.len().min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0.drain(..n);
                Ok(n)
            }
        }
        let mut frame = Vec::new();
        Frame::Ready.write_to(&mut frame).unwrap();
        for kind in [
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::ConnectionAborted,
        ] {
            let mut r = ThenFails(frame.clone(), kind);
            assert_eq!(Frame::read_from(&mut r).unwrap(), Some(Frame::Ready));
            assert_eq!(Frame::read_from(&mut r).unwrap(), None, "{kind:?}");
            let mut cut = ThenFails(frame[..3].to_vec(), kind);
            assert!(Frame::read_from(&mut cut).is_err(), "{kind:?}");
        }
        let mut other = ThenFails(Vec::new(), std::io::ErrorKind::PermissionDenied);
        assert!(Frame::read_from(&mut other).is_err());
    }

    #[test]
    fn cut_or_foreign_streams_are_errors() {
        let mut bytes = Vec::new();
        Frame::Records(vec![1; 100]).write_to(&mut bytes).unwrap();
        bytes.truncate(50);
        assert!(Frame::read_from(&mut &bytes[..]).is_err());
        let foreign = b"GET / HTTP/1.1\r\n\r\n";
        assert!(Frame::read_from(&mut &foreign[..]).is_err());
        let mut short = Writer::default();
        short.u32(1);
        let mut bytes = vec![1u8];
        bytes.extend_from_slice(&4u64.to_le_bytes());
        bytes.extend_from_slice(&short.0);
        assert!(
            Frame::read_from(&mut &bytes[..]).is_err(),
            "a hello cut short"
        );
    }

    #[test]
    fn area_changes_add_up_from_every_node() {
        let was: Vec<u8> = (0..83u8).collect();
        let mut node_a = was.clone();
        let mut node_b = was.clone();
        // Node a sets words 1 and 2 and a tail byte, node b adds to word 2 and sets word 9.
        node_a[8..16].copy_from_slice(&5u64.to_le_bytes());
        node_a[16..24].copy_from_slice(
            &(u64::from_le_bytes(was[16..24].try_into().unwrap()) + 3).to_le_bytes(),
        );
        node_a[81] = 200;
        node_b[16..24].copy_from_slice(
            &(u64::from_le_bytes(was[16..24].try_into().unwrap()) + 4).to_le_bytes(),
        );
        node_b[72..80].copy_from_slice(&u64::MAX.to_le_bytes());
        let mut merged = was.clone();
        for now in [&node_a, &node_b] {
            let mut w = Writer::default();
            encode_area_delta(&mut w, now, &was);
            let mut r = Reader::new(&w.0);
            apply_area_delta(&mut r, &mut merged).unwrap();
            assert!(r.is_empty());
        }
        let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        assert_eq!(word(&merged, 1), 5);
        assert_eq!(word(&merged, 2), word(&was, 2) + 7);
        assert_eq!(word(&merged, 9), u64::MAX);
        assert_eq!(merged[81], 200);
        assert_eq!(merged[..8], was[..8]);
        // Nothing changed: nothing sent but the two counts.
        let mut w = Writer::default();
        encode_area_delta(&mut w, &was, &was);
        assert_eq!(w.0.len(), 16);
        // A change outside the area is refused.
        let mut w = Writer::default();
        encode_area_delta(&mut w, &node_b, &was);
        assert!(apply_area_delta(&mut Reader::new(&w.0), &mut merged[..40].to_vec()).is_err());
    }
}
