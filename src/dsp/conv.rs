//! Fixed-point convolution layers (int16, paper 002's CNN scenario): the software
//! reference, the stream format a convolution coprocessor takes (parameters then
//! input feature maps in one packet, output feature maps back), and the five-layer
//! network the experiment runs.
//!
//! A layer computes, for output map o at (y, x), with zero padding k / 2:
//! `acc = (bias[o] << shift) + sum over i, ky, kx of w[o][i][ky][kx] * in[i][y + ky - k/2][x + kx - k/2]`
//! (exact, in 64 bits), then `v = clamp(max(acc >> shift, 0), 0, 32767)` (ReLU,
//! saturation), then, if pooling, the maximum of each 2 x 2 block (odd edges
//! dropped).

/// Words in a layer packet's header.
pub const HEADER_WORDS: usize = 8;

/// One convolution layer's shape and parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// Input feature maps.
    pub in_maps: usize,
    /// Output feature maps.
    pub out_maps: usize,
    /// Kernel size (odd).
    pub kernel: usize,
    /// 2 x 2 max-pooling after the activation.
    pub pool: bool,
    /// Fixed-point fraction bits of the weights.
    pub shift: u32,
    /// `out_maps x in_maps x kernel x kernel` weights.
    pub weights: Vec<i16>,
    /// One bias per output map (in input units).
    pub bias: Vec<i16>,
}

/// A malformed layer packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("layer packet: {0}")]
pub struct PacketError(pub String);

/// Layer header, as carried in a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Input feature maps.
    pub in_maps: usize,
    /// Output feature maps.
    pub out_maps: usize,
    /// Input height.
    pub height: usize,
    /// Input width.
    pub width: usize,
    /// Kernel size.
    pub kernel: usize,
    /// 2 x 2 max-pooling.
    pub pool: bool,
    /// Fraction bits.
    pub shift: u32,
}

impl Shape {
    /// Multiply-accumulates of the layer: every output map's pixel (before
    /// pooling) sums `in_maps x kernel x kernel` products.
    pub fn macs(&self) -> u64 {
        (self.out_maps * self.in_maps * self.kernel * self.kernel * self.height * self.width) as u64
    }

    /// Output height and width.
    pub fn out_dims(&self) -> (usize, usize) {
        if self.pool {
            (self.height / 2, self.width / 2)
        } else {
            (self.height, self.width)
        }
    }

    /// Words of weights.
    pub fn weight_words(&self) -> usize {
        self.out_maps * self.in_maps * self.kernel * self.kernel
    }

    /// Where a layer packet of this shape holds its weights, biases and input
    /// maps: byte ranges after the header ([`encode`](Layer::encode)'s layout).
    pub fn packet_parts(&self) -> [std::ops::Range<usize>; 3] {
        let w = 2 * HEADER_WORDS..2 * (HEADER_WORDS + self.weight_words());
        let b = w.end..w.end + 2 * self.out_maps;
        let i = b.end..b.end + 2 * self.in_maps * self.height * self.width;
        [w, b, i]
    }

    /// Bytes of the output feature maps.
    pub fn out_bytes(&self) -> usize {
        let (h, w) = self.out_dims();
        2 * self.out_maps * h * w
    }
}

impl Layer {
    /// The shape of this layer applied to `height x width` input maps.
    pub fn shape(&self, height: usize, width: usize) -> Shape {
        Shape {
            in_maps: self.in_maps,
            out_maps: self.out_maps,
            height,
            width,
            kernel: self.kernel,
            pool: self.pool,
            shift: self.shift,
        }
    }

