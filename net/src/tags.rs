//! gr-zeromq's tag header (`pass_tags`) and the PMT values in it.
//!
//! A message with tags starts with: `u16` magic 0x5FF0, `u8` version 1,
//! `u64` offset of the message's first item in the stream, `u64` tag count
//! (all in host byte order, little-endian here), then per tag its `u64`
//! offset and the PMT serialization of its key, value and source id
//! (big-endian, GNU Radio's `pmt::serialize`). The items follow.

use crate::Error;

/// gr-zeromq's header magic.
pub const MAGIC: u16 = 0x5FF0;
/// The header version gr-zeromq writes.
pub const VERSION: u8 = 1;

/// A PMT value, as GNU Radio serializes it. Scalars, symbols, pairs, tuples
/// and vectors are decoded; uniform vectors are kept as their serialized
/// bytes (passed on unchanged).
#[derive(Debug, Clone, PartialEq)]
pub enum Pmt {
    /// `PMT_T`.
    True,
    /// `PMT_F`.
    False,
    /// `PMT_NIL`.
    Null,
    /// A symbol (`pmt::intern`), such as a tag's key.
    Symbol(String),
    /// An integer (`pmt::from_long`): serialized in 4 bytes when it fits.
    Long(i64),
    /// `pmt::from_uint64`.
    Uint64(u64),
    /// `pmt::from_double`.
    Double(f64),
    /// `pmt::from_complex`.
    Complex(f64, f64),
    /// `pmt::cons`.
    Pair(Box<Pmt>, Box<Pmt>),
    /// `pmt::make_tuple`.
    Tuple(Vec<Pmt>),
    /// `pmt::make_vector`.
    Vector(Vec<Pmt>),
    /// A uniform vector, its serialization as it came.
    UniformVector(Vec<u8>),
}

/// A stream tag: at item `offset`, `key` = `value`, from `srcid`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tag {
    /// Absolute item offset in the stream.
    pub offset: u64,
    /// The tag's key (a symbol, usually).
    pub key: Pmt,
    /// Its value.
    pub value: Pmt,
    /// Who set it (`PMT_F` when no one says).
    pub srcid: Pmt,
}

/// The most tags one message's header may carry.
pub const MAX_TAGS: u64 = 4096;
/// The most PMT values (nested ones included) one header may hold: what a
/// message can make the receiver allocate is bounded by this, not by the
/// message's length.
pub const MAX_PMTS: usize = 1 << 16;

