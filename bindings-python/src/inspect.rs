//! `Client.inspect` for Python: core's [`Inspection`] as a plain `dict` (durations in seconds,
//! deadlines in epoch seconds), so scripts and the `crosslock` command line can print or
//! serialize it as is.

use crosslock::Inspection;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// An inspection on its way to Python.
pub(crate) struct PyInspection(pub(crate) Inspection);

/// The process behind a holder, as a dict (`None` when not found).
fn process<'py>(
    py: Python<'py>,
    p: &Option<crosslock::ProcessInfo>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(p) = p else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("language", &p.language)?;
    d.set_item("pid", p.pid)?;
    d.set_item("host", &p.host)?;
    d.set_item("address", &p.address)?;
    d.set_item("name", &p.name)?;
    Ok(Some(d))
}

fn secs(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

impl<'py> IntoPyObject<'py> for PyInspection {
    type Target = PyDict;
    type Output = Bound<'py, PyDict>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = self.0;
        let out = PyDict::new(py);
        out.set_item("name", &i.name)?;
        out.set_item("kind", i.kind.as_str())?;
        out.set_item("ttl", i.ttl.map(|d| d.as_secs_f64()))?;
        let holders = PyList::empty(py);
        for h in &i.holders {
            let d = PyDict::new(py);
            d.set_item("holder", &h.holder)?;
            d.set_item("client_id", &h.client_id)?;
            d.set_item("holds", h.holds)?;
            d.set_item("write", h.write)?;
            let leases: Vec<f64> = h.read_leases.iter().map(|l| l.as_secs_f64()).collect();
            d.set_item("read_leases", leases)?;
            d.set_item("process", process(py, &h.process)?)?;
            holders.append(d)?;
        }
        out.set_item("holders", holders)?;
        out.set_item("mode", i.mode.as_deref())?;
        let queue = PyList::empty(py);
        for w in &i.queue {
            let d = PyDict::new(py);
            d.set_item("holder", &w.holder)?;
            d.set_item("deadline", w.deadline_ms.map(secs))?;
            d.set_item("process", process(py, &w.process)?)?;
            queue.append(d)?;
        }
        out.set_item("queue", queue)?;
        out.set_item("token", i.token)?;
        out.set_item("count", i.count)?;
        let permits = PyList::empty(py);
        for p in &i.permits {
            let d = PyDict::new(py);
            d.set_item("id", &p.id)?;
            d.set_item("expires", p.expires_ms.map(secs))?;
            permits.append(d)?;
        }
        out.set_item("permits", permits)?;
        Ok(out)
    }
}
