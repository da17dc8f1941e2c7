//! The queue's readiness futures under tokio: both ends as tasks of one
//! thread, each waiting on the other through the queue's wakers.

use std::time::Duration;

use dmaflow::ring::{Builder, Error, Wait};

/// Runs `f` on a single-threaded tokio runtime, failing instead of hanging.
fn on_one_thread<F: std::future::Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(20), f)
                .await
                .expect("a task waited for a wake-up that never came");
        });
}

#[test]
fn a_writer_and_a_reader_task_share_one_thread() {
    // A small queue: the writer fills it many times over, so each side waits
    // for the other again and again, and only the other's wake-up lets it on.
    let (mut w, mut r) = Builder::<u32>::new(1024).wait(Wait::Block).build().unwrap();
    let n = 1_000_000u32;
    on_one_thread(async move {
        let writer = async move {
            let mut next = 0u32;
            while next < n {
                let k = 300.min(n - next) as usize;
                w.writable(k).await.unwrap();
                let slots = w.try_reserve(k).unwrap().expect("writable said so");
                for x in slots.iter_mut() {
                    *x = next;
                    next += 1;
                }
                w.commit(k).unwrap();
            }
            // Dropping the writer ends the stream.
        };
        let reader = async move {
            let mut expect = 0u32;
            loop {
                let ready = r.readable(100).await.unwrap();
                let s = r.try_peek(100).unwrap().expect("readable said so");
                assert!(s.len() >= ready.min(100));
                if s.is_empty() {
                    break;
                }
                for &x in s {
                    assert_eq!(x, expect);
                    expect += 1;
                }
                let k = s.len();
                r.consume(k).unwrap();
            }
            assert_eq!(expect, n);
        };
        tokio::join!(writer, reader);
    });
}

#[test]
fn the_end_of_stream_and_a_gone_reader_resolve_the_futures() {
    on_one_thread(async {
        let (mut w, mut r) = Builder::<u8>::new(64).build().unwrap();
        let reader = tokio::spawn(async move { r.readable(10).await });
        tokio::task::yield_now().await;
        w.try_reserve(3)
            .unwrap()
            .unwrap()
            .copy_from_slice(&[1, 2, 3]);
        w.commit(3).unwrap();
        drop(w);
        // Fewer than the threshold, because the writer is gone.
        assert_eq!(reader.await.unwrap().unwrap(), 3);

        let (mut w, r) = Builder::<u8>::new(64).build().unwrap();
        let cap = w.capacity();
        w.try_reserve(cap).unwrap().unwrap().fill(7);
        w.commit(cap).unwrap();
        let writer = tokio::spawn(async move { w.writable(1).await });
        tokio::task::yield_now().await;
        drop(r);
        assert!(matches!(writer.await.unwrap(), Err(Error::Closed)));
    });
}

#[test]
fn a_spinning_queue_still_completes_by_polling_again() {
    let (mut w, mut r) = Builder::<u16>::new(16).wait(Wait::Spin).build().unwrap();
    on_one_thread(async move {
        let writer = async move {
            for i in 0..1000u16 {
                w.writable(1).await.unwrap();
                w.try_reserve(1).unwrap().unwrap()[0] = i;
                w.commit(1).unwrap();
            }
        };
        let reader = async move {
            let mut got = Vec::new();
            while r.readable(1).await.unwrap() > 0 {
                let s = r.try_peek(1).unwrap().unwrap();
                got.extend_from_slice(s);
                let k = s.len();
                r.consume(k).unwrap();
            }
            assert_eq!(got, (0..1000).collect::<Vec<_>>());
        };
        tokio::join!(writer, reader);
    });
}

/// A waker that counts its wake-ups.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_waiting_task_is_woken_by_the_publish_that_reaches_its_threshold_only() {
    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll};

    let (mut w, mut r) = Builder::<u8>::new(64).wait(Wait::Block).build().unwrap();
    let count = Arc::new(CountingWaker(0.into()));
    let waker = std::task::Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let publish = |w: &mut dmaflow::ring::Writer<u8>, k: usize| {
        w.try_reserve(k).unwrap().unwrap().fill(7);
        w.commit(k).unwrap();
    };
    {
        let mut fut = std::pin::pin!(r.readable(10));
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        // Below the threshold: the task is not woken (it would only find
        // too little and wait again).
        publish(&mut w, 3);
        publish(&mut w, 6);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // The tenth item reaches it: woken once, and ready when polled.
        publish(&mut w, 1);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        publish(&mut w, 5);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken again");
        assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(15))));
    }
    r.consume(15).unwrap();

    // The writer's side: waiting for 8 free slots of a full queue.
    let cap = w.capacity();
    publish(&mut w, cap);
    let count = Arc::new(CountingWaker(0.into()));
    let waker = std::task::Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(w.writable(8));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    r.consume(5).unwrap();
    assert_eq!(count.0.load(Ordering::SeqCst), 0);
    r.consume(3).unwrap();
    assert_eq!(count.0.load(Ordering::SeqCst), 1);
    assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
}
