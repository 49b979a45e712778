//! `bloomgate.Gate`: the membership gate of `bloomgate-gate` (per-scope filters in front of an
//! exact store) for Python services.
//!
//! The Rust gate does the work; this file converts scopes and items to their 64-bit ids
//! (`int` as is, `str`/bytes through [`bloomgate_gate::item_id`]), releases the GIL around every
//! call into the gate, maps its errors, and refuses to be used from a process other than the one
//! that created it: the gate's threads and connections do not survive `fork`.

use std::sync::RwLock;

use bloomgate_gate::{
    item_id, Durability, FilterUrl, Gate as RustGate, GateConfig, LifecycleConfig, Persistence,
    Policy, StoreUrl,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyString};

create_exception!(
    bloomgate,
    GateError,
    PyException,
    "The gate's store or filters failed, or the gate is closed or was created in another process."
);

const DAY_MS: f64 = 86_400_000.0;

/// Generations of each scope's filter: the generation window is a third of the retention.
const GENERATIONS: usize = 4;

/// Maps a gate error to a Python exception carrying the gate's message.
fn gate_error(e: bloomgate_gate::Error) -> PyErr {
    match e {
        bloomgate_gate::Error::InvalidConfig(_) => PyValueError::new_err(e.to_string()),
        e => GateError::new_err(error_chain(&e)),
    }
}

/// `err` and its causes, `: `-separated (an `Open` error names the action, its cause the why).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The 64-bit id of a scope or item: an `int` in [0, 2**64) as is (or any integer type with
/// `__index__`); `str` (as UTF-8) and bytes-like through `item_id` (their bytes as the filters'
/// `keys::key` takes them).
fn id_of(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if value.is_instance_of::<PyInt>() {
        return value.extract::<u64>().map_err(|_| {
            PyValueError::new_err(format!(
                "a scope or item given as an int must be in [0, 2**64), got {value}"
            ))
        });
    }
    match crate::keys::key(value) {
        Ok(key) => Ok(item_id(key.bytes())),
        // An integer of another type (a NumPy integer): its `__index__`, as `operator.index`.
        Err(_) if value.hasattr("__index__")? => id_of(&value.call_method0("__index__")?),
        Err(err) => Err(err),
    }
}

/// The ids of every scope or item of an iterable.
fn ids_of(values: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    if values.is_instance_of::<PyString>() || values.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "expected an iterable of items, not a single str or bytes",
        ));
    }
    let mut ids = Vec::with_capacity(values.len().unwrap_or(0));
    for value in values.try_iter()? {
        ids.push(id_of(&value?)?);
    }
    Ok(ids)
}

/// A membership gate: per-scope (per-user) time-windowed Bloom filters in front of an exact
/// store, answering "has this scope already been shown these items?".
///
/// `Gate(store, policy="verify", filters="local", window_days=30.0, memory_kib=262144,
/// filter_dir=None, *, fpr=0.01, key_prefix="bloomgate:gate:")`. Scopes and items are `int`
/// (in [0, 2**64), used as is), or `str`/bytes (a canonical decimal is that number, anything
/// else is hashed with XXH3-64: the ids `bloomgate serve`'s `GATE.*` and the CLI use too).
#[pyclass(module = "bloomgate", frozen)]
pub struct Gate {
    /// None once closed. Calls share the lock; `close` takes it exclusively.
    inner: RwLock<Option<RustGate>>,
    /// The process the gate (and its threads) belong to.
    pid: u32,
    policy: Policy,
    /// The store's URL without its password.
    store: String,
}

impl Gate {
    /// Runs `call` on the open gate with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&RustGate) -> bloomgate_gate::Result<T> + Send,
    ) -> PyResult<T> {
        self.check_process()?;
        let answer = py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
            guard.as_ref().map(call)
        });
        match answer {
            Some(result) => result.map_err(gate_error),
            None => Err(GateError::new_err("the gate is closed")),
        }
    }

    /// Runs `call` on the open gate with `scope` and `items` as ids and the time `now_ms`
    /// (default now), the GIL released: what `unseen` and `record` share.
    fn with_items<T: Send>(
        &self,
        py: Python<'_>,
        (scope, items, now_ms): (&Bound<'_, PyAny>, &Bound<'_, PyAny>, Option<u64>),
        call: impl FnOnce(&RustGate, u64, &[u64], u64) -> bloomgate_gate::Result<T> + Send,
    ) -> PyResult<T> {
        let scope = id_of(scope)?;
        let items = ids_of(items)?;
        let now = crate::now_ms(now_ms);
        self.with(py, |gate| call(gate, scope, &items, now))
    }

    fn check_process(&self) -> PyResult<()> {
        let now = std::process::id();
        if now == self.pid {
            return Ok(());
        }
        Err(GateError::new_err(format!(
            "this Gate was created in process {} and cannot be used in process {now} (a forked \
             child): its background threads and connections do not survive fork; create a new \
             Gate in the child",
            self.pid
        )))
    }
}

