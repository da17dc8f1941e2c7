//! Process networks from Python: dmaflow's graphs with Python callables as
//! nodes (each on its own thread, holding the GIL only while Python code
//! runs) beside dmaflow's built-in nodes. A Python node sees its ports'
//! windows as numpy arrays in place ([`Window`]).

use std::sync::{Arc, Mutex, PoisonError};

use dmaflow::graph::{self, Input, Output};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::window::{Lease, Window};

/// A port's items: queues are typed by item size (the bits are the caller's).
enum In {
    U8(Input<u8>),
    U16(Input<u16>),
    F32(Input<f32>),
    U64(Input<u64>),
}

/// The writing end, likewise.
enum Out {
    U8(Output<u8>),
    U16(Output<u16>),
    F32(Output<f32>),
    U64(Output<u64>),
}

/// Runs `$body` with `$p` bound to the typed port inside `$e`.
macro_rules! each {
    ($kind:ident, $e:expr, $p:ident => $body:expr) => {
        match $e {
            $kind::U8($p) => $body,
            $kind::U16($p) => $body,
            $kind::F32($p) => $body,
            $kind::U64($p) => $body,
        }
    };
}

/// A queue between two ports, before a node takes its ends.
struct Edge {
    itemsize: usize,
    out: Option<Out>,
    inp: Option<In>,
}

/// A process network being built; `run()` runs it.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Graph {
    g: Mutex<Option<graph::Graph>>,
    edges: Mutex<Vec<Edge>>,
}

impl Graph {
    fn with_graph<T>(&self, f: impl FnOnce(&mut graph::Graph) -> PyResult<T>) -> PyResult<T> {
        let mut g = self.g.lock().unwrap_or_else(PoisonError::into_inner);
        match g.as_mut() {
            Some(g) => f(g),
            None => Err(PyRuntimeError::new_err("the graph has run already")),
        }
    }

    fn take_in(&self, edge: usize) -> PyResult<(In, usize)> {
        let mut edges = self.edges.lock().unwrap_or_else(PoisonError::into_inner);
        let e = edges
            .get_mut(edge)
            .ok_or_else(|| PyValueError::new_err(format!("no edge {edge}")))?;
        let p = e
            .inp
            .take()
            .ok_or_else(|| PyValueError::new_err(format!("edge {edge}'s input is taken")))?;
        Ok((p, e.itemsize))
    }

    fn take_out(&self, edge: usize) -> PyResult<(Out, usize)> {
        let mut edges = self.edges.lock().unwrap_or_else(PoisonError::into_inner);
        let e = edges
            .get_mut(edge)
            .ok_or_else(|| PyValueError::new_err(format!("no edge {edge}")))?;
        let p = e
            .out
            .take()
            .ok_or_else(|| PyValueError::new_err(format!("edge {edge}'s output is taken")))?;
        Ok((p, e.itemsize))
    }
}

#[pymethods]
impl Graph {
    #[new]
    fn new() -> Self {
        Graph {
            g: Mutex::new(Some(graph::Graph::new())),
            edges: Mutex::new(Vec::new()),
        }
    }

    /// Connects output port `from` = (node, port) to input port `to` with a
    /// queue of at least `items` items of `itemsize` bytes (1, 2, 4 or 8);
    /// returns the edge's number.
    fn connect(
        &self,
        from: (String, String),
        to: (String, String),
        items: usize,
        itemsize: usize,
    ) -> PyResult<usize> {
        let (out, inp) = self.with_graph(|g| {
            let f = (from.0.as_str(), from.1.as_str());
            let t = (to.0.as_str(), to.1.as_str());
            macro_rules! typed {
                ($t:ty, $k:ident) => {{
                    let (o, i) = g
                        .connect_with_capacity::<$t>(f, t, items)
                        .map_err(crate::errors::graph)?;
                    (Out::$k(o), In::$k(i))
                }};
            }
            Ok(match itemsize {
                1 => typed!(u8, U8),
                2 => typed!(u16, U16),
                4 => typed!(f32, F32),
                8 => typed!(u64, U64),
                other => {
                    return Err(PyValueError::new_err(format!(
                        "items of {other} bytes: a queue holds items of 1, 2, 4 or 8 bytes"
                    )));
                }
            })
        })?;
        let mut edges = self.edges.lock().unwrap_or_else(PoisonError::into_inner);
        edges.push(Edge {
            itemsize,
            out: Some(out),
            inp: Some(inp),
        });
        Ok(edges.len() - 1)
    }