    /// The layer on `input` (`in_maps x height x width`, map-major); returns the
    /// output maps and their height and width.
    pub fn forward(&self, input: &[i16], height: usize, width: usize) -> (Vec<i16>, usize, usize) {
        let s = self.shape(height, width);
        let (k, p) = (self.kernel, self.kernel / 2);
        let mut act = vec![0i16; self.out_maps * height * width];
        for o in 0..self.out_maps {
            for y in 0..height {
                for x in 0..width {
                    let mut acc = (self.bias[o] as i64) << self.shift;
                    for i in 0..self.in_maps {
                        for ky in 0..k {
                            for kx in 0..k {
                                let (yy, xx) = (
                                    (y + ky) as isize - p as isize,
                                    (x + kx) as isize - p as isize,
                                );
                                if yy < 0 || xx < 0 || yy >= height as isize || xx >= width as isize
                                {
                                    continue;
                                }
                                let w = self.weights[((o * self.in_maps + i) * k + ky) * k + kx];
                                let v = input[(i * height + yy as usize) * width + xx as usize];
                                acc += w as i64 * v as i64;
                            }
                        }
                    }
                    act[(o * height + y) * width + x] = activate(acc, self.shift);
                }
            }
        }
        if !self.pool {
            return (act, height, width);
        }
        let (oh, ow) = s.out_dims();
        let mut out = vec![0i16; self.out_maps * oh * ow];
        for o in 0..self.out_maps {
            for y in 0..oh {
                for x in 0..ow {
                    let at =
                        |dy: usize, dx: usize| act[(o * height + 2 * y + dy) * width + 2 * x + dx];
                    out[(o * oh + y) * ow + x] = at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1));
                }
            }
        }
        (out, oh, ow)
    }

    /// The packet a coprocessor takes for this layer on `input`: the header
    /// (`in_maps, out_maps, height, width, kernel, pool, shift, 0` as 16-bit
    /// words), the weights, the biases, then the input maps; little-endian int16.
    pub fn encode(&self, input: &[i16], height: usize, width: usize) -> Vec<u8> {
        let header = [
            self.in_maps,
            self.out_maps,
            height,
            width,
            self.kernel,
            self.pool as usize,
            self.shift as usize,
            0,
        ];
        let words = header
            .iter()
            .map(|&v| v as i16)
            .chain(self.weights.iter().copied())
            .chain(self.bias.iter().copied())
            .chain(input.iter().copied());
        let mut out = Vec::with_capacity(
            2 * (HEADER_WORDS + self.weights.len() + self.bias.len() + input.len()),
        );
        for w in words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }
}

/// ReLU, fixed-point scaling and saturation of one accumulator.
pub fn activate(acc: i64, shift: u32) -> i16 {
    (acc >> shift).clamp(0, i16::MAX as i64) as i16
}

/// A layer packet taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerPacket {
    /// The header.
    pub shape: Shape,
    /// Weights, output map by input map by row by column.
    pub weights: Vec<i16>,
    /// One bias per output map.
    pub bias: Vec<i16>,
    /// Input maps, map by row by column.
    pub input: Vec<i16>,
}

/// The shape a layer packet's header gives, checked against the packet's length
/// (header, weights, bias, input maps, nothing more): what a device needs to
/// find the parts of the packet where they lie.
pub fn header(packet: &[u8]) -> Result<Shape, PacketError> {
    if !packet.len().is_multiple_of(2) || packet.len() < 2 * HEADER_WORDS {
        return Err(PacketError(format!("{} bytes is no header", packet.len())));
    }
    let h = |i: usize| i16::from_le_bytes([packet[2 * i], packet[2 * i + 1]]).max(0) as usize;
    let s = Shape {
        in_maps: h(0),
        out_maps: h(1),
        height: h(2),
        width: h(3),
        kernel: h(4),
        pool: h(5) != 0,
        shift: h(6).min(31) as u32,
    };
    if s.in_maps == 0
        || s.out_maps == 0
        || s.height == 0
        || s.width == 0
        || s.kernel.is_multiple_of(2)
    {
        return Err(PacketError(format!("unusable shape {s:?}")));
    }
    let need = s.packet_parts()[2].end / 2;
    if packet.len() / 2 != need {
        return Err(PacketError(format!(
            "{} words, the header asks for {need}",
            packet.len() / 2
        )));
    }
    Ok(s)
}

/// Splits a layer packet into its shape, weights, biases and input maps.
pub fn decode(packet: &[u8]) -> Result<LayerPacket, PacketError> {
    let s = header(packet)?;
    let words: Vec<i16> = packet
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    let nw = s.weight_words();
    let mut rest = words[HEADER_WORDS..].to_vec();
    let input = rest.split_off(nw + s.out_maps);
    let bias = rest.split_off(nw);
    Ok(LayerPacket {
        shape: s,
        weights: rest,
        bias,
        input,
    })
}

