// dmaflow's GPU kernels, compiled at run time by NVRTC (src/gpu/kernels.rs).
// Each computes exactly what its CPU reference in dmaflow::dsp computes, and is
// checked against it byte for byte on every run of the experiments.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned long long u64;

// Grid-stride loop over [0, n).
#define EACH(i, n) \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (u64)blockDim.x * gridDim.x)

// 16 bytes, the widest load and store a thread makes.
struct words16 {
    u64 lo, hi;
};

// Whether both addresses are 16-byte aligned, so whole words16 can move.
__device__ bool aligned16(const void *a, const void *b) {
    return (((u64)a | (u64)b) & 15) == 0;
}

// dst[i] = src[i]: moves a block between device memory and mapped host memory,
// which the kernel reads or writes in place over PCIe (16 bytes per load where
// both ends allow, the rest byte by byte).
extern "C" __global__ void dmaflow_copy(u8 *dst, const u8 *src, u64 n) {
    u64 head = 0;
    if (aligned16(dst, src)) {
        head = n / 16 * 16;
        EACH(i, n / 16)((words16 *)dst)[i] = ((const words16 *)src)[i];
    }
    EACH(i, n - head) dst[head + i] = src[head + i];
}

// p[i] = ~p[i]: the stream processor of the GPU's two-way transfers.
extern "C" __global__ void dmaflow_invert(u8 *p, u64 n) {
    u64 head = 0;
    if (aligned16(p, p)) {
        head = n / 16 * 16;
        EACH(i, n / 16) {
            words16 w = ((words16 *)p)[i];
            w.lo = ~w.lo;
            w.hi = ~w.hi;
            ((words16 *)p)[i] = w;
        }
    }
    EACH(i, n - head) p[head + i] = (u8)~p[head + i];
}

// Holds its stream until the host writes a non-zero word at `flag` (mapped host
// memory), so copies queued behind it start back to back when released. Gives
// up after `limit_ns` of device time and says so in flag[1]. Device code only:
// the other kernels are also built for the host by tests/gpu_kernels_on_host.rs.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
extern "C" __global__ void dmaflow_hold(volatile int *flag, u64 limit_ns) {
    u64 t0 = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        if (flag[0] != 0) return;
        u64 t = 0;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > limit_ns) {
            flag[1] = 1;
            return;
        }
        __nanosleep(1000);
    }
}
#endif

// Background subtraction (dsp::bgsub), step 1: the absolute difference of frame
// and background, and the background moved one step toward the frame.
extern "C" __global__ void bgsub_diff(const u8 *frame, const u8 *bg, u8 *new_bg, u8 *d,
                                      u64 n) {
    EACH(i, n) {
        u8 f = frame[i], b = bg[i];
        d[i] = f > b ? f - b : b - f;
        new_bg[i] = f > b ? b + 1 : (f < b ? b - 1 : b);
    }
}

// Step 2 (with the filter): 3 x 3 Gaussian [1 2 1]^T [1 2 1] / 16, rounded, edges
// replicated.
extern "C" __global__ void bgsub_gauss(const u8 *d, u8 *g, u64 w, u64 h) {
    EACH(i, w * h) {
        u64 y = i / w, x = i % w;
        u64 up = y > 0 ? y - 1 : 0, down = y + 1 < h ? y + 1 : h - 1;
        u64 l = x > 0 ? x - 1 : 0, r = x + 1 < w ? x + 1 : w - 1;
        const u64 rows[3] = {up, y, down};
        const u16 wy[3] = {1, 2, 1};
        u16 sum = 0;
        for (int k = 0; k < 3; k++) {
            const u8 *row = d + rows[k] * w;
            sum += wy[k] * (u16)(row[l] + 2 * row[x] + row[r]);
        }
        g[i] = (u8)((sum + 8) >> 4);
    }
}

// Step 3: the mask, 255 where the (3 x 3 maximum of the filtered, with the filter)
// difference exceeds the threshold.
extern "C" __global__ void bgsub_mask(const u8 *s, u8 *mask, u64 w, u64 h, int threshold,
                                      int filter) {
    EACH(i, w * h) {
        u8 v = s[i];
        if (filter) {
            u64 y = i / w, x = i % w;
            u64 up = y > 0 ? y - 1 : 0, down = y + 1 < h ? y + 1 : h - 1;
            u64 l = x > 0 ? x - 1 : 0, r = x + 1 < w ? x + 1 : w - 1;
            const u64 rows[3] = {up, y, down};
            v = 0;
            for (int k = 0; k < 3; k++) {
                const u8 *row = s + rows[k] * w;
                u8 m = row[l] > row[x] ? row[l] : row[x];
                m = m > row[r] ? m : row[r];
                v = v > m ? v : m;
            }
        }
        mask[i] = v > threshold ? 255 : 0;
    }
}

// One int16 convolution layer (dsp::conv): zero padding k / 2, 64-bit exact
// accumulation of (bias << shift) + sum w * in, then >> shift, ReLU and
// saturation to 32767, then (with pool) the maximum of each 2 x 2 block, odd
// edges dropped. One thread per output value.
__device__ short conv_at(const short *in, const short *wt, const short *bias, int o, int y,
                         int x, int in_maps, int h, int w, int k, int shift) {
    int p = k / 2;
    long long acc = (long long)bias[o] * (1LL << shift);
    for (int i = 0; i < in_maps; i++) {
        for (int ky = 0; ky < k; ky++) {
            int yy = y + ky - p;
            if (yy < 0 || yy >= h) continue;
            for (int kx = 0; kx < k; kx++) {
                int xx = x + kx - p;
                if (xx < 0 || xx >= w) continue;
                long long wv = wt[((o * in_maps + i) * k + ky) * k + kx];
                acc += wv * (long long)in[((long long)i * h + yy) * w + xx];
            }
        }
    }
    long long v = acc >> shift;
    return (short)(v < 0 ? 0 : (v > 32767 ? 32767 : v));
}

extern "C" __global__ void conv_layer(const short *in, const short *wt, const short *bias,
                                      short *out, int in_maps, int out_maps, int h, int w,
                                      int k, int pool, int shift) {
    int oh = pool ? h / 2 : h, ow = pool ? w / 2 : w;
    EACH(j, (u64)out_maps * oh * ow) {
        int o = (int)(j / ((u64)oh * ow));
        int y = (int)(j / ow % oh), x = (int)(j % ow);
        short v;
        if (pool) {
            v = conv_at(in, wt, bias, o, 2 * y, 2 * x, in_maps, h, w, k, shift);
            for (int d = 1; d < 4; d++) {
                short u = conv_at(in, wt, bias, o, 2 * y + d / 2, 2 * x + d % 2, in_maps, h,
                                  w, k, shift);
                v = u > v ? u : v;
            }
        } else {
            v = conv_at(in, wt, bias, o, y, x, in_maps, h, w, k, shift);
        }
        out[j] = v;
    }
}
