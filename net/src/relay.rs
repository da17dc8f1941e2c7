//! Stream tags carried from a network source to a network sink of the same
//! graph, past the nodes between them.
//!
//! The nodes of a dmaflow graph see items, not tags. A graph whose network
//! source and sink both pass gr-zeromq tag headers can still hand on the
//! tags it receives, as GNU Radio's default propagation does for a block of
//! rate 1 (every output item `i` comes from input item `i`): the source puts
//! each tag it receives on the relay at its offset in the items it has
//! written, the sink takes those that fall in each message it sends and
//! writes them in the message's header. The source puts a tag on the relay
//! before the items it marks enter the graph, so a sink that has read an
//! item finds its tag there.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::tags::Tag;

/// The most tags a relay holds before its source's next tag is an error: a
/// sink that does not take them (a graph that drops items, a peer that tags
/// every item) must not grow it without bound.
pub const MAX_PENDING: usize = 1 << 16;

/// A tag the relay could not take: it holds [`MAX_PENDING`] already.
#[derive(Debug, thiserror::Error)]
#[error("the tag relay holds {pending} tags its sink has not taken (the most it keeps)")]
pub struct RelayFull {
    /// Tags held.
    pub pending: usize,
}

#[derive(Debug, Default)]
struct Pending {
    /// By (offset, arrival), so that tags on one item keep their order.
    tags: BTreeMap<(u64, u64), Tag>,
    arrivals: u64,
}

/// A tag relay between one network source and one network sink of a graph
/// whose nodes between them keep the item count (output item `i` comes from
/// input item `i`). Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Relay {
    pending: Arc<Mutex<Pending>>,
}

impl Relay {
    /// An empty relay.
    pub fn new() -> Self {
        Relay::default()
    }

    /// Puts `tag` (its offset in the stream the source writes) on the relay,
    /// in offset order whatever order tags arrive in (logarithmic time).
    pub fn put(&self, tag: Tag) -> Result<(), RelayFull> {
        let mut q = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if q.tags.len() >= MAX_PENDING {
            return Err(RelayFull {
                pending: q.tags.len(),
            });
        }
        let n = q.arrivals;
        q.arrivals += 1;
        q.tags.insert((tag.offset, n), tag);
        Ok(())
    }

    /// Takes the tags on items before `end`, in offset order. A tag for an
    /// item already sent (a node that dropped items) is moved to `start`,
    /// the message's first item, so that a receiver does not place it before
    /// the message.
    pub fn take(&self, start: u64, end: u64) -> Vec<Tag> {
        let mut q = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let later = q.tags.split_off(&(end, 0));
        std::mem::replace(&mut q.tags, later)
            .into_values()
            .map(|mut t| {
                t.offset = t.offset.max(start);
                t
            })
            .collect()
    }

    /// Tags put and not yet taken.
    pub fn pending(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tags
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tags::Pmt;

    fn tag(offset: u64, key: &str) -> Tag {
        Tag {
            offset,
            key: Pmt::Symbol(key.into()),
            value: Pmt::True,
            srcid: Pmt::False,
        }
    }

    #[test]
    fn tags_leave_with_the_message_holding_their_item_in_order() {
        let r = Relay::new();
        r.put(tag(10, "b")).unwrap();
        r.put(tag(3, "a")).unwrap();
        r.put(tag(10, "c")).unwrap();
        r.put(tag(50, "d")).unwrap();
        assert!(r.take(0, 3).is_empty());
        let keys = |v: Vec<Tag>| v.into_iter().map(|t| (t.offset, t.key)).collect::<Vec<_>>();
        assert_eq!(
            keys(r.take(3, 11)),
            [
                (3, Pmt::Symbol("a".into())),
                (10, Pmt::Symbol("b".into())),
                (10, Pmt::Symbol("c".into()))
            ]
        );
        assert_eq!(r.pending(), 1);
        // A tag whose item went out earlier is placed on the next message's
        // first item.
        r.put(tag(5, "late")).unwrap();
        assert_eq!(
            keys(r.take(11, 60)),
            [
                (11, Pmt::Symbol("late".into())),
                (50, Pmt::Symbol("d".into()))
            ]
        );
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn a_relay_nobody_takes_from_is_bounded_and_fast_in_any_order() {
        let r = Relay::new();
        // Offsets in reverse: every insert lands before all others.
        for i in (0..MAX_PENDING as u64).rev() {
            r.put(tag(i * 7 + 1_000_000_000_000, "x")).unwrap();
        }
        assert!(
            matches!(r.put(tag(0, "over")), Err(RelayFull { pending }) if pending == MAX_PENDING)
        );
        assert_eq!(r.pending(), MAX_PENDING);
        let got = r.take(0, u64::MAX);
        assert_eq!(got.len(), MAX_PENDING);
        assert!(got.windows(2).all(|w| w[0].offset < w[1].offset));
    }
}
