//! Direct readers and writers of the operation requests and their answer,
//! from one list of fields per message (in declaration order, which the
//! writer keeps). Read as serde's derive reads: missing fields keep the
//! struct's default, a field given twice is left to serde (which refuses
//! it). Written as `rmp_serde::to_vec_named` writes, through the same
//! `rmp` writers: an absent optional field left out (every optional field
//! of these messages is `skip_serializing_if = "Option::is_none"`).

use super::Reader;
use crate::error_code::ErrorCode;
use crate::progress::{Operation, OperationStatus, ProgressEvent};
use crate::request::{
    CreateRequest, DeleteRequest, ReadRequest, StatusRequest, Target, UpdateRequest,
};
use crate::value::{PropertyMap, Value};

// Writes into a `Vec` cannot fail: every `rmp` result here is dropped.

/// A message with a direct reader: `None` leaves the input to serde.
pub(crate) trait Direct: Sized {
    fn read(r: &mut Reader<'_>) -> Option<Self>;
}

/// A message with a direct writer.
pub(crate) trait DirectWrite {
    /// Appends the message to `out`.
    fn write(&self, out: &mut Vec<u8>);
}

/// How each field type is read and written, and whether it is written.
trait Field: Sized {
    fn read_field(r: &mut Reader<'_>) -> Option<Self>;
    fn write_field(&self, out: &mut Vec<u8>);
    fn present(&self) -> bool {
        true
    }
}

impl Field for String {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.string()
    }
    fn write_field(&self, out: &mut Vec<u8>) {
        let _ = rmp::encode::write_str(out, self);
    }
}

impl Field for u64 {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.uint()
    }
    fn write_field(&self, out: &mut Vec<u8>) {
        let _ = rmp::encode::write_uint(out, *self);
    }
}

impl Field for PropertyMap {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.property_map()
    }
    fn write_field(&self, out: &mut Vec<u8>) {
        let _ = rmp::encode::write_map_len(out, self.len() as u32);
        for (key, value) in self {
            let _ = rmp::encode::write_str(out, key);
            value.write_field(out);
        }
    }
}

impl Field for Value {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.value(super::MAX_VALUE_DEPTH)
    }
    fn write_field(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => {
                let _ = rmp::encode::write_nil(out);
            }
            Value::Bool(b) => {
                let _ = rmp::encode::write_bool(out, *b);
            }
            Value::Int(i) => {
                let _ = rmp::encode::write_sint(out, *i);
            }
            Value::UInt(u) => {
                let _ = rmp::encode::write_uint(out, *u);
            }
            Value::Float(f) => {
                let _ = rmp::encode::write_f64(out, *f);
            }
            Value::String(s) => {
                let _ = rmp::encode::write_str(out, s);
            }
            Value::Bytes(b) => {
                let _ = rmp::encode::write_bin(out, b);
            }
            Value::List(items) => {
                let _ = rmp::encode::write_array_len(out, items.len() as u32);
                for item in items {
                    item.write_field(out);
                }
            }
            Value::Map(map) => map.write_field(out),
        }
    }
}

impl Field for Target {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        Target::read(r)
    }
    fn write_field(&self, out: &mut Vec<u8>) {
        self.write(out);
    }
}

impl<T: Field> Field for Option<T> {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.option(T::read_field)
    }
    fn write_field(&self, out: &mut Vec<u8>) {
        if let Some(value) = self {
            value.write_field(out);
        }
    }
    fn present(&self) -> bool {
        self.is_some()
    }
}

macro_rules! open_enum_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn read_field(r: &mut Reader<'_>) -> Option<Self> {
                r.text().map(<$t>::from_wire)
            }
            fn write_field(&self, out: &mut Vec<u8>) {
                let _ = rmp::encode::write_str(out, self.as_str());
            }
        }
    )*};
}

open_enum_field!(Operation, OperationStatus, ErrorCode);

/// The direct reader and writer of a struct of `Field`s (at most 16),
/// listed in declaration order.
macro_rules! direct {
    ($t:ident { $($field:ident),+ $(,)? }) => {
        impl Direct for $t {
            fn read(r: &mut Reader<'_>) -> Option<Self> {
                let mut out = $t::default();
                // Names every field: a field added to the struct and not
                // here fails to compile instead of being skipped.
                let $t { $($field: _),+ } = &out;
                let mut seen = 0u16;
                for _ in 0..r.map_len()? {
                    let mut bit = 1u16;
                    let key = r.str()?;
                    $(
                        if key == stringify!($field).as_bytes() {
                            if seen & bit != 0 {
                                return None;
                            }
                            seen |= bit;
                            out.$field = Field::read_field(r)?;
                            continue;
                        }
                        bit <<= 1;
                    )+
                    let _ = bit;
                    r.skip_scalar()?;
                }
                Some(out)
            }
        }

        impl DirectWrite for $t {
            fn write(&self, out: &mut Vec<u8>) {
                let $t { $($field),+ } = self;
                let fields = 0 $( + u32::from($field.present()) )+;
                let _ = rmp::encode::write_map_len(out, fields);
                $(
                    if $field.present() {
                        let _ = rmp::encode::write_str(out, stringify!($field));
                        $field.write_field(out);
                    }
                )+
            }
        }
    };
}

direct!(Target { name, config });
direct!(CreateRequest {
    request_id,
    resource_type,
    label,
    target,
    properties
});
direct!(ReadRequest {
    request_id,
    resource_type,
    target,
    native_id,
    properties
});
direct!(UpdateRequest {
    request_id,
    resource_type,
    label,
    target,
    native_id,
    prior_properties,
    properties
});
direct!(DeleteRequest {
    request_id,
    resource_type,
    target,
    native_id,
    properties
});
direct!(StatusRequest {
    request_id,
    operation,
    resource_type,
    target,
    native_id,
    context
});
direct!(ProgressEvent {
    operation,
    status,
    request_id,
    resource_type,
    native_id,
    properties,
    error_code,
    message,
    retry_after_ms,
    context
});
