//! Building the index of a segment's episodes.

use std::fs;
use std::path::Path;

use epistore_package::Episode;
use tantivy::directory::{INDEX_WRITER_LOCK, META_LOCK};
use tantivy::{Index, IndexWriter, TantivyDocument};

use crate::schema::{schema, Fields};
use crate::{Error, Kind, Result, WRITER_MEMORY_BYTES};

/// Builds a new index of these episodes (`(episode id, episode)`) in `dir`, which is
/// created, and must not exist or be empty. Returns the number of documents indexed.
///
/// Up to two indexing threads sharing a memory budget of [`WRITER_MEMORY_BYTES`]; one commit; it
/// waits for the merges that commit starts and leaves no lock file behind, so the
/// directory holds exactly the files of the index ([`crate::index_files`]). On an error
/// the directory is left as it is (the caller discards it).
pub fn write_index(dir: &Path, episodes: &[(&str, &Episode)]) -> Result<u64> {
    prepare(dir)?;
    let result = write(dir, episodes);
    let removed = remove_locks(dir);
    let documents = result?;
    removed?;
    Ok(documents)
}

fn prepare(dir: &Path) -> Result<()> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::index(dir, "the directory is not empty"));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(|e| Error::index(dir, format!("cannot create the directory: {e}")))
        }
        Err(e) => Err(Error::index(dir, format!("cannot read the directory: {e}"))),
    }
}

fn write(dir: &Path, episodes: &[(&str, &Episode)]) -> Result<u64> {
    let tantivy = |e: tantivy::TantivyError| Error::index(dir, e);
    let (schema, fields) = schema();
    let index = Index::create_in_dir(dir, schema).map_err(tantivy)?;
    // Two indexing threads where the machine has two cores: the index is built inside
    // the ingest's commit, which waits for it (measured in benches/README.md).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let writer: IndexWriter<TantivyDocument> =
        index.writer_with_num_threads(threads, WRITER_MEMORY_BYTES).map_err(tantivy)?;
    let mut documents = 0u64;
    for (episode_id, episode) in episodes {
        for document in documents_of(&fields, episode_id, episode).map_err(|message| Error::index(dir, message))? {
            writer.add_document(document).map_err(tantivy)?;
            documents += 1;
        }
    }
    let mut writer = writer;
    writer.commit().map_err(tantivy)?;
    writer.wait_merging_threads().map_err(tantivy)?;
    Ok(documents)
}

/// Removes the lock files tantivy's `MmapDirectory` leaves behind (it releases its
/// locks without deleting the files).
fn remove_locks(dir: &Path) -> Result<()> {
    for lock in [&*INDEX_WRITER_LOCK, &*META_LOCK] {
        match fs::remove_file(dir.join(&lock.filepath)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::index(dir, format!("cannot remove {}: {e}", lock.filepath.display())))
            }
            _ => {}
        }
    }
    Ok(())
}

fn nonempty(text: &Option<String>) -> Option<&str> {
    text.as_deref().filter(|text| !text.is_empty())
}

/// The documents of one episode, in record order: messages, then tools, then actions.
pub(crate) fn documents_of(
    fields: &Fields,
    episode_id: &str,
    episode: &Episode,
) -> std::result::Result<Vec<TantivyDocument>, String> {
    let mut documents = Vec::new();
    let document = |kind: Kind, seq: u64, body: &str| {
        let mut document = TantivyDocument::new();
        document.add_text(fields.body, body);
        document.add_text(fields.kind, kind.name());
        document.add_text(fields.episode_id, episode_id);
        document.add_u64(fields.seq, seq);
        document
    };
    for message in episode.messages.iter().flatten() {
        let body = match (nonempty(&message.text), nonempty(&message.reasoning)) {
            (None, None) => continue,
            (Some(text), None) => text.to_string(),
            (None, Some(reasoning)) => reasoning.to_string(),
            (Some(text), Some(reasoning)) => format!("{text}\n\n{reasoning}"),
        };
        let kind: Kind = message.role.parse().ok().filter(|kind: &Kind| kind.is_message()).ok_or_else(|| {
            format!(
                "episode {episode_id}: message {} has the role {:?}, not a message role",
                message.common.seq, message.role
            )
        })?;
        let mut doc = document(kind, message.common.seq, &body);
        doc.add_text(fields.role, &message.role);
        if let Some(tool) = &message.tool {
            doc.add_text(fields.tool, tool);
        }
        if let Some(author) = &message.author {
            doc.add_text(fields.author, author);
        }
        documents.push(doc);
    }
    for tool in episode.tools.iter().flatten() {
        for (kind, text) in [(Kind::Command, &tool.command), (Kind::Output, &tool.output_text)] {
            if let Some(body) = nonempty(text) {
                let mut doc = document(kind, tool.common.seq, body);
                doc.add_text(fields.tool, &tool.tool);
                documents.push(doc);
            }
        }
    }
    for action in episode.actions.iter().flatten() {
        if let Some(diff) = nonempty(&action.diff) {
            let mut doc = document(Kind::Diff, action.common.seq, diff);
            for path in &action.paths {
                doc.add_text(fields.path, path);
            }
            documents.push(doc);
        }
    }
    Ok(documents)
}
