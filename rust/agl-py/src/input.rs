//! Batch inputs borrowed from Python without copying: a C-contiguous
//! float32 numpy array (`[batch, samples]` mono, `[batch, 2, samples]`
//! stereo), a list of per-item arrays (ragged), or any object exporting the
//! Arrow C data interface (`__arrow_c_array__`: pyarrow, polars, nanoarrow)
//! holding `list<float32>` (mono) or `list<list<float32>>` (stereo items of
//! two channels).

use std::ffi::CStr;

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, ArrayRef, Float32Array, GenericListArray, OffsetSizeTrait};
use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyList, PyTuple};

use crate::errors::{param_err, shape_err};

/// Owned Arrow `list<float32>` data: the flat values and item ranges.
pub struct ArrowMono {
    _keep: ArrayRef,
    values: Float32Array,
    ranges: Vec<(usize, usize)>,
}

/// Import an object exporting `__arrow_c_array__`.
fn import_arrow(obj: &Bound<'_, PyAny>) -> PyResult<ArrayRef> {
    let pair = obj.call_method0("__arrow_c_array__")?;
    let pair = pair.cast::<PyTuple>()?;
    if pair.len() != 2 {
        return Err(param_err(
            "__arrow_c_array__ must return (schema, array) capsules",
        ));
    }
    let schema_cap = pair.get_item(0)?;
    let schema_cap = schema_cap.cast::<PyCapsule>()?;
    let array_cap = pair.get_item(1)?;
    let array_cap = array_cap.cast::<PyCapsule>()?;
    const SCHEMA: &CStr = c"arrow_schema";
    const ARRAY: &CStr = c"arrow_array";
    let schema_ptr = schema_cap.pointer_checked(Some(SCHEMA))?;
    let array_ptr = array_cap.pointer_checked(Some(ARRAY))?;
    // SAFETY: the capsules follow the Arrow PyCapsule protocol: they hold
    // valid FFI structs. The array is moved out (its release callback is
    // then ours and the capsule's destructor sees it released); the schema
    // is only borrowed while we import.
    let data = unsafe {
        let array = FFI_ArrowArray::from_raw(array_ptr.as_ptr() as *mut FFI_ArrowArray);
        let schema = &*(schema_ptr.as_ptr() as *const FFI_ArrowSchema);
        from_ffi(array, schema)
    }
    .map_err(|e| param_err(format!("cannot import Arrow array: {e}")))?;
    Ok(arrow_array::make_array(data))
}

fn list_parts<O: OffsetSizeTrait>(
    list: &GenericListArray<O>,
) -> PyResult<(Vec<(usize, usize)>, ArrayRef)> {
    if list.null_count() > 0 {
        return Err(param_err(format!(
            "Arrow input has {} null item(s); drop or fill them first",
            list.null_count()
        )));
    }
    let offs = list.value_offsets();
    let ranges = offs
        .windows(2)
        .map(|w| (w[0].as_usize(), w[1].as_usize()))
        .collect();
    Ok((ranges, list.values().clone()))
}

fn as_list(array: &ArrayRef) -> PyResult<(Vec<(usize, usize)>, ArrayRef)> {
    if let Some(l) = array.as_any().downcast_ref::<GenericListArray<i32>>() {
        return list_parts(l);
    }
    if let Some(l) = array.as_any().downcast_ref::<GenericListArray<i64>>() {
        return list_parts(l);
    }
    Err(param_err(format!(
        "Arrow input must be a list array, got {}",
        array.data_type()
    )))
}

fn as_f32(array: &ArrayRef) -> PyResult<Float32Array> {
    let v = array
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| {
            param_err(format!(
                "Arrow list values must be float32, got {}",
                array.data_type()
            ))
        })?;
    if v.null_count() > 0 {
        return Err(param_err("Arrow float32 values contain nulls"));
    }
    Ok(v.clone())
}

impl ArrowMono {
    fn import(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let array = import_arrow(obj)?;
        let (ranges, values) = as_list(&array)?;
        let values = as_f32(&values)?;
        Ok(ArrowMono {
            _keep: array,
            values,
            ranges,
        })
    }
    fn slices(&self) -> Vec<&[f32]> {
        let v = self.values.values();
        self.ranges.iter().map(|&(a, b)| &v[a..b]).collect()
    }
}

/// A batch of mono signals.
pub enum MonoBatch<'py> {
    Array(PyReadonlyArray2<'py, f32>),
    List(Vec<PyReadonlyArray1<'py, f32>>),
    Arrow(ArrowMono),
}

fn contiguous_1d<'py>(
    a: PyReadonlyArray1<'py, f32>,
    i: usize,
) -> PyResult<PyReadonlyArray1<'py, f32>> {
    if !a.is_c_contiguous() {
        return Err(param_err(format!("item {i} is not C-contiguous")));
    }
    Ok(a)
}

