//! The producer side of the Arrow C data interface (ArrowSchema, ArrowArray) and C
//! stream interface (ArrowArrayStream), over arrow 59's arrays.
//!
//! arrow 59 has these in its `ffi` feature, which the workspace's build of arrow leaves
//! off; turning it on would rebuild arrow and everything above it (all of DataFusion)
//! for every build that includes this crate, and a second time for the builds that do
//! not. So the export is written here: the structs are the C ones of
//! <https://arrow.apache.org/docs/format/CDataInterface.html>, the layout rules those of
//! `arrow_data::ffi` and `arrow_schema::ffi` (Apache-2.0), reduced to exporting.
//!
//! Every buffer is handed out by pointer: the consumer reads the memory DataFusion
//! produced, kept alive by the private data until the consumer calls `release`.

use std::ffi::{c_char, c_int, c_void, CString};

use datafusion::arrow::array::{layout, Array, ArrayData, StructArray};
use datafusion::arrow::buffer::{Buffer, MutableBuffer, NullBuffer, ScalarBuffer};
use datafusion::arrow::datatypes::{DataType, Field, IntervalUnit, Schema, SchemaRef, TimeUnit, UnionMode};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatchReader;
use datafusion::arrow::util::bit_mask::set_bits;

const FLAG_DICTIONARY_ORDERED: i64 = 1;
const FLAG_NULLABLE: i64 = 2;
const FLAG_MAP_KEYS_SORTED: i64 = 4;

/// `struct ArrowSchema`.
#[repr(C)]
pub struct FfiSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut FfiSchema,
    dictionary: *mut FfiSchema,
    release: Option<unsafe extern "C" fn(*mut FfiSchema)>,
    private_data: *mut c_void,
}

// SAFETY: an exported schema owns everything it points to (its private data), and the
// C interface lets any thread release it.
unsafe impl Send for FfiSchema {}

struct SchemaPrivate {
    format: CString,
    name: Option<CString>,
    metadata: Option<Vec<u8>>,
    children: Box<[*mut FfiSchema]>,
    dictionary: *mut FfiSchema,
}

unsafe extern "C" fn release_schema(schema: *mut FfiSchema) {
    if schema.is_null() {
        return;
    }
    // SAFETY: called by the consumer on a schema this module exported, once.
    let schema = unsafe { &mut *schema };
    if !schema.private_data.is_null() {
        // SAFETY: private_data is the Box made in `FfiSchema::new`; the children and
        // dictionary are Boxes made there too (dropping one releases it unless moved).
        let private = unsafe { Box::from_raw(schema.private_data as *mut SchemaPrivate) };
        for &child in private.children.iter() {
            drop(unsafe { Box::from_raw(child) });
        }
        if !private.dictionary.is_null() {
            drop(unsafe { Box::from_raw(private.dictionary) });
        }
    }
    schema.private_data = std::ptr::null_mut();
    schema.release = None;
}

impl Drop for FfiSchema {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: a schema not yet released (or moved out of) is released once here.
            unsafe { release(self) }
        }
    }
}

fn cstring(text: &str, what: &str) -> Result<CString, ArrowError> {
    CString::new(text).map_err(|_| ArrowError::CDataInterface(format!("a NUL byte in the {what} {text:?}")))
}

impl FfiSchema {
    fn new(
        format: &str,
        name: Option<&str>,
        flags: i64,
        metadata: Option<Vec<u8>>,
        children: Vec<FfiSchema>,
        dictionary: Option<FfiSchema>,
    ) -> Result<FfiSchema, ArrowError> {
        let mut private = Box::new(SchemaPrivate {
            format: cstring(format, "format")?,
            name: name.map(|n| cstring(n, "name")).transpose()?,
            metadata,
            children: children.into_iter().map(|c| Box::into_raw(Box::new(c))).collect(),
            dictionary: dictionary.map_or(std::ptr::null_mut(), |d| Box::into_raw(Box::new(d))),
        });
        Ok(FfiSchema {
            format: private.format.as_ptr(),
            name: private.name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            metadata: private.metadata.as_ref().map_or(std::ptr::null(), |m| m.as_ptr() as *const c_char),
            flags,
            n_children: private.children.len() as i64,
            children: private.children.as_mut_ptr(),
            dictionary: private.dictionary,
            release: Some(release_schema),
            private_data: Box::into_raw(private) as *mut c_void,
        })
    }

