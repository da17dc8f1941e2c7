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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use crate::tags::Tag;

/// A tag relay between one network source and one network sink of a graph
/// whose nodes between them keep the item count (output item `i` comes from
/// input item `i`). Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Relay {
    pending: Arc<Mutex<VecDeque<Tag>>>,
}

impl Relay {
    /// An empty relay.
    pub fn new() -> Self {
        Relay::default()
    }

    /// Puts `tag` (its offset in the stream the source writes) on the relay.
    pub fn put(&self, tag: Tag) {
        let mut q = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        // Tags arrive in offset order from GNU Radio; one that does not is
        // placed where it belongs, so `take` can stop at the first past a
        // message.
        let at = q.partition_point(|t| t.offset <= tag.offset);
        q.insert(at, tag);
    }

    /// Takes the tags on items before `end`, in offset order. A tag for an
    /// item already sent (a node that dropped items) is moved to `start`,
    /// the message's first item, so that a receiver does not place it before
    /// the message.
    pub fn take(&self, start: u64, end: u64) -> Vec<Tag> {
        let mut q = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let n = q.partition_point(|t| t.offset < end);
        q.drain(..n)
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
        r.put(tag(10, "b"));
        r.put(tag(3, "a"));
        r.put(tag(10, "c"));
        r.put(tag(50, "d"));
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
        r.put(tag(5, "late"));
        assert_eq!(
            keys(r.take(11, 60)),
            [
                (11, Pmt::Symbol("late".into())),
                (50, Pmt::Symbol("d".into()))
            ]
        );
        assert_eq!(r.pending(), 0);
    }
}