    /// Adds node `name`: `body(inputs, outputs)` is called on the node's own
    /// thread with the ports of the edges named (tuples of `InPort` and
    /// `OutPort`); the ports close when it returns, an exception stops the
    /// graph with its message.
    fn python_node(
        &self,
        name: &str,
        body: Py<PyAny>,
        inputs: Vec<usize>,
        outputs: Vec<usize>,
    ) -> PyResult<()> {
        let ins = inputs
            .iter()
            .map(|&e| self.take_in(e))
            .collect::<PyResult<Vec<_>>>()?;
        let outs = outputs
            .iter()
            .map(|&e| self.take_out(e))
            .collect::<PyResult<Vec<_>>>()?;
        let node_name = name.to_string();
        self.with_graph(|g| {
            g.node(name, move || {
                Python::attach(|py| -> graph::NodeResult {
                    let ins = ins
                        .into_iter()
                        .map(|(p, size)| Py::new(py, InPort::new(p, size)))
                        .collect::<PyResult<Vec<_>>>()?;
                    let outs = outs
                        .into_iter()
                        .map(|(p, size)| Py::new(py, OutPort::new(p, size)))
                        .collect::<PyResult<Vec<_>>>()?;
                    let args = (PyTuple::new(py, &ins)?, PyTuple::new(py, &outs)?);
                    let called = body.call1(py, args);
                    // The ports close when the body returns, whatever Python
                    // kept of them (their memory stays mapped for what it kept).
                    for p in &outs {
                        p.get().close();
                    }
                    for p in &ins {
                        p.get().close();
                    }
                    match called {
                        // A reader of an output has finished: a normal end
                        // when every output's readers have (the runtime
                        // decides), else the graph's error.
                        Err(e) if e.is_instance_of::<crate::errors::QueueClosed>(py) => {
                            return Err(graph::Error::Port {
                                node: node_name.clone(),
                                port: "out".into(),
                                source: dmaflow::ring::Error::Closed,
                            }
                            .into());
                        }
                        other => other,
                    }
                    .map(|_| ())
                    .map_err(|e| {
                        let text = match e.traceback(py).and_then(|t| t.format().ok()) {
                            Some(tb) => format!("{tb}{e}"),
                            None => e.to_string(),
                        };
                        text.into()
                    })
                })
            })
            .map_err(crate::errors::graph)
        })
    }

    /// Adds dmaflow's overlap-save FIR filter as node `name` (float32 edges,
    /// windows read in place from the mirrored queue).
    fn fir_node(&self, name: &str, taps: Vec<f32>, input: usize, output: usize) -> PyResult<()> {
        let (i, isz) = self.take_in(input)?;
        let (o, osz) = self.take_out(output)?;
        let (In::F32(i), Out::F32(o)) = (i, o) else {
            return Err(PyValueError::new_err(format!(
                "a FIR node takes float32 edges, not items of {isz} and {osz} bytes"
            )));
        };
        let fir = dmaflow::dsp::fir::OverlapSave::new(&taps, None).map_err(crate::errors::value)?;
        self.with_graph(|g| {
            dmaflow::dsp::fir::add_node(g, name, fir, dmaflow::dsp::fir::Mode::ZeroCopy, i, o)
                .map_err(crate::errors::graph)
        })
    }

    /// Runs every node to its end, with the GIL released (Python nodes take
    /// it while their code runs); a failing node's error is raised.
    fn run(&self, py: Python<'_>) -> PyResult<()> {
        let g = self
            .g
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the graph has run already"))?;
        py.detach(move || g.run()).map_err(crate::errors::graph)
    }
}

/// Opens a window on a port: refused while the last one's views are alive
/// (the queue may move to new memory meanwhile); `locate` finds the slots,
/// with the GIL released (it may wait).
fn open_window<P: pyo3::PyClass + Sync>(
    slf: &Bound<'_, P>,
    py: Python<'_>,
    views: &Arc<Lease>,
    writable: bool,
    locate: impl FnOnce() -> PyResult<(usize, usize)> + Send,
) -> PyResult<Window> {
    // The last window's slots may move (the queue may grow meanwhile): it
    // makes no new view from here on.
    views.hand_on(if writable { "reserved slots" } else { "window" })?;
    let (address, len) = py.detach(locate)?;
    Ok(Window::new(
        slf.clone().into_any().unbind(),
        views.clone(),
        address,
        len,
        writable,
    ))
}