    /// A record batch's schema: a struct of its fields, with the schema's metadata.
    pub fn of_schema(schema: &Schema) -> Result<FfiSchema, ArrowError> {
        let children = schema.fields().iter().map(|f| Self::of_field(f)).collect::<Result<Vec<_>, _>>()?;
        FfiSchema::new("+s", None, 0, encode_metadata(schema.metadata().iter())?, children, None)
    }

    fn of_field(field: &Field) -> Result<FfiSchema, ArrowError> {
        let mut flags = if field.is_nullable() { FLAG_NULLABLE } else { 0 };
        if field.dict_is_ordered() == Some(true) {
            flags |= FLAG_DICTIONARY_ORDERED;
        }
        Self::of_type(field.data_type(), Some(field.name()), flags, encode_metadata(field.metadata().iter())?)
    }

    fn of_type(
        dtype: &DataType,
        name: Option<&str>,
        mut flags: i64,
        metadata: Option<Vec<u8>>,
    ) -> Result<Self, ArrowError> {
        let children = match dtype {
            DataType::List(child)
            | DataType::LargeList(child)
            | DataType::ListView(child)
            | DataType::LargeListView(child)
            | DataType::FixedSizeList(child, _)
            | DataType::Map(child, _) => vec![Self::of_field(child)?],
            DataType::Struct(fields) => fields.iter().map(|f| Self::of_field(f)).collect::<Result<_, _>>()?,
            DataType::Union(fields, _) => fields.iter().map(|(_, f)| Self::of_field(f)).collect::<Result<_, _>>()?,
            DataType::RunEndEncoded(run_ends, values) => vec![Self::of_field(run_ends)?, Self::of_field(values)?],
            _ => vec![],
        };
        let dictionary = match dtype {
            DataType::Dictionary(_, values) => Some(Self::of_type(values, None, 0, None)?),
            _ => None,
        };
        if matches!(dtype, DataType::Map(_, true)) {
            flags |= FLAG_MAP_KEYS_SORTED;
        }
        FfiSchema::new(&format_string(dtype)?, name, flags, metadata, children, dictionary)
    }
}

/// Metadata as the C interface encodes it: int32 count, then per entry int32 length and
/// bytes of the key, then of the value (native byte order).
fn encode_metadata<'a>(
    entries: impl ExactSizeIterator<Item = (&'a String, &'a String)>,
) -> Result<Option<Vec<u8>>, ArrowError> {
    if entries.len() == 0 {
        return Ok(None);
    }
    let too_big = || ArrowError::CDataInterface("metadata too large for the C data interface".into());
    let mut out = Vec::new();
    out.extend(i32::try_from(entries.len()).map_err(|_| too_big())?.to_ne_bytes());
    for (key, value) in entries {
        for text in [key, value] {
            out.extend(i32::try_from(text.len()).map_err(|_| too_big())?.to_ne_bytes());
            out.extend_from_slice(text.as_bytes());
        }
    }
    Ok(Some(out))
}