/// A byte reader over one message that names what it ran out of.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// PMT values read so far.
    pmts: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(Error::BadMessage(format!(
                "tag header cut short in {what} (byte {} of {})",
                self.at,
                self.bytes.len()
            )));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn be<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Error> {
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N, what)?);
        Ok(b)
    }

    fn pmt(&mut self, depth: usize) -> Result<Pmt, Error> {
        if depth > 32 {
            return Err(Error::BadMessage("PMT nested deeper than 32".into()));
        }
        self.pmts += 1;
        if self.pmts > MAX_PMTS {
            return Err(Error::BadMessage(format!(
                "a tag header holding more than {MAX_PMTS} PMT values"
            )));
        }
        let start = self.at;
        let [t] = self.be::<1>("a PMT type")?;
        Ok(match t {
            0x00 => Pmt::True,
            0x01 => Pmt::False,
            0x06 => Pmt::Null,
            0x02 => {
                let n = u16::from_be_bytes(self.be("a symbol's length")?) as usize;
                let s = self.take(n, "a symbol")?;
                Pmt::Symbol(String::from_utf8_lossy(s).into_owned())
            }
            0x03 => Pmt::Long(i32::from_be_bytes(self.be("an int32")?) as i64),
            0x0d => Pmt::Long(i64::from_be_bytes(self.be("an int64")?)),
            0x0b => Pmt::Uint64(u64::from_be_bytes(self.be("a uint64")?)),
            0x04 => Pmt::Double(f64::from_be_bytes(self.be("a double")?)),
            0x05 => Pmt::Complex(
                f64::from_be_bytes(self.be("a complex")?),
                f64::from_be_bytes(self.be("a complex")?),
            ),
            0x07 => Pmt::Pair(
                Box::new(self.pmt(depth + 1)?),
                Box::new(self.pmt(depth + 1)?),
            ),
            0x08 | 0x0c => {
                let n = u32::from_be_bytes(self.be("a length")?) as usize;
                let items = (0..n)
                    .map(|_| self.pmt(depth + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                if t == 0x08 {
                    Pmt::Vector(items)
                } else {
                    Pmt::Tuple(items)
                }
            }
            0x0a => {
                let [sub] = self.be::<1>("a uniform vector's type")?;
                let size = match sub & 0x7f {
                    0x00 | 0x01 => 1,
                    0x02 | 0x03 => 2,
                    0x04 | 0x05 | 0x08 => 4,
                    0x06 | 0x07 | 0x09 | 0x0a => 8,
                    0x0b => 16,
                    other => {
                        return Err(Error::BadMessage(format!(
                            "unknown uniform vector type {other:#04x}"
                        )));
                    }
                };
                let n = u32::from_be_bytes(self.be("a uniform vector's length")?) as usize;
                let [npad] = self.be::<1>("a uniform vector's padding")?;
                self.take(npad as usize, "a uniform vector's padding")?;
                let bytes = n
                    .checked_mul(size)
                    .ok_or_else(|| Error::BadMessage(format!("a uniform vector of {n} items")))?;
                self.take(bytes, "a uniform vector")?;
                Pmt::UniformVector(self.bytes[start..self.at].to_vec())
            }
            other => {
                return Err(Error::BadMessage(format!(
                    "PMT type {other:#04x} is not one dmaflow reads in a tag"
                )));
            }
        })
    }
}

impl Pmt {
    /// Appends GNU Radio's serialization of the value to `out`.
    pub fn serialize(&self, out: &mut Vec<u8>) {
        match self {
            Pmt::True => out.push(0x00),
            Pmt::False => out.push(0x01),
            Pmt::Null => out.push(0x06),
            Pmt::Symbol(s) => {
                let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
                out.push(0x02);
                out.extend_from_slice(&(b.len() as u16).to_be_bytes());
                out.extend_from_slice(b);
            }
            Pmt::Long(v) => match i32::try_from(*v) {
                Ok(v) => {
                    out.push(0x03);
                    out.extend_from_slice(&v.to_be_bytes());
                }
                Err(_) => {
                    out.push(0x0d);
                    out.extend_from_slice(&v.to_be_bytes());
                }
            },
            Pmt::Uint64(v) => {
                out.push(0x0b);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Pmt::Double(v) => {
                out.push(0x04);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Pmt::Complex(re, im) => {
                out.push(0x05);
                out.extend_from_slice(&re.to_be_bytes());
                out.extend_from_slice(&im.to_be_bytes());
            }
            Pmt::Pair(a, b) => {
                out.push(0x07);
                a.serialize(out);
                b.serialize(out);
            }
            Pmt::Tuple(v) | Pmt::Vector(v) => {
                out.push(if matches!(self, Pmt::Tuple(_)) {
                    0x0c
                } else {
                    0x08
                });
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                for p in v {
                    p.serialize(out);
                }
            }
            Pmt::UniformVector(raw) => out.extend_from_slice(raw),
        }
    }
}

impl std::fmt::Display for Pmt {
    /// As GNU Radio's `pmt::write_string` prints it (uniform vectors by
    /// their size).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |f: &mut std::fmt::Formatter<'_>, v: &[Pmt]| -> std::fmt::Result {
            for (i, p) in v.iter().enumerate() {
                if i > 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{p}")?;
            }
            Ok(())
        };
        match self {
            Pmt::True => f.write_str("#t"),
            Pmt::False => f.write_str("#f"),
            Pmt::Null => f.write_str("()"),
            Pmt::Symbol(s) => f.write_str(s),
            Pmt::Long(v) => write!(f, "{v}"),
            Pmt::Uint64(v) => write!(f, "{v}"),
            Pmt::Double(v) => write!(f, "{v}"),
            Pmt::Complex(re, im) => write!(f, "{re}+{im}j"),
            Pmt::Pair(a, b) => write!(f, "({a} . {b})"),
            Pmt::Tuple(v) => {
                f.write_str("{")?;
                list(f, v)?;
                f.write_str("}")
            }
            Pmt::Vector(v) => {
                f.write_str("#(")?;
                list(f, v)?;
                f.write_str(")")
            }
            Pmt::UniformVector(raw) => write!(f, "#[uniform vector, {} bytes]", raw.len()),
        }
    }
}

impl std::fmt::Display for Tag {
    /// `key=value@offset`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}@{}", self.key, self.value, self.offset)
    }
}