#[pymethods]
impl Gate {
    #[new]
    #[pyo3(signature = (
        store,
        policy = "verify",
        filters = "local",
        window_days = 30.0,
        memory_kib = 262_144,
        filter_dir = None,
        *,
        fpr = 0.01,
        key_prefix = "bloomgate:gate:",
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: &str,
        policy: &str,
        filters: &str,
        window_days: f64,
        memory_kib: u64,
        filter_dir: Option<std::path::PathBuf>,
        fpr: f64,
        key_prefix: &str,
    ) -> PyResult<Self> {
        let store_url: StoreUrl = store
            .parse()
            .map_err(|e: bloomgate_gate::UrlError| PyValueError::new_err(e.to_string()))?;
        let filter_url: FilterUrl = filters
            .parse()
            .map_err(|e: bloomgate_gate::UrlError| PyValueError::new_err(e.to_string()))?;
        let policy: Policy = policy.parse().map_err(gate_error)?;
        let retention_ms = window_days * DAY_MS;
        if !(retention_ms >= 1.0 && retention_ms < u64::MAX as f64) {
            return Err(PyValueError::new_err(format!(
                "window_days must be positive (at least a millisecond), got {window_days}"
            )));
        }
        if filter_dir.is_some() && filter_url != FilterUrl::Local {
            return Err(PyValueError::new_err(
                "filter_dir persists local filters; remote filters live on their server",
            ));
        }
        let lifecycle = LifecycleConfig {
            fpr,
            fpr_budget: (2.0 * fpr).min(0.5).max(fpr),
            memory_budget_bytes: memory_kib.saturating_mul(1024),
            ..LifecycleConfig::new(retention_ms as u64, GENERATIONS)
        };
        let config = GateConfig {
            persistence: filter_dir.map(Persistence::new),
            ..GateConfig::new(
                policy,
                filter_url.mode(format!("{key_prefix}bf:")),
                lifecycle,
            )
        };
        let store_prefix = format!("{key_prefix}seen:");
        let gate = py
            .detach(|| {
                let store = store_url.open(&store_prefix, false)?;
                RustGate::new(store, config)
            })
            .map_err(gate_error)?;
        Ok(Gate {
            inner: RwLock::new(Some(gate)),
            pid: std::process::id(),
            policy,
            store: store_url.redacted(),
        })
    }

    /// For each candidate, True if `scope` has not been shown it within the window (may show
    /// it), False if it has. A store failure raises GateError, never reads as "not seen".
    #[pyo3(signature = (scope, candidates, now_ms = None))]
    fn unseen(
        &self,
        py: Python<'_>,
        scope: &Bound<'_, PyAny>,
        candidates: &Bound<'_, PyAny>,
        now_ms: Option<u64>,
    ) -> PyResult<Vec<bool>> {
        self.with_items(py, (scope, candidates, now_ms), RustGate::unseen)
    }

    /// Records that `scope` was shown `shown` (at `now_ms`, default now) and returns how many
    /// items were taken. The items are never answered unseen again within the window by this
    /// gate. By default the store write is group-committed in the background (`flush` waits for
    /// it), and a crash of the process before that commit loses the items (after a restart they
    /// may be shown again); with `durable=True` the call returns once the group commit holding
    /// them succeeded (sharing it with concurrent callers), and raises GateError if it fails —
    /// the items stay queued and are committed when the store answers, and recording them again
    /// is safe. While the store is down the recorder's bounded queue keeps what it can: fewer
    /// taken than given means the rest were not recorded.
    #[pyo3(signature = (scope, shown, now_ms = None, *, durable = false))]
    fn record(
        &self,
        py: Python<'_>,
        scope: &Bound<'_, PyAny>,
        shown: &Bound<'_, PyAny>,
        now_ms: Option<u64>,
        durable: bool,
    ) -> PyResult<usize> {
        let durability = if durable {
            Durability::Commit
        } else {
            Durability::Queued
        };
        self.with_items(py, (scope, shown, now_ms), |gate, scope, items, now| {
            gate.record_with(scope, items, now, durability)
        })
    }

    /// Drops the store's rows last seen more than the window before `now_ms` (default now);
    /// returns how many.
    #[pyo3(signature = (now_ms = None))]
    fn expire(&self, py: Python<'_>, now_ms: Option<u64>) -> PyResult<u64> {
        let now = crate::now_ms(now_ms);
        self.with(py, |gate| gate.expire(now))
    }

    /// Waits until every recorded item is committed to the store and every queued filter build
    /// is installed.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |gate| gate.flush())
    }

    /// The gate's counters as a dict: policy, store, requests, candidates, store_lookups
    /// (candidates sent to the exact path: cache, then store), filter_negatives (candidates the
    /// filter answered without it), and more.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let counters = self.with(py, |gate| Ok(gate.stats()))?;
        let dict = PyDict::new(py);
        dict.set_item("policy", self.policy.name())?;
        dict.set_item("store", &self.store)?;
        for (name, value) in counters {
            dict.set_item(name, value)?;
        }
        Ok(dict)
    }

    /// The gate's metrics in Prometheus text exposition format.
    fn metrics(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |gate| Ok(gate.render_metrics()))
    }

    /// Commits every recorded item, stops the gate's threads and writes the local filters'
    /// snapshot (with `filter_dir`). Idempotent; every later call raises GateError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.check_process()?;
        let gate = py.detach(|| self.inner.write().unwrap_or_else(|e| e.into_inner()).take());
        match gate {
            Some(gate) => py.detach(|| gate.close()).map_err(gate_error),
            None => Ok(()),
        }
    }

    /// True once `close` has run.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "Gate({:?}, policy={:?}{})",
            self.store,
            self.policy.name(),
            if self.closed() { ", closed" } else { "" }
        )
    }
}

impl Drop for Gate {
    /// In the process that created it, dropping closes the gate (commits and stops its
    /// threads). In a forked child the threads do not exist: joining them would hang, so the
    /// child's copy is leaked instead.
    fn drop(&mut self) {
        let gate = self
            .inner
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if std::process::id() != self.pid {
            std::mem::forget(gate);
        }
    }
}