/// Runs `f` on the port while it is open; an error once its node closed it.
fn with_open<P, R>(port: &Mutex<Option<P>>, f: impl FnOnce(&mut P) -> PyResult<R>) -> PyResult<R> {
    let mut g = port.lock().unwrap_or_else(PoisonError::into_inner);
    let p = g
        .as_mut()
        .ok_or_else(|| PyRuntimeError::new_err("the port is closed"))?;
    f(p)
}

/// A Python node's input port.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct InPort {
    port: Mutex<Option<In>>,
    /// The queue's memory once the port is closed: a window kept past its
    /// node's end still points into it.
    held: Mutex<Option<dmaflow::ring::MemoryHold>>,
    itemsize: usize,
    views: Arc<Lease>,
}

impl InPort {
    fn new(p: In, itemsize: usize) -> Self {
        InPort {
            port: Mutex::new(Some(p)),
            held: Mutex::new(None),
            itemsize,
            views: Arc::default(),
        }
    }

    fn close(&self) {
        let port = self
            .port
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // Windows lent so far make no new view; views alive keep what they
        // show: the queue's memory is kept for them, and the writer moves the
        // queue to new memory before it reuses a slot they show.
        let alive = self.views.end();
        if let Some(p) = port {
            let hold = if alive > 0 {
                each!(In, p, q => q.close_keeping_memory())
            } else {
                each!(In, &p, q => q.hold())
            };
            *self.held.lock().unwrap_or_else(PoisonError::into_inner) = hold;
        }
    }
}

#[pymethods]
impl InPort {
    /// Bytes per item.
    #[getter]
    fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// Waits until `n` items are readable (the firing threshold) and returns
    /// every readable item in place, read-only; fewer, down to none, at the
    /// end of the stream. Refused while an earlier window's views are alive
    /// (the queue may have grown into new memory).
    fn peek(slf: &Bound<'_, Self>, py: Python<'_>, n: usize) -> PyResult<Window> {
        let port = slf.clone().unbind();
        open_window(slf, py, &slf.get().views, false, move || {
            with_open(&port.get().port, |p| {
                each!(In, p, q => {
                    let s = q.peek(n).map_err(crate::errors::graph)?;
                    Ok((s.as_ptr() as usize, std::mem::size_of_val(s)))
                })
            })
        })
    }

    /// Releases the first `m` items; refused while a window's views are alive.
    fn consume(&self, m: usize) -> PyResult<()> {
        self.views.hand_on("window")?;
        with_open(
            &self.port,
            |p| each!(In, p, q => q.consume(m).map_err(crate::errors::graph)),
        )
    }
}

/// A Python node's output port.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct OutPort {
    port: Mutex<Option<Out>>,
    /// The queue's memory once the port is closed, as for [`InPort`].
    held: Mutex<Option<dmaflow::ring::MemoryHold>>,
    itemsize: usize,
    views: Arc<Lease>,
}

impl OutPort {
    fn new(p: Out, itemsize: usize) -> Self {
        OutPort {
            port: Mutex::new(Some(p)),
            held: Mutex::new(None),
            itemsize,
            views: Arc::default(),
        }
    }

    fn close(&self) {
        let port = self
            .port
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // Windows lent so far make no new view; a view alive shows reserved
        // slots no reader will ever be shown (nothing is committed after
        // this), kept mapped for it.
        self.views.end();
        if let Some(p) = port {
            *self.held.lock().unwrap_or_else(PoisonError::into_inner) =
                each!(Out, &p, q => q.hold());
        }
    }
}

#[pymethods]
impl OutPort {
    /// Bytes per item.
    #[getter]
    fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// Waits until `n` slots are free and returns them in place, writable.
    /// Refused while an earlier reservation's views are alive.
    fn reserve(slf: &Bound<'_, Self>, py: Python<'_>, n: usize) -> PyResult<Window> {
        let port = slf.clone().unbind();
        open_window(slf, py, &slf.get().views, true, move || {
            with_open(&port.get().port, |p| {
                each!(Out, p, q => {
                    let s = q.reserve(n).map_err(crate::errors::graph)?;
                    Ok((s.as_mut_ptr() as usize, std::mem::size_of_val(s)))
                })
            })
        })
    }

    /// Publishes the first `k` reserved items; refused while the
    /// reservation's views are alive.
    fn commit(&self, k: usize) -> PyResult<()> {
        self.views.hand_on("reserved slots")?;
        with_open(
            &self.port,
            |p| each!(Out, p, q => q.commit(k).map_err(crate::errors::graph)),
        )
    }
}
