//! The GPU kernels' arithmetic checked on any machine: `src/gpu/kernels.cu` is
//! built for the host with the system's C++ compiler (one thread that walks every
//! grid-stride loop alone) and its results compared, byte for byte, with
//! `dsp::bgsub` and `dsp::conv` on random inputs. A wrong index, rounding or edge
//! rule in the CUDA C shows here before any GPU runs it; that the same source
//! compiles for GPUs is the NVRTC test's (`gpu::kernels`), and that it runs there
//! is `tests/gpu.rs`'s. Skipped where there is no C++ compiler.

use dmaflow::dsp::{bgsub, conv};
use proptest::prelude::*;
use std::sync::OnceLock;

/// One thread of a one-block grid: `EACH` then visits every item in turn.
const SHIM: &str = r#"
#include <stdint.h>
struct dmaflow_dim { unsigned x, y, z; };
static const dmaflow_dim blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0};
static const dmaflow_dim blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#define __global__
#define __device__ static
"#;

/// The kernels built for the host and loaded, or `None` without a compiler.
fn kernels() -> Option<&'static libloading::Library> {
    static LIB: OnceLock<Option<(tempfile::TempDir, libloading::Library)>> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("kernels.cpp");
        let so = dir.path().join("kernels.so");
        std::fs::write(&src, format!("{SHIM}\n{}", dmaflow::gpu::kernels::SOURCE)).unwrap();
        let built = std::process::Command::new("c++")
            .args(["-O1", "-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(&so)
            .arg(&src)
            .output();
        match built {
            Err(e) => {
                eprintln!("no C++ compiler ({e}): skipped");
                None
            }
            Ok(o) => {
                assert!(
                    o.status.success(),
                    "kernels.cu does not build for the host:\n{}",
                    String::from_utf8_lossy(&o.stderr)
                );
                // SAFETY: the library was just built from dmaflow's own kernels;
                // its initialisers are the C++ runtime's.
                let lib = unsafe { libloading::Library::new(&so) }.unwrap();
                Some((dir, lib))
            }
        }
    })
    .as_ref()
    .map(|(_, lib)| lib)
}

type Diff = unsafe extern "C" fn(*const u8, *const u8, *mut u8, *mut u8, u64);
type Gauss = unsafe extern "C" fn(*const u8, *mut u8, u64, u64);
type Mask = unsafe extern "C" fn(*const u8, *mut u8, u64, u64, i32, i32);
type Layer = unsafe extern "C" fn(
    *const i16,
    *const i16,
    *const i16,
    *mut i16,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
);
type Bytes = unsafe extern "C" fn(*mut u8, *const u8, u64);
type Invert = unsafe extern "C" fn(*mut u8, u64);

/// A kernel of the host build by name.
fn kernel<T: Copy>(lib: &libloading::Library, name: &str) -> T {
    // SAFETY: each caller names the type the kernel's C declaration has.
    unsafe { *lib.get::<T>(name.as_bytes()).unwrap() }
}

/// The three bgsub kernels in the order `Bgsub` launches them.
fn bgsub_on_host(
    lib: &libloading::Library,
    p: &bgsub::Params,
    frame: &[u8],
    bg: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let n = p.frame_bytes();
    let (w, h) = (p.width as u64, p.height as u64);
    let (mut nb, mut d, mut g, mut mask) = (
        vec![0xEEu8; n],
        vec![0xEEu8; n],
        vec![0xEEu8; n],
        vec![0xEEu8; n],
    );
    // SAFETY: every buffer holds `n` = w x h bytes, as the kernels read and write.
    unsafe {
        kernel::<Diff>(lib, "bgsub_diff")(
            frame.as_ptr(),
            bg.as_ptr(),
            nb.as_mut_ptr(),
            d.as_mut_ptr(),
            n as u64,
        );
        let src = if p.filter {
            kernel::<Gauss>(lib, "bgsub_gauss")(d.as_ptr(), g.as_mut_ptr(), w, h);
            g.as_ptr()
        } else {
            d.as_ptr()
        };
        kernel::<Mask>(lib, "bgsub_mask")(
            src,
            mask.as_mut_ptr(),
            w,
            h,
            p.threshold as i32,
            p.filter as i32,
        );
    }
    (nb, mask)
}

