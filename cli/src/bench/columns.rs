//! Table and JSON from one column list: each column of an experiment's rows
//! names its table header and its JSON key, and says how a row gives its cell
//! and its value, and may say what its value is (its doc: `bench --help`
//! lists the keys from it). The text table and the JSON rows both come from
//! that list.

use serde_json::{Map, Value};

use std::borrow::Cow;
use std::fmt::{Display, Write as _};
use std::rc::Rc;

use super::spread::Spread;

/// How a row gives a column's cell (the table) and its value (the JSON).
type Get<'a, R, T> = Box<dyn Fn(&R) -> T + 'a>;

/// One column: in the table under `header`, in the JSON under `key` (either
/// may be absent: a column only shown, or only kept).
struct Column<'a, R> {
    header: Option<&'static str>,
    key: Option<Cow<'static, str>>,
    doc: Option<Cow<'static, str>>,
    cell: Get<'a, R, String>,
    value: Get<'a, R, Value>,
}

/// The columns of one kind of row, in the table's order.
pub struct Columns<'a, R> {
    columns: Vec<Column<'a, R>>,
}

impl<'a, R> Columns<'a, R> {
    /// No columns yet.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Columns {
            columns: Vec::new(),
        }
    }

    fn push(
        mut self,
        header: Option<&'static str>,
        key: Option<&'static str>,
        cell: Get<'a, R, String>,
        value: Get<'a, R, Value>,
    ) -> Self {
        self.columns.push(Column {
            header,
            key: key.map(Cow::Borrowed),
            doc: None,
            cell,
            value,
        });
        self
    }

    /// A column in both, its cell written by `cell` and its value got by `value`.
    pub fn col<V: Into<Value>>(
        self,
        header: &'static str,
        key: &'static str,
        cell: impl Fn(&R) -> String + 'a,
        value: impl Fn(&R) -> V + 'a,
    ) -> Self {
        self.push(
            Some(header),
            Some(key),
            Box::new(cell),
            Box::new(move |r| value(r).into()),
        )
    }

    /// A column in both whose cell is its value written by `cell`.
    pub fn shown_as<V: Into<Value>>(
        self,
        header: &'static str,
        key: &'static str,
        get: impl Fn(&R) -> V + 'a,
        cell: impl Fn(V) -> String + 'a,
    ) -> Self {
        let get = Rc::new(get);
        let also = get.clone();
        self.col(header, key, move |r| cell(get(r)), move |r| also(r))
    }

    /// A column in both whose cell is its value as written.
    pub fn plain<V: Into<Value> + Display>(
        self,
        header: &'static str,
        key: &'static str,
        get: impl Fn(&R) -> V + 'a,
    ) -> Self {
        self.shown_as(header, key, get, |v| v.to_string())
    }

    /// A number in both, its cell with `places` decimals.
    pub fn fixed(
        self,
        header: &'static str,
        key: &'static str,
        places: usize,
        get: impl Fn(&R) -> f64 + 'a,
    ) -> Self {
        self.shown_as(header, key, get, move |v| format!("{v:.places$}"))
    }

    /// A number that may be absent, in both: its cell with `places`
    /// decimals, or `-`; its value, or null.
    pub fn optional(
        self,
        header: &'static str,
        key: &'static str,
        places: usize,
        get: impl Fn(&R) -> Option<f64> + 'a,
    ) -> Self {
        self.shown_as(header, key, get, move |v| {
            v.map_or("-".into(), |v| format!("{v:.places$}"))
        })
    }

    /// A size in bytes in both: its cell as a size (`4 KiB`), its value in
    /// bytes.
    pub fn bytes(
        self,
        header: &'static str,
        key: &'static str,
        get: impl Fn(&R) -> usize + 'a,
    ) -> Self {
        self.shown_as(header, key, get, crate::bench::harness::bytes_label)
    }

    /// A share in both: its cell in whole percent, its value as it is.
    pub fn percent(
        self,
        header: &'static str,
        key: &'static str,
        get: impl Fn(&R) -> f64 + 'a,
    ) -> Self {
        self.shown_as(header, key, get, |v| format!("{:.0} %", 100.0 * v))
    }

    /// A spread's median in both, its cell written by `cell`, and the whole
    /// spread kept under `spread_key`.
    pub fn median(
        self,
        header: &'static str,
        key: &'static str,
        spread_key: &'static str,
        cell: impl Fn(f64) -> String + 'a,
        get: impl Fn(&R) -> Spread + 'a,
    ) -> Self {
        let get = Rc::new(get);
        let again = get.clone();
        self.shown_as(header, key, move |r| get(r).median, cell)
            .kept(spread_key, move |r| again(r).json())
    }

    /// A spread's range `min..max` with `places` decimals in the table, the
    /// whole spread in the JSON.
    pub fn range(
        self,
        header: &'static str,
        spread_key: &'static str,
        places: usize,
        get: impl Fn(&R) -> Spread + 'a,
    ) -> Self {
        self.shown_as(header, spread_key, get, move |s| {
            format!("{:.places$}..{:.places$}", s.min, s.max)
        })
    }

    /// The last column with `doc` saying what its value is (the one place a
    /// key is described: `bench --help` reads it there).
    pub fn doc(mut self, doc: impl Into<Cow<'static, str>>) -> Self {
        if let Some(c) = self.columns.last_mut() {
            c.doc = Some(doc.into());
        }
        self
    }

    /// A column only in the JSON whose key is made at run time (`ops_per_s`
    /// and its `_min`: the column it belongs to describes it).
    pub fn kept_as<V: Into<Value>>(self, key: String, value: impl Fn(&R) -> V + 'a) -> Self {
        let mut c = self.kept("", value);
        if let Some(last) = c.columns.last_mut() {
            last.key = Some(Cow::Owned(key));
            // Described on its column: not listed on its own.
            last.doc = Some(Cow::Borrowed(""));
        }
        c
    }

    /// The header of the column kept under `key`.
    pub fn header_of(&self, key: &str) -> Option<&'static str> {
        self.columns
            .iter()
            .find(|c| c.key.as_deref() == Some(key))
            .and_then(|c| c.header)
    }

    /// The kept keys with what they hold, as `bench --help` lists them:
    /// `key (doc)` joined with commas, in lines of at most 68 characters.
    pub fn keys_help(&self) -> String {
        let mut lines = vec![String::new()];
        let kept: Vec<String> = self
            .columns
            .iter()
            .filter_map(|c| {
                let key = c.key.as_deref()?;
                Some(match c.doc.as_deref() {
                    Some("") => return None,
                    Some(d) => format!("{key} ({d})"),
                    None => key.to_string(),
                })
            })
            .collect();
        let last = kept.len().saturating_sub(1);
        for (i, k) in kept.into_iter().enumerate() {
            let item = if i == last { k } else { k + "," };
            for word in item.split(' ') {
                let line = lines.last_mut().expect("one line at least");
                if !line.is_empty() && line.len() + 1 + word.len() > 68 {
                    lines.push(word.to_string());
                } else {
                    if !line.is_empty() {
                        line.push(' ');
                    }
                    line.push_str(word);
                }
            }
        }
        lines.join("\n")
    }

    /// These columns, then `other`'s.
    pub fn and(mut self, other: Self) -> Self {
        self.columns.extend(other.columns);
        self
    }

    /// A column only in the table.
    pub fn shown(self, header: &'static str, cell: impl Fn(&R) -> String + 'a) -> Self {
        self.push(
            Some(header),
            None,
            Box::new(cell),
            Box::new(|_| Value::Null),
        )
    }

    /// A column only in the JSON.
    pub fn kept<V: Into<Value>>(self, key: &'static str, value: impl Fn(&R) -> V + 'a) -> Self {
        self.push(
            None,
            Some(key),
            Box::new(|_| String::new()),
            Box::new(move |r| value(r).into()),
        )
    }

    /// The rows as a text table of the shown columns.
    pub fn table<'r>(&self, rows: impl IntoIterator<Item = &'r R>) -> String
    where
        R: 'r,
    {
        let shown: Vec<&Column<R>> = self.columns.iter().filter(|c| c.header.is_some()).collect();
        let headers: Vec<&str> = shown.iter().filter_map(|c| c.header).collect();
        let cells: Vec<Vec<String>> = rows
            .into_iter()
            .map(|r| shown.iter().map(|c| (c.cell)(r)).collect())
            .collect();
        table(&headers, &cells)
    }

    /// The rows as lines of fixed widths (negative: left-aligned), one space
    /// between cells, under a line of the headers.
    pub fn padded<'r>(&self, widths: &[i32], rows: impl IntoIterator<Item = &'r R>) -> String
    where
        R: 'r,
    {
        let line = |cells: &mut dyn Iterator<Item = String>| {
            let cells: Vec<String> = cells
                .zip(widths)
                .map(|(c, &w)| match w {
                    ..0 => format!("{c:<w$}", w = w.unsigned_abs() as usize),
                    _ => format!("{c:>w$}", w = w as usize),
                })
                .collect();
            cells.join(" ") + "\n"
        };
        let shown: Vec<&Column<R>> = self.columns.iter().filter(|c| c.header.is_some()).collect();
        let mut out = line(&mut shown.iter().filter_map(|c| c.header.map(String::from)));
        for r in rows {
            out += &line(&mut shown.iter().map(|c| (c.cell)(r)));
        }
        out
    }

    /// The rows as JSON objects of the kept columns.
    pub fn json<'r>(&self, rows: impl IntoIterator<Item = &'r R>) -> Vec<Value>
    where
        R: 'r,
    {
        let kept = || {
            self.columns
                .iter()
                .filter_map(|c| Some((c.key.as_deref()?, &c.value)))
        };
        rows.into_iter()
            .map(|r| Value::Object(kept().map(|(k, v)| (k.into(), v(r))).collect::<Map<_, _>>()))
            .collect()
    }
}

