//! The overlap-save filter, in both modes and through a graph, against direct-form
//! convolution (what `scipy.signal.lfilter(taps, 1.0, x)` computes).

use dmaflow::dsp::fir::{Mode, direct, filter};

mod common;
use common::Rng;

fn check(taps_len: usize, x_len: usize, fft_len: Option<usize>, seed: u64) {
    let mut rng = Rng(seed);
    let taps = rng.vec(taps_len);
    let x = rng.vec(x_len);
    let want = direct(&taps, &x);
    let rms =
        (want.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / want.len().max(1) as f64).sqrt();
    for mode in [Mode::ZeroCopy, Mode::Copy] {
        let got = filter(&taps, &x, fft_len, mode).unwrap();
        assert_eq!(
            got.len(),
            x.len(),
            "L={taps_len} len={x_len} N={fft_len:?} {mode:?}: length"
        );
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs() as f64)
            .fold(0.0, f64::max);
        assert!(
            worst <= 1e-4 * rms.max(f64::MIN_POSITIVE),
            "L={taps_len} len={x_len} N={fft_len:?} {mode:?}: error {worst} vs rms {rms}"
        );
    }
}

#[test]
fn single_tap() {
    check(1, 1000, None, 1);
    check(1, 1000, Some(16), 2);
}

#[test]
fn long_filter_more_than_half_the_fft() {
    check(40, 3000, Some(64), 3);
    check(64, 3000, Some(64), 4); // hop of one sample
    check(33, 777, Some(64), 5);
}

#[test]
fn input_shorter_than_the_filter() {
    check(20, 5, None, 6);
    check(20, 5, Some(32), 7);
}

#[test]
fn empty_input_gives_empty_output() {
    for mode in [Mode::ZeroCopy, Mode::Copy] {
        assert!(filter(&[1.0, 2.0], &[], None, mode).unwrap().is_empty());
    }
}

#[test]
fn long_random_signals() {
    check(31, 100_003, None, 8);
    check(255, 50_000, Some(1024), 9);
    check(7, 10_000, Some(4096), 10);
}

#[test]
fn both_modes_give_identical_bits() {
    let mut rng = Rng(11);
    let taps = rng.vec(100);
    let x = rng.vec(20_000);
    let a = filter(&taps, &x, Some(512), Mode::ZeroCopy).unwrap();
    let b = filter(&taps, &x, Some(512), Mode::Copy).unwrap();
    assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
}