/// What a tag header says: the offset of the message's first item, and the
/// tags on its items.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Offset in the stream of the message's first item.
    pub offset: u64,
    /// The tags.
    pub tags: Vec<Tag>,
}

impl Header {
    /// Reads the header at the start of `message`; returns it and the bytes
    /// after it (the items).
    pub fn parse(message: &[u8]) -> Result<(Header, &[u8]), Error> {
        let mut r = Reader {
            bytes: message,
            at: 0,
            pmts: 0,
        };
        let magic = u16::from_le_bytes(r.be("the magic")?);
        if magic != MAGIC {
            return Err(Error::BadMessage(format!(
                "tag header magic {magic:#06x}, not {MAGIC:#06x} (is the sender's pass_tags on?)"
            )));
        }
        let [version] = r.be::<1>("the version")?;
        if version != VERSION {
            return Err(Error::BadMessage(format!(
                "tag header version {version}, not {VERSION}"
            )));
        }
        let offset = u64::from_le_bytes(r.be("the offset")?);
        let count = u64::from_le_bytes(r.be("the tag count")?);
        if count > MAX_TAGS {
            return Err(Error::BadMessage(format!(
                "a tag header with {count} tags (at most {MAX_TAGS} are read)"
            )));
        }
        let mut tags = Vec::new();
        for _ in 0..count {
            let offset = u64::from_le_bytes(r.be("a tag's offset")?);
            let key = r.pmt(0)?;
            let value = r.pmt(0)?;
            let srcid = r.pmt(0)?;
            tags.push(Tag {
                offset,
                key,
                value,
                srcid,
            });
        }
        let at = r.at;
        Ok((Header { offset, tags }, &message[at..]))
    }

