//! The schema every index of this crate has.

use tantivy::schema::{Field, Schema, INDEXED, STORED, STRING, TEXT};

/// The fields of the schema, by name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields {
    pub body: Field,
    pub kind: Field,
    pub role: Field,
    pub tool: Field,
    pub author: Field,
    pub path: Field,
    pub episode_id: Field,
    pub seq: Field,
}

/// The schema and its fields. Built the same way every time, so two indexes of this
/// crate have equal schemas (and equal field ids).
pub(crate) fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let fields = Fields {
        // TEXT: the default tokenizer, with frequencies and positions.
        body: builder.add_text_field("body", TEXT | STORED),
        kind: builder.add_text_field("kind", STRING | STORED),
        role: builder.add_text_field("role", STRING),
        tool: builder.add_text_field("tool", STRING | STORED),
        author: builder.add_text_field("author", STRING),
        path: builder.add_text_field("path", STRING),
        episode_id: builder.add_text_field("episode_id", STRING | STORED),
        seq: builder.add_u64_field("seq", INDEXED | STORED),
    };
    (builder.build(), fields)
}
