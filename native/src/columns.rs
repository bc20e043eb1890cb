//! Records straight into Arrow's column layout (the Spark data source's rows), with no Python object
//! per record: offsets and timestamps as int64 buffers, keys and values as Arrow binary columns
//! (validity bitmap, int32 offsets, data). The walk is `walk::walk`, so every check, message and
//! position is the Python walk's; a batch that fails adds nothing.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::walk::{walk, RecordSpans, Span};
use crate::{raise, Bytes};

/// One Arrow binary column being built.
#[derive(Default)]
struct BinaryColumn {
    validity: Vec<u8>,
    offsets: Vec<i32>,
    data: Vec<u8>,
    nulls: usize,
}

impl BinaryColumn {
    fn new() -> BinaryColumn {
        BinaryColumn { offsets: vec![0], ..Default::default() }
    }

    fn push(&mut self, row: usize, value: Option<&[u8]>) {
        if row % 8 == 0 {
            self.validity.push(0);
        }
        if let Some(bytes) = value {
            self.data.extend_from_slice(bytes);
            *self.validity.last_mut().expect("a byte per 8 rows") |= 1 << (row % 8);
        } else {
            self.nulls += 1;
        }
        self.offsets.push(self.data.len() as i32);
    }

    /// (null count, validity bitmap or None when nothing is null, offsets, data); the column is emptied.
    fn take<'py>(&mut self, py: Python<'py>) -> (usize, Option<Bound<'py, PyBytes>>, Bound<'py, PyBytes>,
                                                 Bound<'py, PyBytes>) {
        let validity = (self.nulls > 0).then(|| PyBytes::new(py, &self.validity));
        let taken = (self.nulls, validity, PyBytes::new(py, as_bytes(&self.offsets)), PyBytes::new(py, &self.data));
        *self = BinaryColumn::new();
        taken
    }
}

fn as_bytes<T: Copy>(values: &[T]) -> &[u8] {
    // Arrow's buffers are little-endian, as is every machine this builds for (checked below).
    unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values)) }
}

#[cfg(not(target_endian = "little"))]
compile_error!("Arrow buffers are built in native byte order, which must be little-endian");

/// Rows in Arrow's layout, added a batch's records at a time and taken as buffers.
#[pyclass(module = "stratalog_native")]
pub struct ColumnBuilder {
    offsets: Vec<i64>,
    timestamps: Vec<i64>,
    timestamp_types: Vec<i32>,
    keys: Option<BinaryColumn>,
    values: Option<BinaryColumn>,
    spans: Vec<RecordSpans>,
    picked: Vec<(usize, i64, i64)>, // (record, offset, timestamp) of the rows one add makes
}

#[pymethods]
impl ColumnBuilder {
    /// `keys`, `values`: whether those columns are wanted (an unwanted one is never copied).
    #[new]
    fn new(keys: bool, values: bool) -> ColumnBuilder {
        ColumnBuilder { offsets: Vec::new(), timestamps: Vec::new(), timestamp_types: Vec::new(),
                        keys: keys.then(BinaryColumn::new), values: values.then(BinaryColumn::new),
                        spans: Vec::new(), picked: Vec::new() }
    }

    fn __len__(&self) -> usize {
        self.offsets.len()
    }

    /// Bytes held by the key and value columns' data.
    #[getter]
    fn data_bytes(&self) -> usize {
        self.keys.as_ref().map_or(0, |c| c.data.len()) + self.values.as_ref().map_or(0, |c| c.data.len())
    }

