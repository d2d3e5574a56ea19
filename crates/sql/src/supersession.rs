//! Episodes that a later import supersedes (docs/importers.md §7, docs/metrics.md §I): a
//! log that grew is imported again as a new episode whose `provenance.supersedes`
//! names the old one. The store keeps both (nothing is deleted); every table of one
//! row per episode or per record, and so every metric view, shows only episodes that
//! nothing supersedes, and `all_episodes` keeps every import with a `superseded_by`
//! column.
//!
//! The set is read once per session from the store's index of supersessions. When it is empty
//! (every store without grown imports) the tables are registered as they are, so
//! their pushdown and speed are untouched; otherwise each one becomes a view that
//! drops the superseded ids (a literal list, which filters push through).

use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::prelude::SessionContext;

use crate::error::Result;

/// The table of every import, superseded or not.
pub const ALL_EPISODES: &str = "all_episodes";

/// Episode ids (hex) that another stored episode supersedes, from the store's own
/// index of them (no episode is decoded to find them).
pub(crate) fn superseded(snapshot: &epistore_store::Snapshot) -> Result<Vec<String>> {
    Ok(snapshot.superseded()?.iter().map(|(old, _)| epistore_package::hex(old)).collect())
}

/// Registers `provider` as `name`, without the `excluded` episodes.
pub(crate) async fn register(
    ctx: &SessionContext,
    name: &str,
    provider: Arc<dyn TableProvider>,
    excluded: &[String],
) -> Result<()> {
    if excluded.is_empty() {
        ctx.register_table(name, provider)?;
        return Ok(());
    }
    let hidden = format!("__all_{name}");
    ctx.register_table(hidden.as_str(), provider)?;
    ctx.sql(&format!("CREATE VIEW {name} AS SELECT * FROM {hidden} WHERE episode_id NOT IN ({})", list(excluded)))
        .await?;
    Ok(())
}

/// `all_episodes`: every stored episode with `superseded_by` (the episode that
/// supersedes it, NULL for a current one). Registered after `episodes`.
pub(crate) async fn register_all_episodes(ctx: &SessionContext, excluded: &[String]) -> Result<()> {
    let sql = if excluded.is_empty() {
        "SELECT *, CAST(NULL AS VARCHAR) AS superseded_by FROM episodes".to_string()
    } else {
        "SELECT a.*, s.superseded_by FROM __all_episodes a \
         LEFT JOIN (SELECT supersedes AS superseded, min(episode_id) AS superseded_by \
                    FROM __all_episodes WHERE supersedes IS NOT NULL GROUP BY supersedes) s \
         ON s.superseded = a.episode_id"
            .to_string()
    };
    ctx.sql(&format!("CREATE VIEW {ALL_EPISODES} AS {sql}")).await?;
    Ok(())
}

fn list(ids: &[String]) -> String {
    ids.iter().map(|id| format!("'{id}'")).collect::<Vec<_>>().join(", ")
}