    /// Appends the header as gr-zeromq writes it to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.push(VERSION);
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&(self.tags.len() as u64).to_le_bytes());
        for t in &self.tags {
            out.extend_from_slice(&t.offset.to_le_bytes());
            t.key.serialize(out);
            t.value.serialize(out);
            t.srcid.serialize(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// A value and how to make it.
    type Case = (&'static str, fn() -> Pmt);

    /// Serializations printed by GNU Radio 3.10.5's `pmt.serialize_str`.
    const GNURADIO: [Case; 8] = [
        ("0300000005", || Pmt::Long(5)),
        ("0d0000010000000000", || Pmt::Long(1 << 40)),
        ("02000772785f74696d65", || Pmt::Symbol("rx_time".into())),
        ("043ff8000000000000", || Pmt::Double(1.5)),
        ("06", || Pmt::Null),
        ("0b0000000000000007", || Pmt::Uint64(7)),
        ("07020001610300000001", || {
            Pmt::Pair(Box::new(Pmt::Symbol("a".into())), Box::new(Pmt::Long(1)))
        }),
        ("0c000000020300000001044000000000000000", || {
            Pmt::Tuple(vec![Pmt::Long(1), Pmt::Double(2.0)])
        }),
    ];

    #[test]
    fn pmts_read_and_write_as_gnu_radio_does() {
        for (wire, value) in GNURADIO {
            let bytes = hex(wire);
            let mut r = Reader {
                bytes: &bytes,
                at: 0,
                pmts: 0,
            };
            assert_eq!(r.pmt(0).unwrap(), value(), "{wire}");
            assert_eq!(r.at, bytes.len(), "{wire}");
            let mut out = Vec::new();
            value().serialize(&mut out);
            assert_eq!(out, bytes, "{wire}");
        }
        // A uniform f32 vector passes through byte for byte.
        let uv = hex("0a080000000201003f80000040000000");
        let mut r = Reader {
            bytes: &uv,
            at: 0,
            pmts: 0,
        };
        let p = r.pmt(0).unwrap();
        assert_eq!(p, Pmt::UniformVector(uv.clone()));
        let mut out = Vec::new();
        p.serialize(&mut out);
        assert_eq!(out, uv);
    }

    #[test]
    fn values_and_tags_print_as_gnu_radio_writes_them() {
        let t = Tag {
            offset: 1000,
            key: Pmt::Symbol("burst".into()),
            value: Pmt::Pair(Box::new(Pmt::Long(1)), Box::new(Pmt::Null)),
            srcid: Pmt::False,
        };
        assert_eq!(t.to_string(), "burst=(1 . ())@1000");
        let v = Pmt::Vector(vec![Pmt::True, Pmt::Double(2.5)]);
        assert_eq!(v.to_string(), "#(#t 2.5)");
        assert_eq!(Pmt::Tuple(vec![Pmt::Uint64(3)]).to_string(), "{3}");
    }

    #[test]
    fn a_header_round_trips_and_bad_ones_are_named() {
        let h = Header {
            offset: 4096,
            tags: vec![Tag {
                offset: 4100,
                key: Pmt::Symbol("burst".into()),
                value: Pmt::True,
                srcid: Pmt::False,
            }],
        };
        let mut msg = Vec::new();
        h.write(&mut msg);
        assert_eq!(&msg[..3], &[0xf0, 0x5f, 1]);
        msg.extend_from_slice(&[1, 2, 3, 4]);
        let (back, items) = Header::parse(&msg).unwrap();
        assert_eq!((back, items), (h, &[1u8, 2, 3, 4][..]));
        let e = Header::parse(&[0, 0, 1]).unwrap_err().to_string();
        assert!(e.contains("magic") && e.contains("pass_tags"), "{e}");
        let e = Header::parse(&msg[..20]).unwrap_err().to_string();
        assert!(e.contains("cut short"), "{e}");
        let mut bad = msg.clone();
        bad[27] = 0x42; // the key's PMT type
        let e = Header::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("0x42"), "{e}");
    }

    /// A header with `count` tags of the given PMT bytes each for key,
    /// value and source id.
    fn crafted(count: u64, pmt: &[u8], tags_written: usize) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&MAGIC.to_le_bytes());
        m.push(VERSION);
        m.extend_from_slice(&0u64.to_le_bytes());
        m.extend_from_slice(&count.to_le_bytes());
        for i in 0..tags_written {
            m.extend_from_slice(&(i as u64).to_le_bytes());
            for _ in 0..3 {
                m.extend_from_slice(pmt);
            }
        }
        m
    }

    #[test]
    fn what_a_header_can_make_the_receiver_hold_is_bounded() {
        // A vector of ten million PMT_T in a 10 MB message: refused at the
        // bound, not expanded to hundreds of megabytes.
        let mut v = vec![0x08];
        v.extend_from_slice(&10_000_000u32.to_be_bytes());
        v.extend(std::iter::repeat_n(0x00, 10_000_000));
        let m = crafted(1, &v, 1);
        let e = Header::parse(&m).unwrap_err().to_string();
        assert!(e.contains("PMT values"), "{e}");
        // More tags than a header may carry: refused before any is read.
        let e = Header::parse(&crafted(u64::MAX, &[0x00], 0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tags"), "{e}");
        // At the bounds: accepted.
        let m = crafted(MAX_TAGS, &[0x00], MAX_TAGS as usize);
        assert_eq!(Header::parse(&m).unwrap().0.tags.len() as u64, MAX_TAGS);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 3000,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any bytes after a valid start: an error or a header, never a
        /// panic; a header's PMTs stay within the bound.
        #[test]
        fn any_bytes_parse_to_a_header_or_an_error(
            count in 0u64..8,
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            cut in 0usize..420,
        ) {
            let mut m = crafted(count, &[], 0);
            m.extend_from_slice(&body);
            m.truncate(cut.max(3).min(m.len()));
            if let Ok((h, rest)) = Header::parse(&m) {
                proptest::prop_assert_eq!(h.tags.len() as u64, count);
                proptest::prop_assert!(rest.len() <= m.len());
            }
        }

        /// A valid header cut short or with one byte changed: an error or a
        /// header, never a panic.
        #[test]
        fn damaged_headers_are_errors_not_panics(
            tags in proptest::collection::vec((0u64..1000, "[a-z]{0,12}", proptest::prelude::any::<i64>()), 0..6),
            flip in 0usize..400,
            to in proptest::prelude::any::<u8>(),
            cut in 0usize..400,
        ) {
            let h = Header {
                offset: 7,
                tags: tags
                    .iter()
                    .map(|(o, k, v)| Tag {
                        offset: *o,
                        key: Pmt::Symbol(k.clone()),
                        value: Pmt::Long(*v),
                        srcid: Pmt::Vector(vec![Pmt::Double(1.5), Pmt::Null]),
                    })
                    .collect(),
            };
            let mut m = Vec::new();
            h.write(&mut m);
            let (back, _) = Header::parse(&m).unwrap();
            proptest::prop_assert_eq!(back, h);
            if flip < m.len() {
                m[flip] = to;
            }
            m.truncate(cut.min(m.len()));
            let _ = Header::parse(&m);
        }
    }
}
