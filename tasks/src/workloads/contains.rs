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
#[mgws_tasks::task]
#[derive(Debug, PartialEq, Eq)]
pub struct ContainsTask {
    /// Byte offset of the article in the corpus descriptor.
    pub offset: u64,
    /// Length of the article in bytes.
    pub len: u64,
    /// Where the per-worker counts go.
    pub results: PackedTable,
}

/// One lane's share of one round, the start positions `base + lane + k * lanes` below `end`:
/// does `word` start at any of them?
///
/// Positions are `u32`s and the bytes are read unchecked: on a GPU every index of this loop is
/// a register of each lane, and 64-bit indices with their bounds checks held twice as many
/// around the worker's state (docs/results.md).
///
/// # Safety
/// `text` and `word` point to `text_len` and `word_len >= 1` readable bytes, and
/// `end <= text_len - word_len + 1`.
#[inline(always)]
pub unsafe fn scan_lane_round(
    text: *const u8,
    word: *const u8,
    word_len: u32,
    base: u32,
    end: u32,
    lane: u32,
    lanes: u32,
) -> bool {
    let mut p = base + lane;
    while p < end {
        // The whole comparison, the first byte included, is one loop whose only exits are a
        // mismatch and the word's end, and the decision comes after it: on a GPU the lanes
        // meet again after the loop. A first-byte test that skipped the loop, with the match's
        // return inside it, let lanes that missed run ahead alone: the warp split at each
        // match and ran its lanes one group at a time (few of a warp's lanes active per load,
        // ncu).
        let mut k = 0;
        // SAFETY: p < end, so p + k < p + word_len <= text_len for k < word_len (the
        // caller's contract), and k < word_len lies in the word.
        while k < word_len && unsafe { *text.add((p + k) as usize) == *word.add(k as usize) } {
            k += 1;
        }
        if k == word_len {
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

/// Whether `text` contains `word` (non-empty), scanned as one lane scans it in a task: round by
/// round, the first byte found, then the rest compared.
pub fn article_contains(text: &[u8], word: &[u8]) -> bool {
    if word.is_empty() || text.len() < word.len() {
        return false;
    }
    let (first, rest) = (word[0], &word[1..]);
    let last = text.len() - word.len() + 1;
    let mut base = 0;
    while base < last {
        let end = round_end(base, last, 1);
        let mut p = base;
        while let Some(k) = text[p..end].iter().position(|&b| b == first) {
            let q = p + k;
            if text[q + 1..q + word.len()] == *rest {
                return true;
            }
            p = q + 1;
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
            // Lengths fit u32s: the article lies in a descriptor, whose size is a u32.
            let (text_len, word_len) = (text.len() as u32, word.len() as u32);
            let (lane, lanes) = (lane as u32, lanes as u32);
            let last = text_len - word_len + 1;
            let mut base = 0;
            while base < last {
                let end = round_end(base as usize, last as usize, lanes as usize) as u32;
                // SAFETY: end <= last = text_len - word_len + 1, word_len >= 1 (checked above).
                let mine = unsafe {
                    scan_lane_round(
                        text.as_ptr(),
                        word.as_ptr(),
                        word_len,
                        base,
                        end,
                        lane,
                        lanes,
                    )
                };
                if ctx.any(mine) {
                    found = true;
                    break;
                }
                base = end;
            }
        }
        row.add(ctx, COL_MATCHES, found as u64);
        row.add(ctx, COL_ARTICLES, 1);
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

    /// What the lanes of a task find together, round by round, as the GPU runs it.
    fn lanes_contain(text: &[u8], word: &[u8], lanes: u32) -> bool {
        if text.len() < word.len() {
            return false;
        }
        let last = text.len() - word.len() + 1;
        let mut base = 0;
        while base < last {
            let end = round_end(base, last, lanes as usize);
            // SAFETY: end <= text.len() - word.len() + 1, word non-empty (the callers').
            let any = (0..lanes).any(|lane| unsafe {
                scan_lane_round(
                    text.as_ptr(),
                    word.as_ptr(),
                    word.len() as u32,
                    base as u32,
                    end as u32,
                    lane,
                    lanes,
                )
            });
            if any {
                return true;
            }
            base = end;
        }
        false
    }

    proptest::proptest! {
        /// Several lanes find a word exactly where the one-lane scan does, over a small
        /// alphabet (so that partial matches and matches across rounds are common).
        #[test]
        fn lanes_agree_with_one_lane(
            text in proptest::collection::vec(0u8..3, 0..3 * POSITIONS_PER_LANE),
            word in proptest::collection::vec(0u8..3, 1..6),
            lanes in 1u32..40,
        ) {
            proptest::prop_assert_eq!(
                lanes_contain(&text, &word, lanes),
                article_contains(&text, &word)
            );
        }
    }

    #[test]
    fn lanes_find_a_word_at_the_last_position_of_a_round() {
        let lanes = 32;
        let mut text = [b'x'; 2 * 32 * POSITIONS_PER_LANE];
        let at = lanes * POSITIONS_PER_LANE - 1;
        text[at..at + 3].copy_from_slice(b"abc");
        assert!(lanes_contain(&text, b"abc", lanes as u32));
        assert!(!lanes_contain(&text, b"abd", lanes as u32));
    }
}
