//! Direct writers: the bytes `rmp_serde::to_vec_named` writes, through the
//! same `rmp` writers, field by field in declaration order, an absent
//! optional field left out (every optional field of these messages is
//! `skip_serializing_if = "Option::is_none"`).

use crate::error_code::ErrorCode;
use crate::progress::{Operation, OperationStatus, ProgressEvent};
use crate::request::{
    CreateRequest, DeleteRequest, ReadRequest, StatusRequest, Target, UpdateRequest,
};
use crate::value::{PropertyMap, Value};

// Writes into a `Vec` cannot fail: every `rmp` result here is dropped.

/// A message with a direct writer.
pub(crate) trait DirectWrite {
    /// Appends the message to `out`.
    fn write(&self, out: &mut Vec<u8>);
}

/// How each field type is written, and whether it is written at all.
trait WriteField {
    fn present(&self) -> bool {
        true
    }
    fn write_field(&self, out: &mut Vec<u8>);
}

impl WriteField for String {
    fn write_field(&self, out: &mut Vec<u8>) {
        let _ = rmp::encode::write_str(out, self);
    }
}

impl WriteField for u64 {
    fn write_field(&self, out: &mut Vec<u8>) {
        let _ = rmp::encode::write_uint(out, *self);
    }
}

impl WriteField for PropertyMap {
    fn write_field(&self, out: &mut Vec<u8>) {
        let _ = rmp::encode::write_map_len(out, self.len() as u32);
        for (key, value) in self {
            let _ = rmp::encode::write_str(out, key);
            value.write_field(out);
        }
    }
}

impl WriteField for Value {
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

impl WriteField for Target {
    fn write_field(&self, out: &mut Vec<u8>) {
        self.write(out);
    }
}

impl<T: WriteField> WriteField for Option<T> {
    fn present(&self) -> bool {
        self.is_some()
    }
    fn write_field(&self, out: &mut Vec<u8>) {
        if let Some(value) = self {
            value.write_field(out);
        }
    }
}

macro_rules! open_enum_field {
    ($($t:ty),*) => {$(
        impl WriteField for $t {
            fn write_field(&self, out: &mut Vec<u8>) {
                let _ = rmp::encode::write_str(out, self.as_str());
            }
        }
    )*};
}

open_enum_field!(Operation, OperationStatus, ErrorCode);

/// A direct writer for a struct of `WriteField`s, in declaration order.
macro_rules! direct_write {
    ($t:ident { $($field:ident),+ $(,)? }) => {
        impl DirectWrite for $t {
            fn write(&self, out: &mut Vec<u8>) {
                // Names every field: one added to the struct and not here
                // fails to compile instead of going unwritten.
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

direct_write!(Target { name, config });
direct_write!(CreateRequest {
    request_id,
    resource_type,
    label,
    target,
    properties
});
direct_write!(ReadRequest {
    request_id,
    resource_type,
    target,
    native_id,
    properties
});
direct_write!(UpdateRequest {
    request_id,
    resource_type,
    label,
    target,
    native_id,
    prior_properties,
    properties
});
direct_write!(DeleteRequest {
    request_id,
    resource_type,
    target,
    native_id,
    properties
});
direct_write!(StatusRequest {
    request_id,
    operation,
    resource_type,
    target,
    native_id,
    context
});
direct_write!(ProgressEvent {
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