/// One convolution layer by the host build of `conv_layer`.
fn conv_on_host(
    lib: &libloading::Library,
    l: &conv::Layer,
    input: &[i16],
    h: usize,
    w: usize,
) -> Vec<i16> {
    let (oh, ow) = l.shape(h, w).out_dims();
    let mut out = vec![i16::MIN; l.out_maps * oh * ow];
    // SAFETY: the buffers have the sizes the layer's shape gives.
    unsafe {
        kernel::<Layer>(lib, "conv_layer")(
            input.as_ptr(),
            l.weights.as_ptr(),
            l.bias.as_ptr(),
            out.as_mut_ptr(),
            l.in_maps as i32,
            l.out_maps as i32,
            h as i32,
            w as i32,
            l.kernel as i32,
            l.pool as i32,
            l.shift as i32,
        );
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bgsub_kernels_give_the_reference_bytes(
        w in 1usize..40,
        h in 1usize..30,
        threshold in any::<u8>(),
        filter in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let Some(lib) = kernels() else { return Ok(()) };
        let p = bgsub::Params::new(w, h, threshold, filter).unwrap();
        let n = p.frame_bytes();
        let mut x = seed | 1;
        let mut byte = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 };
        let frame: Vec<u8> = (0..n).map(|_| byte()).collect();
        let bg: Vec<u8> = (0..n).map(|_| byte()).collect();
        let (mut nb, mut mask) = (vec![0u8; n], vec![0u8; n]);
        bgsub::step(&p, &frame, &bg, &mut nb, &mut mask).unwrap();
        let (hnb, hmask) = bgsub_on_host(lib, &p, &frame, &bg);
        prop_assert_eq!(hnb, nb);
        prop_assert_eq!(hmask, mask);
    }

    #[test]
    fn the_conv_kernel_gives_the_reference_maps(
        in_maps in 1usize..4,
        out_maps in 1usize..4,
        h in 1usize..12,
        w in 1usize..12,
        k in prop::sample::select(vec![1usize, 3, 5]),
        pool in any::<bool>(),
        shift in 0u32..12,
        seed in any::<u64>(),
    ) {
        let Some(lib) = kernels() else { return Ok(()) };
        let mut x = seed | 1;
        let mut word = |span: i64| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; ((x % (2 * span as u64 + 1)) as i64 - span) as i16 };
        let layer = conv::Layer {
            in_maps,
            out_maps,
            kernel: k,
            pool,
            shift,
            weights: (0..out_maps * in_maps * k * k).map(|_| word(3000)).collect(),
            bias: (0..out_maps).map(|_| word(200)).collect(),
        };
        let input: Vec<i16> = (0..in_maps * h * w).map(|_| word(30000)).collect();
        let (want, _, _) = layer.forward(&input, h, w);
        prop_assert_eq!(conv_on_host(lib, &layer, &input, h, w), want);
    }
}

#[test]
fn the_roshambo_layers_and_a_video_match_on_the_host_build() {
    let Some(lib) = kernels() else { return };
    let (mut a, mut h, mut w) = (conv::input_frame(9), 64, 64);
    for (i, l) in conv::roshambo(9).iter().enumerate() {
        let (want, oh, ow) = l.forward(&a, h, w);
        assert!(conv_on_host(lib, l, &a, h, w) == want, "layer {}", i + 1);
        (a, h, w) = (want, oh, ow);
    }
    // A layer packet as the GPU engine finds it in device memory: the kernel
    // reads the weights, biases and input maps where `packet_parts` says.
    let l = &conv::roshambo(4)[1];
    let input: Vec<i16> = (0..16 * 32 * 32).map(|i| (i % 251) as i16 - 60).collect();
    let packet = conv::from_bytes(&l.encode(&input, 32, 32));
    let shape = conv::header(&conv::to_bytes(&packet)).unwrap();
    let [wr, br, ir] = shape.packet_parts().map(|r| r.start / 2..r.end / 2);
    let (oh, ow) = shape.out_dims();
    let mut out = vec![i16::MIN; shape.out_maps * oh * ow];
    // SAFETY: the ranges lie inside `packet`; `out` holds the output maps.
    unsafe {
        kernel::<Layer>(lib, "conv_layer")(
            packet[ir].as_ptr(),
            packet[wr].as_ptr(),
            packet[br].as_ptr(),
            out.as_mut_ptr(),
            16,
            32,
            32,
            32,
            3,
            1,
            8,
        );
    }
    assert!(out == l.forward(&input, 32, 32).0, "the packet's parts");
    let p = bgsub::Params::new(64, 48, 25, true).unwrap();
    let n = p.frame_bytes();
    let frames = bgsub::synthetic_frames(&p, 5, 3);
    let mut cpu = bgsub::BackgroundSubtractor::new(p);
    let mut bg = frames[..n].to_vec();
    let mut want = vec![0u8; n];
    for f in frames.chunks_exact(n) {
        cpu.process(f, &mut want).unwrap();
        let (nb, mask) = bgsub_on_host(lib, &p, f, &bg);
        assert!(mask == want);
        bg = nb;
    }
    // The transfer kernels: a copy, and an inversion in place, at every
    // alignment of either end (16-byte words where both allow) and length.
    let src: Vec<u8> = (0..1100u32).map(|i| (i * 7 + i / 256) as u8).collect();
    for (from, to, n) in [
        (0, 0, 1000),
        (0, 0, 1024),
        (3, 0, 999),
        (0, 5, 77),
        (16, 32, 15),
        (1, 1, 0),
    ] {
        let mut dst = vec![0xA5u8; 1100];
        // SAFETY: `n` bytes from `from` and `to` lie inside both buffers.
        unsafe {
            kernel::<Bytes>(lib, "dmaflow_copy")(
                dst.as_mut_ptr().add(to),
                src.as_ptr().add(from),
                n as u64,
            );
        }
        assert_eq!(
            &dst[to..to + n],
            &src[from..from + n],
            "copy {from}->{to} {n}"
        );
        assert!(
            dst[..to].iter().chain(&dst[to + n..]).all(|&b| b == 0xA5),
            "copy wrote outside"
        );
        // SAFETY: as above.
        unsafe { kernel::<Invert>(lib, "dmaflow_invert")(dst.as_mut_ptr().add(to), n as u64) };
        assert!(
            dst[to..to + n]
                .iter()
                .zip(&src[from..])
                .all(|(d, s)| *d == !*s),
            "invert {to} {n}"
        );
        assert!(
            dst[..to].iter().chain(&dst[to + n..]).all(|&b| b == 0xA5),
            "invert wrote outside"
        );
    }
}
