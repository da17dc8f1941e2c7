//! The coprocessor's kernels: CUDA C in `kernels.cu`, compiled at run time by NVRTC
//! for the device at hand, loaded into its context, and launched on a stream.
//! [`Bgsub`] and [`conv_forward`] run `dsp::bgsub` and `dsp::conv` on the device with the
//! same results, byte for byte.

use super::context::{DeviceMem, Stream};
use super::{Error, Gpu, check, wrap};
use crate::dsp::{bgsub, conv};
use cudarc::driver::{result, sys};
use std::ffi::{CString, c_void};

/// The kernels' CUDA C source.
pub const SOURCE: &str = include_str!("kernels.cu");

/// Threads per block of every launch.
const THREADS: u32 = 256;

/// Compiles [`SOURCE`] to PTX for compute capability `major.minor` (NVRTC only:
/// needs no driver and no device).
pub fn ptx(capability: (i32, i32)) -> Result<String, Error> {
    // SAFETY: loading a shared library runs its initialisers; the library searched
    // for is NVRTC under its own names, and cudarc's loader (which would panic if
    // it were absent) is used only once this has found it.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::NoNvrtc);
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![format!(
            "--gpu-architecture=compute_{}{}",
            capability.0, capability.1
        )],
        name: Some("kernels.cu".into()),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(SOURCE, opts) {
        Ok(p) => Ok(p.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => Err(Error::Compile {
            what: "kernels.cu",
            log: log.to_string_lossy().into_owned(),
        }),
        Err(e) => Err(Error::Compile {
            what: "kernels.cu",
            log: format!("{e:?}"),
        }),
    }
}

/// The kernels, loaded into one device's context.
pub struct Kernels {
    gpu: Gpu,
    module: sys::CUmodule,
    copy: sys::CUfunction,
    invert: sys::CUfunction,
    hold: sys::CUfunction,
    bgsub: [sys::CUfunction; 3],
    conv: sys::CUfunction,
    blocks: u32,
}

// SAFETY: module and function handles may be used from any thread of the process.
unsafe impl Send for Kernels {}
// SAFETY: launching the same function from several threads at once is allowed
// (the driver serialises what it must); `Kernels` has no interior mutability.
unsafe impl Sync for Kernels {}

impl Kernels {
    /// Compiles and loads the kernels for `gpu`.
    pub fn load(gpu: &Gpu) -> Result<Kernels, Error> {
        let info = gpu.info()?;
        let ptx = CString::new(ptx(info.capability)?).map_err(|_| Error::Compile {
            what: "kernels.cu",
            log: "NVRTC's PTX holds a NUL byte".into(),
        })?;
        gpu.bind()?;
        // SAFETY: `ptx` is a NUL-terminated PTX image, alive for the call.
        let module = wrap("cuModuleLoadData", unsafe {
            result::module::load_data(ptx.as_ptr().cast())
        })?;
        let f = |name: &str| {
            let c = CString::new(name).expect("kernel names hold no NUL");
            // SAFETY: `module` was just loaded and is unloaded only when the
            // returned `Kernels` drops.
            wrap("cuModuleGetFunction", unsafe {
                result::module::get_function(module, c)
            })
        };
        let loaded = (|| {
            Ok(Kernels {
                gpu: gpu.clone(),
                module,
                copy: f("dmaflow_copy")?,
                invert: f("dmaflow_invert")?,
                hold: f("dmaflow_hold")?,
                bgsub: [f("bgsub_diff")?, f("bgsub_gauss")?, f("bgsub_mask")?],
                conv: f("conv_layer")?,
                // Enough blocks to fill the device; grid-stride loops do the rest.
                blocks: (info.multiprocessors.max(1) as u32) * 8,
            })
        })();
        if loaded.is_err() {
            // SAFETY: loaded above, used by nothing else.
            let _ = unsafe { result::module::unload(module) };
        }
        loaded
    }

    /// Launches `f` over `n` items with `args` (pointers to each argument's value).
    fn launch(
        &self,
        f: sys::CUfunction,
        n: u64,
        stream: &Stream,
        args: &mut [*mut c_void],
    ) -> Result<(), Error> {
        self.gpu.bind()?;
        let blocks = (n.div_ceil(THREADS as u64) as u32).clamp(1, self.blocks);
        // SAFETY: `f` is a function of this module, launched with the argument
        // list its source declares (each caller passes exactly those types); the
        // memory its pointers name stays alive until the stream is waited for.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                f,
                blocks,
                1,
                1,
                THREADS,
                1,
                1,
                0,
                stream.raw(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// Queues `dst[..n] = src[..n]` (device or mapped host addresses).
    pub(crate) fn copy(
        &self,
        stream: &Stream,
        mut dst: sys::CUdeviceptr,
        mut src: sys::CUdeviceptr,
        n: usize,
    ) -> Result<(), Error> {
        let mut n = n as u64;
        let mut args = [arg(&mut dst), arg(&mut src), arg(&mut n)];
        self.launch(self.copy, n, stream, &mut args)
    }

    /// Queues the inversion of `n` bytes of device memory at `p`.
    pub(crate) fn invert(
        &self,
        stream: &Stream,
        mut p: sys::CUdeviceptr,
        n: usize,
    ) -> Result<(), Error> {
        let mut n = n as u64;
        let mut args = [arg(&mut p), arg(&mut n)];
        self.launch(self.invert, n, stream, &mut args)
    }

    /// Queues a kernel that holds `stream` until the word at `flag` (mapped host
    /// memory) is non-zero, or `limit` has passed (then `flag[1]` becomes 1).
    pub(crate) fn hold(
        &self,
        stream: &Stream,
        mut flag: sys::CUdeviceptr,
        limit: std::time::Duration,
    ) -> Result<(), Error> {
        let mut ns = limit.as_nanos() as u64;
        let mut args = [arg(&mut flag), arg(&mut ns)];
        self.gpu.bind()?;
        // SAFETY: one thread of `dmaflow_hold(volatile int *, u64)` with those
        // arguments; `flag` is mapped host memory the caller keeps alive.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.hold,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                stream.raw(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}

impl Kernels {
    /// Queues one convolution layer of `shape` on `stream`: int16 input maps,
    /// weights and biases at those device addresses, output maps to `out`.
    pub(crate) fn conv(
        &self,
        stream: &Stream,
        [mut input, mut weights, mut bias, mut out]: [sys::CUdeviceptr; 4],
        s: &conv::Shape,
    ) -> Result<(), Error> {
        if s.kernel.is_multiple_of(2)
            || s.shift > 31
            || [s.height, s.width, s.in_maps, s.out_maps, s.kernel]
                .iter()
                .any(|&v| v == 0 || v > i32::MAX as usize)
        {
            return Err(Error::Shape(format!("unusable layer shape {s:?}")));
        }
        let (oh, ow) = s.out_dims();
        let mut dims = [
            s.in_maps as i32,
            s.out_maps as i32,
            s.height as i32,
            s.width as i32,
            s.kernel as i32,
            s.pool as i32,
            s.shift as i32,
        ];
        let [a0, a1, a2, a3, a4, a5, a6] = &mut dims;
        self.launch(
            self.conv,
            (s.out_maps * oh * ow) as u64,
            stream,
            &mut [
                arg(&mut input),
                arg(&mut weights),
                arg(&mut bias),
                arg(&mut out),
                arg(a0),
                arg(a1),
                arg(a2),
                arg(a3),
                arg(a4),
                arg(a5),
                arg(a6),
            ],
        )
    }
}

impl Drop for Kernels {
    fn drop(&mut self) {
        if self.gpu.synchronize().is_ok() {
            // SAFETY: loaded by `load`, unloaded once, no launch still running.
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}

/// A kernel argument: a pointer to its value.
fn arg<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

/// Background subtraction on the device ([`bgsub::BackgroundSubtractor`]'s results):
/// one frame's buffers, kept between frames, with the background kept in device
/// memory from frame to frame.
pub struct Bgsub {
    kernels: std::sync::Arc<Kernels>,
    params: bgsub::Params,
    stream: Stream,
    /// frame, background, new background, difference, filtered, mask.
    mem: [DeviceMem; 6],
    /// Whether the background holds a frame yet.
    primed: bool,
}

impl Bgsub {
    /// Buffers for frames of `params`' size.
    pub fn new(kernels: std::sync::Arc<Kernels>, params: bgsub::Params) -> Result<Bgsub, Error> {
        let n = params.frame_bytes();
        let g = kernels.gpu.clone();
        Ok(Bgsub {
            kernels,
            params,
            stream: g.stream()?,
            mem: [
                g.alloc(n)?,
                g.alloc(n)?,
                g.alloc(n)?,
                g.alloc(n)?,
                g.alloc(n)?,
                g.alloc(n)?,
            ],
            primed: false,
        })
    }

    fn check(&self, bufs: &[(&str, usize)]) -> Result<(), Error> {
        let n = self.params.frame_bytes();
        for &(what, len) in bufs {
            if len != n {
                return Err(Error::Shape(format!(
                    "{what} holds {len} bytes, a frame is {n} bytes"
                )));
            }
        }
        Ok(())
    }

    /// [`bgsub::step`] on the device: the same new background and mask.
    pub fn step(
        &mut self,
        frame: &[u8],
        background: &[u8],
        new_background: &mut [u8],
        mask: &mut [u8],
    ) -> Result<(), Error> {
        self.check(&[
            ("frame", frame.len()),
            ("background", background.len()),
            ("new background", new_background.len()),
            ("mask", mask.len()),
        ])?;
        self.mem[1].write(background)?;
        self.run(frame, mask)?;
        self.mem[2].read(new_background)
    }

    /// [`bgsub::BackgroundSubtractor::process`] on the device: the first frame
    /// starts the background, which then stays in device memory.
    pub fn process(&mut self, frame: &[u8], mask: &mut [u8]) -> Result<(), Error> {
        self.check(&[("frame", frame.len()), ("mask", mask.len())])?;
        if !self.primed {
            self.mem[1].write(frame)?;
            self.primed = true;
        }
        self.run(frame, mask)?;
        // The new background is the next frame's background.
        self.mem.swap(1, 2);
        Ok(())
    }

    /// One step on the frame against the background in device memory.
    fn run(&mut self, frame: &[u8], mask: &mut [u8]) -> Result<(), Error> {
        let n = self.params.frame_bytes();
        self.mem[0].write(frame)?;
        let k = &*self.kernels;
        let p = |m: &DeviceMem| m.ptr();
        let (mut fr, mut bg, mut nb, mut d, mut g, mut m) = (
            p(&self.mem[0]),
            p(&self.mem[1]),
            p(&self.mem[2]),
            p(&self.mem[3]),
            p(&self.mem[4]),
            p(&self.mem[5]),
        );
        let (mut w, mut h, mut len) = (
            self.params.width as u64,
            self.params.height as u64,
            n as u64,
        );
        let mut threshold = self.params.threshold as i32;
        let mut filter = self.params.filter as i32;
        k.launch(
            k.bgsub[0],
            len,
            &self.stream,
            &mut [
                arg(&mut fr),
                arg(&mut bg),
                arg(&mut nb),
                arg(&mut d),
                arg(&mut len),
            ],
        )?;
        let mut src = d;
        if self.params.filter {
            k.launch(
                k.bgsub[1],
                len,
                &self.stream,
                &mut [arg(&mut d), arg(&mut g), arg(&mut w), arg(&mut h)],
            )?;
            src = g;
        }
        k.launch(
            k.bgsub[2],
            len,
            &self.stream,
            &mut [
                arg(&mut src),
                arg(&mut m),
                arg(&mut w),
                arg(&mut h),
                arg(&mut threshold),
                arg(&mut filter),
            ],
        )?;
        self.stream.synchronize()?;
        self.mem[5].read(mask)
    }
}

/// One convolution layer on the device ([`conv::Layer::forward`]'s results).
pub fn conv_forward(
    kernels: &Kernels,
    layer: &conv::Layer,
    input: &[i16],
    height: usize,
    width: usize,
) -> Result<(Vec<i16>, usize, usize), Error> {
    let s = layer.shape(height, width);
    let words = s.in_maps * height * width;
    if input.len() != words
        || layer.weights.len() != s.weight_words()
        || layer.bias.len() != s.out_maps
    {
        return Err(Error::Shape(format!(
            "a {}x{}x{} layer's input is {words} words (got {}), its weights {} (got {}), \
             its bias {} (got {})",
            s.in_maps,
            height,
            width,
            input.len(),
            s.weight_words(),
            layer.weights.len(),
            s.out_maps,
            layer.bias.len()
        )));
    }
    let (oh, ow) = s.out_dims();
    let out_words = s.out_maps * oh * ow;
    let g = &kernels.gpu;
    let stream = g.stream()?;
    let mut din = g.alloc(words * 2)?;
    let mut dw = g.alloc(layer.weights.len() * 2)?;
    let mut db = g.alloc(layer.bias.len() * 2)?;
    let dout = g.alloc(out_words.max(1) * 2)?;
    din.write(&conv::to_bytes(input))?;
    dw.write(&conv::to_bytes(&layer.weights))?;
    db.write(&conv::to_bytes(&layer.bias))?;
    kernels.conv(&stream, [din.ptr(), dw.ptr(), db.ptr(), dout.ptr()], &s)?;
    stream.synchronize()?;
    let mut out = vec![0u8; out_words * 2];
    dout.read(&mut out)?;
    Ok((conv::from_bytes(&out), oh, ow))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where NVRTC is installed, the kernels compile for the oldest and newest
    /// architectures dmaflow targets; where it is not, that is an error, not a panic
    /// (unless `DMAFLOW_EXPECT_NVRTC` is set, as `scripts/gpu-bench.sh` sets it).
    #[test]
    fn the_kernels_compile_or_nvrtc_is_named_missing() {
        let expected = std::env::var_os("DMAFLOW_EXPECT_NVRTC").is_some();
        for cc in [(7, 0), (9, 0)] {
            match ptx(cc) {
                Err(e) if expected => panic!("NVRTC expected: {e}"),
                Ok(p) => {
                    for k in ["dmaflow_copy", "dmaflow_hold", "bgsub_mask", "conv_layer"] {
                        assert!(
                            p.contains(&format!(".entry {k}")),
                            "{k} missing from the PTX"
                        );
                    }
                }
                Err(e) => assert_eq!(e, Error::NoNvrtc),
            }
        }
    }
}