impl<'py> MonoBatch<'py> {
    pub fn extract(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if obj.hasattr("__arrow_c_array__")? {
            return Ok(MonoBatch::Arrow(ArrowMono::import(obj)?));
        }
        if let Ok(list) = obj.cast::<PyList>() {
            let items = list
                .iter()
                .enumerate()
                .map(|(i, x)| contiguous_1d(x.extract::<PyReadonlyArray1<f32>>()?, i))
                .collect::<PyResult<Vec<_>>>()?;
            return Ok(MonoBatch::List(items));
        }
        let a: PyReadonlyArray2<f32> = obj
            .extract()
            .map_err(|_| shape_err("mono batch must be a 2-D float32 array, a list of 1-D float32 arrays or an Arrow list<float32>"))?;
        if !a.is_c_contiguous() {
            return Err(param_err("mono batch array is not C-contiguous"));
        }
        Ok(MonoBatch::Array(a))
    }

    pub fn slices(&self) -> PyResult<Vec<&[f32]>> {
        match self {
            MonoBatch::Array(a) => {
                let shape = a.shape();
                let (b, n) = (shape[0], shape[1]);
                let flat = a.as_slice().map_err(|e| param_err(e.to_string()))?;
                Ok((0..b).map(|i| &flat[i * n..(i + 1) * n]).collect())
            }
            MonoBatch::List(items) => items
                .iter()
                .map(|a| a.as_slice().map_err(|e| param_err(e.to_string())))
                .collect(),
            MonoBatch::Arrow(a) => Ok(a.slices()),
        }
    }
}

/// A batch of stereo signals.
pub enum StereoBatch<'py> {
    Array(PyReadonlyArray3<'py, f32>),
    List(Vec<PyReadonlyArray2<'py, f32>>),
    Arrow {
        _keep: ArrayRef,
        values: Float32Array,
        items: Vec<[(usize, usize); 2]>,
    },
}

fn stereo_err(what: &str) -> PyErr {
    shape_err(format!(
        "stereo input required (2 channels: left, right), got {what}"
    ))
}

impl<'py> StereoBatch<'py> {
    pub fn extract(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if obj.hasattr("__arrow_c_array__")? {
            let array = import_arrow(obj)?;
            let (outer, chans) = as_list(&array)?;
            let (inner, values) = as_list(&chans)?;
            let values = as_f32(&values)?;
            let mut items = Vec::with_capacity(outer.len());
            for (i, &(a, b)) in outer.iter().enumerate() {
                if b - a != 2 {
                    return Err(stereo_err(&format!(
                        "{} channel(s) in Arrow item {i}",
                        b - a
                    )));
                }
                items.push([inner[a], inner[a + 1]]);
            }
            return Ok(StereoBatch::Arrow {
                _keep: array,
                values,
                items,
            });
        }
        if let Ok(list) = obj.cast::<PyList>() {
            let mut items = Vec::with_capacity(list.len());
            for (i, x) in list.iter().enumerate() {
                let a: PyReadonlyArray2<f32> = x.extract().map_err(|_| {
                    stereo_err(&format!("item {i} that is not a 2-D float32 array"))
                })?;
                if a.shape()[0] != 2 {
                    return Err(stereo_err(&format!(
                        "{} channel(s) in item {i}",
                        a.shape()[0]
                    )));
                }
                if !a.is_c_contiguous() {
                    return Err(param_err(format!("item {i} is not C-contiguous")));
                }
                items.push(a);
            }
            return Ok(StereoBatch::List(items));
        }
        let a: PyReadonlyArray3<f32> = obj
            .extract()
            .map_err(|_| stereo_err("an array that is not [batch, 2, samples] float32"))?;
        if a.shape()[1] != 2 {
            return Err(stereo_err(&format!("{} channel(s)", a.shape()[1])));
        }
        if !a.is_c_contiguous() {
            return Err(param_err("stereo batch array is not C-contiguous"));
        }
        Ok(StereoBatch::Array(a))
    }

    pub fn slices(&self) -> PyResult<Vec<(&[f32], &[f32])>> {
        match self {
            StereoBatch::Array(a) => {
                let shape = a.shape();
                let (b, n) = (shape[0], shape[2]);
                let flat = a.as_slice().map_err(|e| param_err(e.to_string()))?;
                Ok((0..b)
                    .map(|i| {
                        let base = i * 2 * n;
                        (&flat[base..base + n], &flat[base + n..base + 2 * n])
                    })
                    .collect())
            }
            StereoBatch::List(items) => items
                .iter()
                .map(|a| {
                    let n = a.shape()[1];
                    let flat = a.as_slice().map_err(|e| param_err(e.to_string()))?;
                    Ok((&flat[..n], &flat[n..2 * n]))
                })
                .collect(),
            StereoBatch::Arrow { values, items, .. } => {
                let v = values.values();
                Ok(items
                    .iter()
                    .map(|[(a0, b0), (a1, b1)]| (&v[*a0..*b0], &v[*a1..*b1]))
                    .collect())
            }
        }
    }
}

/// Total samples in a batch (decides whether the gateway watches Ctrl-C).
pub fn total_samples<T>(items: &[T], len: impl Fn(&T) -> usize) -> usize {
    items.iter().map(len).sum()
}