/// Output maps as little-endian int16 bytes.
pub fn to_bytes(maps: &[i16]) -> Vec<u8> {
    maps.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian int16 bytes as maps (a trailing odd byte is dropped).
pub fn from_bytes(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

/// The five convolution layers of the RoShamBo network as the experiment runs
/// them: a 64 x 64 input, 16, 32, 64, 128 and 128 feature maps, a 5 x 5 kernel
/// then 3 x 3 kernels, 2 x 2 max-pooling after every layer; Q8 weights drawn
/// from `seed` and scaled so activations stay in range.
pub fn roshambo(seed: u64) -> Vec<Layer> {
    let mut st = seed ^ 0x9E37_79B9_7F4A_7C15;
    [
        (1, 16, 5),
        (16, 32, 3),
        (32, 64, 3),
        (64, 128, 3),
        (128, 128, 3),
    ]
    .into_iter()
    .map(|(in_maps, out_maps, kernel)| {
        let fan_in = (in_maps * kernel * kernel) as u64;
        // Weights in about +-2 / sqrt(fan_in) (Q8), zero-mean.
        let span = (512.0 / (fan_in as f64).sqrt()).max(2.0) as u64;
        let weights = (0..out_maps * in_maps * kernel * kernel)
            .map(|_| (lcg(&mut st) % (2 * span + 1)) as i16 - span as i16)
            .collect();
        let bias = (0..out_maps)
            .map(|_| (lcg(&mut st) % 17) as i16 - 8)
            .collect();
        Layer {
            in_maps,
            out_maps,
            kernel,
            pool: true,
            shift: 8,
            weights,
            bias,
        }
    })
    .collect()
}

/// A 64 x 64 input frame (event counts 0..=255) drawn from `seed`.
pub fn input_frame(seed: u64) -> Vec<i16> {
    let mut st = seed.wrapping_add(77);
    (0..64 * 64)
        .map(|i| {
            let (y, x) = (i / 64, i % 64);
            // A blob of events on a sparse background, as a DVS frame looks.
            let blob = (y as i64 - 32).pow(2) + (x as i64 - 20 - (seed % 20) as i64).pow(2) < 150;
            let base = (lcg(&mut st) % 8) as i16;
            if blob {
                base + 120 + (lcg(&mut st) % 100) as i16
            } else {
                base
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_layer_by_hand() {
        // One 3x3 map, one output map, 3x3 kernel of ones (Q0), bias 1, no pool.
        let l = Layer {
            in_maps: 1,
            out_maps: 1,
            kernel: 3,
            pool: false,
            shift: 0,
            weights: vec![1; 9],
            bias: vec![1],
        };
        let (out, h, w) = l.forward(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 3, 3);
        assert_eq!((h, w), (3, 3));
        // Corners see 4 pixels, edges 6, the centre all 9 (plus the bias).
        assert_eq!(out, vec![13, 22, 17, 28, 46, 34, 25, 40, 29]);
        let l = Layer { pool: true, ..l };
        assert_eq!(l.forward(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 3, 3).0, vec![46]);
    }

    #[test]
    fn activation_is_relu_scaled_and_saturated() {
        assert_eq!(activate(-5 << 8, 8), 0);
        assert_eq!(activate(300 << 8, 8), 300);
        assert_eq!(activate(1 << 40, 8), i16::MAX);
    }

    #[test]
    fn packets_round_trip_and_bad_ones_are_named() {
        let net = roshambo(1);
        let input = input_frame(1);
        let p = net[0].encode(&input, 64, 64);
        let LayerPacket {
            shape: s,
            weights: w,
            bias: b,
            input: i,
        } = decode(&p).unwrap();
        assert_eq!(
            (s.in_maps, s.out_maps, s.height, s.width, s.kernel, s.pool),
            (1, 16, 64, 64, 5, true)
        );
        assert_eq!(
            (w, b, i),
            (net[0].weights.clone(), net[0].bias.clone(), input)
        );
        assert_eq!(s.out_bytes(), 2 * 16 * 32 * 32);
        assert!(decode(&p[..p.len() - 2]).unwrap_err().0.contains("words"));
        assert!(decode(&[1]).is_err());
    }

    #[test]
    fn the_network_keeps_activity_to_the_last_layer() {
        let net = roshambo(3);
        let (mut maps, mut h, mut w) = (input_frame(3), 64, 64);
        for l in &net {
            (maps, h, w) = l.forward(&maps, h, w);
        }
        assert_eq!((maps.len(), h, w), (128 * 2 * 2, 2, 2));
        assert!(maps.iter().any(|&v| v > 0), "all-zero output");
    }
}