/// The format string of a type (the C data interface's table).
fn format_string(dtype: &DataType) -> Result<String, ArrowError> {
    let unit = |u: &TimeUnit| match u {
        TimeUnit::Second => 's',
        TimeUnit::Millisecond => 'm',
        TimeUnit::Microsecond => 'u',
        TimeUnit::Nanosecond => 'n',
    };
    Ok(match dtype {
        DataType::Null => "n".into(),
        DataType::Boolean => "b".into(),
        DataType::Int8 => "c".into(),
        DataType::UInt8 => "C".into(),
        DataType::Int16 => "s".into(),
        DataType::UInt16 => "S".into(),
        DataType::Int32 => "i".into(),
        DataType::UInt32 => "I".into(),
        DataType::Int64 => "l".into(),
        DataType::UInt64 => "L".into(),
        DataType::Float16 => "e".into(),
        DataType::Float32 => "f".into(),
        DataType::Float64 => "g".into(),
        DataType::Binary => "z".into(),
        DataType::LargeBinary => "Z".into(),
        DataType::BinaryView => "vz".into(),
        DataType::Utf8 => "u".into(),
        DataType::LargeUtf8 => "U".into(),
        DataType::Utf8View => "vu".into(),
        DataType::FixedSizeBinary(n) => format!("w:{n}"),
        DataType::FixedSizeList(_, n) => format!("+w:{n}"),
        DataType::Decimal32(p, s) => format!("d:{p},{s},32"),
        DataType::Decimal64(p, s) => format!("d:{p},{s},64"),
        DataType::Decimal128(p, s) => format!("d:{p},{s}"),
        DataType::Decimal256(p, s) => format!("d:{p},{s},256"),
        DataType::Date32 => "tdD".into(),
        DataType::Date64 => "tdm".into(),
        DataType::Time32(u @ (TimeUnit::Second | TimeUnit::Millisecond)) => format!("tt{}", unit(u)),
        DataType::Time64(u @ (TimeUnit::Microsecond | TimeUnit::Nanosecond)) => format!("tt{}", unit(u)),
        DataType::Timestamp(u, tz) => format!("ts{}:{}", unit(u), tz.as_deref().unwrap_or("")),
        DataType::Duration(u) => format!("tD{}", unit(u)),
        DataType::Interval(IntervalUnit::YearMonth) => "tiM".into(),
        DataType::Interval(IntervalUnit::DayTime) => "tiD".into(),
        DataType::Interval(IntervalUnit::MonthDayNano) => "tin".into(),
        DataType::List(_) => "+l".into(),
        DataType::LargeList(_) => "+L".into(),
        DataType::ListView(_) => "+vl".into(),
        DataType::LargeListView(_) => "+vL".into(),
        DataType::Struct(_) => "+s".into(),
        DataType::Map(_, _) => "+m".into(),
        DataType::RunEndEncoded(_, _) => "+r".into(),
        DataType::Dictionary(keys, _) => format_string(keys)?,
        DataType::Union(fields, mode) => {
            let ids: Vec<String> = fields.iter().map(|(id, _)| id.to_string()).collect();
            let mode = if *mode == UnionMode::Dense { "ud" } else { "us" };
            format!("+{mode}:{}", ids.join(","))
        }
        other => return Err(ArrowError::CDataInterface(format!("the type {other} cannot cross the C data interface"))),
    })
}

/// `struct ArrowArray`.
#[repr(C)]
pub struct FfiArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut FfiArray,
    dictionary: *mut FfiArray,
    release: Option<unsafe extern "C" fn(*mut FfiArray)>,
    private_data: *mut c_void,
}

struct ArrayPrivate {
    /// Owns the memory the buffer pointers point into.
    _buffers: Vec<Buffer>,
    pointers: Box<[*const c_void]>,
    children: Box<[*mut FfiArray]>,
    dictionary: *mut FfiArray,
}

unsafe extern "C" fn release_array(array: *mut FfiArray) {
    if array.is_null() {
        return;
    }
    // SAFETY: called by the consumer on an array this module exported, once.
    let array = unsafe { &mut *array };
    if !array.private_data.is_null() {
        // SAFETY: as in `release_schema`: Boxes made in `FfiArray::new`.
        let private = unsafe { Box::from_raw(array.private_data as *mut ArrayPrivate) };
        for &child in private.children.iter() {
            drop(unsafe { Box::from_raw(child) });
        }
        if !private.dictionary.is_null() {
            drop(unsafe { Box::from_raw(private.dictionary) });
        }
    }
    array.private_data = std::ptr::null_mut();
    array.release = None;
}

