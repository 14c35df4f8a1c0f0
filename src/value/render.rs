//! Rendering (language.md §14). OWNER: values helper.
use crate::value::Value;

/// The canonical one-line form (`value.get format:"inline"`).
pub fn inline(v: &Value) -> String {
    let _ = v;
    todo!()
}
/// Display form: strings raw, everything else inline (interpolation, `.str()`).
pub fn display(v: &Value) -> String {
    let _ = v;
    todo!()
}
/// Block form for humans: tables as aligned columns within `width` columns.
pub fn block(v: &Value, width: usize) -> String {
    let _ = (v, width);
    todo!()
}