/// Renders rows as a text table with right-aligned columns.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let parts: Vec<String> = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, &mut headers.iter().copied());
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    let _ = writeln!(out, "{}", rule.join("  "));
    for row in rows {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let t = table(&["a", "bbb"], &[vec!["xx".into(), "y".into()]]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], " a  bbb");
        assert_eq!(lines[1], "--  ---");
        assert_eq!(lines[2], "xx    y");
    }

    #[test]
    fn one_list_gives_the_table_and_the_json() {
        let cols = Columns::<(u32, f64)>::new()
            .plain("n", "n", |r| r.0)
            .fixed("rate", "rate", 1, |r| r.1)
            .doc("per second")
            .kept("twice", |r| r.1 * 2.0)
            .shown("note", |r| format!("#{}", r.0));
        let rows = [(1, 2.24), (10, 0.5)];
        assert_eq!(cols.keys_help(), "n, rate (per second), twice");
        assert_eq!(cols.header_of("rate"), Some("rate"));
        assert_eq!(
            cols.table(&rows),
            " n  rate  note\n--  ----  ----\n 1   2.2    #1\n10   0.5   #10\n"
        );
        assert_eq!(
            Value::from(cols.json(&rows)),
            serde_json::json!([
                {"n": 1, "rate": 2.24, "twice": 4.48},
                {"n": 10, "rate": 0.5, "twice": 1.0},
            ])
        );
    }
}