impl Drop for FfiArray {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: an array not yet released (or moved out of) is released once here.
            unsafe { release(self) }
        }
    }
}

/// The validity bitmap with the array's own offset (the C interface has one offset for
/// every buffer; arrow-rs keeps the bitmap's apart).
fn aligned_nulls(offset: usize, nulls: &NullBuffer) -> Buffer {
    if offset == nulls.offset() {
        return nulls.buffer().clone();
    }
    if offset == 0 {
        return nulls.inner().sliced();
    }
    let mut bits = MutableBuffer::new_null(offset + nulls.len());
    set_bits(bits.as_slice_mut(), nulls.validity(), offset, nulls.offset(), nulls.len());
    bits.into()
}

impl FfiArray {
    /// An array marked released (what `get_next` returns at the end of a stream).
    fn released() -> FfiArray {
        FfiArray {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: std::ptr::null_mut(),
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }

    /// Exports `data`; its buffers are shared, not copied.
    fn new(data: &ArrayData) -> FfiArray {
        let spec = layout(data.data_type());
        let mut buffers: Vec<Buffer> = Vec::new();
        let mut pointers: Vec<*const c_void> = Vec::new();
        if spec.can_contain_null_mask {
            match data.nulls().filter(|n| n.null_count() > 0) {
                Some(nulls) => {
                    let bitmap = aligned_nulls(data.offset(), nulls);
                    pointers.push(bitmap.as_ptr() as *const c_void);
                    buffers.push(bitmap);
                }
                // No nulls: the bitmap may be absent.
                None => pointers.push(std::ptr::null()),
            }
        }
        for buffer in data.buffers() {
            pointers.push(buffer.as_ptr() as *const c_void);
            buffers.push(buffer.clone());
        }
        if spec.variadic {
            // View types end with a buffer of the variadic data buffers' lengths.
            let lengths: Vec<i64> = data.buffers().iter().skip(1).map(|b| b.len() as i64).collect();
            let lengths = ScalarBuffer::from(lengths).into_inner();
            pointers.push(lengths.as_ptr() as *const c_void);
            buffers.push(lengths);
        }
        let (children, dictionary) = match data.data_type() {
            DataType::Dictionary(_, _) => (vec![], Box::into_raw(Box::new(FfiArray::new(&data.child_data()[0])))),
            _ => (data.child_data().iter().map(FfiArray::new).collect(), std::ptr::null_mut()),
        };
        let null_count = match data.data_type() {
            DataType::Null => data.len(),
            _ => data.null_count(),
        };
        let mut private = Box::new(ArrayPrivate {
            _buffers: buffers,
            pointers: pointers.into_boxed_slice(),
            children: children.into_iter().map(|c| Box::into_raw(Box::new(c))).collect(),
            dictionary,
        });
        FfiArray {
            length: data.len() as i64,
            null_count: null_count as i64,
            offset: data.offset() as i64,
            n_buffers: private.pointers.len() as i64,
            n_children: private.children.len() as i64,
            buffers: private.pointers.as_mut_ptr(),
            children: private.children.as_mut_ptr(),
            dictionary,
            release: Some(release_array),
            private_data: Box::into_raw(private) as *mut c_void,
        }
    }
}

/// `struct ArrowArrayStream`.
#[repr(C)]
pub struct FfiStream {
    get_schema: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut FfiStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut FfiStream)>,
    private_data: *mut c_void,
}

// SAFETY: the stream owns its reader, which is Send; the C stream interface has the
// consumer call it from one thread at a time.
unsafe impl Send for FfiStream {}

struct StreamPrivate {
    reader: Box<dyn RecordBatchReader + Send>,
    schema: SchemaRef,
    last_error: Option<CString>,
}

const EINVAL: c_int = 22;

