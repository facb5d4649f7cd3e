//! CONTAINS (thesis 6.2): does an article contain a word? The run counts the articles that do.
//!
//! A task is one article: its byte range in the corpus (params), the corpus (descriptor 0) and the
//! word (descriptor 1). All lanes scan the article together, round by round: in a round lane `l`
//! tests the start positions `base + l, base + l + lanes, ...` (neighbouring lanes read
//! neighbouring bytes, coalesced on a GPU), and after each round the lanes agree with
//! [`Ctx::any`](mgws_core::Context::any) whether to stop at the first match.
//!
//! Matching is on exact bytes (a case-sensitive substring test). The result goes to a per-worker
//! result table named by a [`PackedTable`] in the params (both descriptors are taken).
//!
//! [`article_contains`] is the one-lane scan with the same rounds, for the host baselines.

use mgws_core::TaskError;

use crate::data::{Access, DataDescriptor};
use crate::task::{TaskFunctor, TaskStruct};
use crate::workloads::rows::{self, PackedTable};
use crate::Ctx;

/// Start positions each lane tests per round.
pub const POSITIONS_PER_LANE: usize = 256;

/// Result-row columns.
pub const COL_MATCHES: usize = 0;
pub const COL_ARTICLES: usize = 1;

/// Error code of a CONTAINS task whose article lies outside the corpus descriptor.
pub const CONTAINS_OUT_OF_BOUNDS: u32 = 0x434e_0001;
/// Error code of a CONTAINS task with an empty word.
pub const CONTAINS_EMPTY_WORD: u32 = 0x434e_0002;

/// One article to scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct ContainsTask {
    /// Byte offset of the article in the corpus descriptor.
    pub offset: u64,
    /// Length of the article in bytes.
    pub len: u64,
    /// Where the per-worker counts go.
    pub results: PackedTable,
}

/// Does `word` start at position `p` of `text`? (`p + word.len() <= text.len()`, word non-empty)
#[inline(always)]
fn matches_at(text: &[u8], word: &[u8], p: usize) -> bool {
    text[p] == word[0] && text[p + 1..p + word.len()] == word[1..]
}

/// One lane's share of one round: the start positions `base + lane + k * lanes` below `end`.
/// (`end <= text.len() - word.len() + 1`, word non-empty.)
#[inline]
pub fn scan_round(
    text: &[u8],
    word: &[u8],
    base: usize,
    end: usize,
    lane: usize,
    lanes: usize,
) -> bool {
    let mut p = base + lane;
    if lanes == 1 {
        // One lane tests every position: find the first byte, then compare the rest.
        let (first, rest) = (word[0], &word[1..]);
        while p < end {
            match text[p..end].iter().position(|&b| b == first) {
                None => return false,
                Some(k) => {
                    let q = p + k;
                    if text[q + 1..q + word.len()] == *rest {
                        return true;
                    }
                    p = q + 1;
                }
            }
        }
        return false;
    }
    while p < end {
        if matches_at(text, word, p) {
            return true;
        }
        p += lanes;
    }
    false
}

/// The start positions of round `base` for `lanes` lanes: `base..end`.
#[inline]
pub fn round_end(base: usize, last: usize, lanes: usize) -> usize {
    (base + lanes * POSITIONS_PER_LANE).min(last)
}

/// Whether `text` contains `word` (non-empty), scanned as one lane scans it in a task.
pub fn article_contains(text: &[u8], word: &[u8]) -> bool {
    if word.is_empty() || text.len() < word.len() {
        return false;
    }
    let last = text.len() - word.len() + 1;
    let mut base = 0;
    while base < last {
        let end = round_end(base, last, 1);
        if scan_round(text, word, base, end, 0, 1) {
            return true;
        }
        base = end;
    }
    false
}

impl TaskFunctor for ContainsTask {
    #[inline(always)]
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        let (corpus, word) = (task.data[0], task.data[1]);
        if self
            .offset
            .checked_add(self.len)
            .is_none_or(|e| e > corpus.size as u64)
        {
            return Err(TaskError::Failed(CONTAINS_OUT_OF_BOUNDS));
        }
        if word.size == 0 {
            return Err(TaskError::Failed(CONTAINS_EMPTY_WORD));
        }
        let row = rows::row(ctx, self.results.descriptor())?;
        // SAFETY: both ranges lie inside their descriptors (checked above), whose areas hold
        // read-only bytes for the whole run.
        let (text, word) = unsafe {
            let c = corpus
                .resolve(ctx.area(corpus.area as usize))
                .add(self.offset as usize);
            let w = word.resolve(ctx.area(word.area as usize));
            (
                core::slice::from_raw_parts(c as *const u8, self.len as usize),
                core::slice::from_raw_parts(w as *const u8, word.size as usize),
            )
        };
        let (lane, lanes) = (ctx.lane_id() as usize, ctx.lane_count() as usize);
        let mut found = false;
        if lanes == 1 {
            found = article_contains(text, word);
        } else if text.len() >= word.len() {
            let last = text.len() - word.len() + 1;
            let mut base = 0;
            while base < last {
                let end = round_end(base, last, lanes);
                let mine = scan_round(text, word, base, end, lane, lanes);
                if ctx.any(mine) {
                    found = true;
                    break;
                }
                base = end;
            }
        }
        if ctx.lane_id() == 0 {
            // SAFETY: only lane 0 of this worker touches its row during the run.
            unsafe {
                *row.add(COL_MATCHES) += found as u64;
                *row.add(COL_ARTICLES) += 1;
            }
        }
        Ok(())
    }
}

/// The descriptor of a corpus of `len` bytes at offset 0 of `area`.
pub fn corpus_descriptor(area: u8, len: u32) -> DataDescriptor {
    DataDescriptor::new(area, 0, len, Access::Read)
}

/// The descriptor of a word of `len` bytes at offset 0 of `area`.
pub fn word_descriptor(area: u8, len: u32) -> DataDescriptor {
    DataDescriptor::new(area, 0, len, Access::Read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exact_bytes_only() {
        assert!(article_contains(b"zwischen", b"zwischen"));
        assert!(article_contains(b"a zwischen b", b"zwischen"));
        assert!(!article_contains(b"Zwischen", b"zwischen"));
        assert!(!article_contains(b"zwische", b"zwischen"));
        assert!(!article_contains(b"", b"a"));
        assert!(!article_contains(b"abc", b""));
        // Across round boundaries.
        let mut long = [b'x'; 3 * POSITIONS_PER_LANE];
        long[POSITIONS_PER_LANE - 1..POSITIONS_PER_LANE + 2].copy_from_slice(b"abc");
        assert!(article_contains(&long, b"abc"));
        long[3 * POSITIONS_PER_LANE - 3..].copy_from_slice(b"xyz");
        assert!(article_contains(&long, b"xyz"));
    }
}