    /// Walk the `count` records of `data[start:end]` (a v2 batch's records, already checked and
    /// decompressed) and add those whose offset lies in [`first`, `stop`), or all of them when these
    /// are None (a batch wholly inside the range, by its header, as the Python walk trusts it). `append_time`: the batch's
    /// max timestamp when it is LogAppendTime (every record then has it). Returns the rows added;
    /// raises RecordError(position, reason) or IndexError for damage, as the Python walk does, and
    /// then adds nothing.
    #[pyo3(signature = (data, start, end, count, base_offset, base_timestamp, append_time, timestamp_type, first,
                        stop))]
    #[allow(clippy::too_many_arguments)]
    fn add(&mut self, data: &Bound<'_, PyAny>, start: usize, end: usize, count: i64, base_offset: i64,
           base_timestamp: i64, append_time: Option<i64>, timestamp_type: i32, first: Option<i64>,
           stop: Option<i64>)
           -> PyResult<usize> {
        let bytes = Bytes::of(data)?;
        let slice = bytes.region(start, end)?;
        walk(slice, start, end, count, &mut self.spans).map_err(raise)?;
        let added_data: usize = self.spans.iter()
            .map(|s| self.keys.as_ref().map_or(0, |_| span_len(s.key)) + self.values.as_ref().map_or(0, |_| span_len(s.value)))
            .sum();
        if self.data_bytes() + added_data > i32::MAX as usize {
            return Err(PyValueError::new_err(format!(
                "a column would pass Arrow's 2 GiB binary limit: take the rows first ({} bytes held)",
                self.data_bytes())));
        }
        // Which records are rows, their offsets and timestamps, all known (or refused) before the
        // columns change: a batch that fails adds nothing.
        let (first, stop) = (first.map_or(i128::MIN, i128::from), stop.map_or(i128::MAX, i128::from));
        let mut picked = std::mem::take(&mut self.picked);
        picked.clear();
        for (i, spans) in self.spans.iter().enumerate() {
            // Exact first, as Python's ints: a record outside the range is dropped before its offset
            // has to fit in 64 bits.
            let exact = base_offset as i128 + spans.offset_delta as i128;
            if exact < first || exact >= stop {
                continue;
            }
            let Ok(offset) = i64::try_from(exact) else {
                self.picked = picked;
                return Err(overflow("offset"));
            };
            let timestamp = match append_time {
                Some(time) => time,
                None => match base_timestamp.checked_add(spans.timestamp_delta) {
                    Some(timestamp) => timestamp,
                    None => {
                        self.picked = picked;
                        return Err(overflow("timestamp"));
                    }
                },
            };
            picked.push((i, offset, timestamp));
        }
        for &(i, offset, timestamp) in &picked {
            let spans = &self.spans[i];
            let row = self.offsets.len();
            self.offsets.push(offset);
            self.timestamps.push(timestamp);
            self.timestamp_types.push(timestamp_type);
            if let Some(column) = self.keys.as_mut() {
                column.push(row, spans.key.bytes(slice));
            }
            if let Some(column) = self.values.as_mut() {
                column.push(row, spans.value.bytes(slice));
            }
        }
        let added = picked.len();
        self.picked = picked;
        Ok(added)
    }

    /// (rows, offsets int64, timestamps int64 in ms, timestamp types int32, keys, values), each
    /// binary column None if not wanted, else (null count, validity or None, int32 offsets, data);
    /// the builder is emptied.
    #[allow(clippy::type_complexity)]
    fn take<'py>(&mut self, py: Python<'py>)
                 -> (usize, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>,
                     Option<(usize, Option<Bound<'py, PyBytes>>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>,
                     Option<(usize, Option<Bound<'py, PyBytes>>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>) {
        let rows = self.offsets.len();
        let taken = (rows, PyBytes::new(py, as_bytes(&self.offsets)), PyBytes::new(py, as_bytes(&self.timestamps)),
                     PyBytes::new(py, as_bytes(&self.timestamp_types)),
                     self.keys.as_mut().map(|c| c.take(py)), self.values.as_mut().map(|c| c.take(py)));
        self.offsets.clear();
        self.timestamps.clear();
        self.timestamp_types.clear();
        taken
    }
}

fn overflow(what: &str) -> PyErr {
    PyValueError::new_err(format!("a record's {what} does not fit in 64 bits"))
}

fn span_len(span: Span) -> usize {
    span.len.max(0) as usize
}