impl FfiStream {
    /// A stream the consumer pulls batches of `reader` from.
    pub fn new(reader: Box<dyn RecordBatchReader + Send>) -> FfiStream {
        let schema = reader.schema();
        let private = Box::new(StreamPrivate { reader, schema, last_error: None });
        FfiStream {
            get_schema: Some(stream_get_schema),
            get_next: Some(stream_get_next),
            get_last_error: Some(stream_get_last_error),
            release: Some(release_stream),
            private_data: Box::into_raw(private) as *mut c_void,
        }
    }
}

impl Drop for FfiStream {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: a stream not yet released (or moved out of) is released once here.
            unsafe { release(self) }
        }
    }
}

/// The stream's private data, if it is still live.
///
/// # Safety
/// `stream` must be null or point to a stream made by [`FfiStream::new`].
unsafe fn private<'a>(stream: *mut FfiStream) -> Option<&'a mut StreamPrivate> {
    // SAFETY: per the function's contract.
    let stream = unsafe { stream.as_mut()? };
    // SAFETY: private_data is the Box made in `FfiStream::new`, or null once released.
    unsafe { (stream.private_data as *mut StreamPrivate).as_mut() }
}

fn remember(private: &mut StreamPrivate, error: &ArrowError) -> c_int {
    let text = match error {
        ArrowError::ExternalError(e) => e.to_string(),
        other => other.to_string(),
    };
    private.last_error = Some(CString::new(text.replace('\0', " ")).expect("no NUL bytes"));
    EINVAL
}

unsafe extern "C" fn stream_get_schema(stream: *mut FfiStream, out: *mut FfiSchema) -> c_int {
    // SAFETY: the consumer passes the stream it was given.
    let Some(private) = (unsafe { private(stream) }) else { return EINVAL };
    match FfiSchema::of_schema(&private.schema) {
        // SAFETY: `out` points to a schema struct the consumer owns (uninitialised).
        Ok(schema) => unsafe { std::ptr::write(out, schema) },
        Err(e) => return remember(private, &e),
    }
    0
}

unsafe extern "C" fn stream_get_next(stream: *mut FfiStream, out: *mut FfiArray) -> c_int {
    // SAFETY: the consumer passes the stream it was given.
    let Some(private) = (unsafe { private(stream) }) else { return EINVAL };
    // A panic must not unwind into C: it becomes an error of the stream.
    let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| private.reader.next()))
        .unwrap_or_else(|_| Some(Err(ArrowError::ExternalError("panic while computing a batch".into()))));
    match next {
        None => {
            // The end of the stream: a released array.
            // SAFETY: `out` points to an array struct the consumer owns.
            unsafe { std::ptr::write(out, FfiArray::released()) };
            0
        }
        Some(Ok(batch)) => {
            let data = StructArray::from(batch).into_data();
            // SAFETY: as above.
            unsafe { std::ptr::write(out, FfiArray::new(&data)) };
            0
        }
        Some(Err(e)) => remember(private, &e),
    }
}

unsafe extern "C" fn stream_get_last_error(stream: *mut FfiStream) -> *const c_char {
    // SAFETY: the consumer passes the stream it was given.
    let Some(private) = (unsafe { private(stream) }) else { return std::ptr::null() };
    private.last_error.as_ref().map_or(std::ptr::null(), |e| e.as_ptr())
}

unsafe extern "C" fn release_stream(stream: *mut FfiStream) {
    // SAFETY: the consumer passes the stream it was given.
    let Some(stream) = (unsafe { stream.as_mut() }) else { return };
    if !stream.private_data.is_null() {
        // SAFETY: the Box made in `FfiStream::new`; dropping it drops the reader (and so
        // the plan behind it).
        drop(unsafe { Box::from_raw(stream.private_data as *mut StreamPrivate) });
    }
    stream.private_data = std::ptr::null_mut();
    stream.release = None;
}

/// A schema on its own (`__arrow_c_schema__`).
pub fn export_schema(schema: &Schema) -> Result<FfiSchema, ArrowError> {
    FfiSchema::of_schema(schema)
}
