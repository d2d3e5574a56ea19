//! What a catalog-browsing client (ADBC `get_objects`, DBeaver, Superset, JDBC/ODBC
//! drivers) asks of a Flight SQL server before its first query: the server's
//! properties (`GetSqlInfo`), catalogs, schemas, tables and views with their Arrow
//! schemas, table types. Read from the session itself, so what is listed is exactly
//! what a query can name.

use std::sync::{Arc, LazyLock};

use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::{SqlInfo, SqlNullOrdering, SqlSupportedTransaction, SupportedSqlGrammar};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::datasource::TableType;
use datafusion::prelude::SessionContext;

/// One table or view a query can name.
pub struct Listed {
    pub catalog: String,
    pub schema: String,
    pub table: String,
    /// `TABLE` or `VIEW`.
    pub kind: &'static str,
    pub arrow_schema: SchemaRef,
}

/// The table types this server lists.
pub const TABLE_TYPES: &[&str] = &["TABLE", "VIEW"];

/// Every table and view of the session, in (catalog, schema, name) order. Internal
/// names (`__all_*`, the tables behind the superseded-import views) and
/// `information_schema` are left out.
pub async fn tables(ctx: &SessionContext) -> datafusion::error::Result<Vec<Listed>> {
    let mut out = Vec::new();
    let mut catalogs = ctx.catalog_names();
    catalogs.sort();
    for catalog_name in catalogs {
        let Some(catalog) = ctx.catalog(&catalog_name) else { continue };
        let mut schemas = catalog.schema_names();
        schemas.sort();
        for schema_name in schemas.into_iter().filter(|s| s != "information_schema") {
            let Some(schema) = catalog.schema(&schema_name) else { continue };
            let mut names = schema.table_names();
            names.sort();
            for name in names.into_iter().filter(|n| !n.starts_with("__")) {
                let Some(provider) = schema.table(&name).await? else { continue };
                let kind = match provider.table_type() {
                    TableType::View => "VIEW",
                    _ => "TABLE",
                };
                out.push(Listed {
                    catalog: catalog_name.clone(),
                    schema: schema_name.clone(),
                    table: name,
                    kind,
                    arrow_schema: provider.schema(),
                });
            }
        }
    }
    Ok(out)
}

/// (catalog, schema) pairs of the session, as [`tables`] lists them.
pub fn schemas(ctx: &SessionContext) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for catalog_name in ctx.catalog_names() {
        let Some(catalog) = ctx.catalog(&catalog_name) else { continue };
        for schema in catalog.schema_names().into_iter().filter(|s| s != "information_schema") {
            out.push((catalog_name.clone(), schema));
        }
    }
    out.sort();
    out
}

/// `GetSqlInfo`: who the server is and what it does (read-only SQL, no transactions,
/// no Substrait, no DDL).
pub static SQL_INFO: LazyLock<Arc<SqlInfoData>> = LazyLock::new(|| {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, "epistore");
    b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    // The Arrow IPC format version (Schema.fbs MetadataVersion V5).
    b.append(SqlInfo::FlightSqlServerArrowVersion, "1.5");
    b.append(SqlInfo::FlightSqlServerReadOnly, true);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    b.append(SqlInfo::FlightSqlServerTransaction, SqlSupportedTransaction::None as i32);
    b.append(SqlInfo::FlightSqlServerCancel, false);
    b.append(SqlInfo::SqlDdlCatalog, false);
    b.append(SqlInfo::SqlDdlSchema, false);
    b.append(SqlInfo::SqlDdlTable, false);
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.append(SqlInfo::SqlAllTablesAreSelectable, true);
    b.append(SqlInfo::SqlNullOrdering, SqlNullOrdering::SqlNullsSortedHigh as i32);
    b.append(SqlInfo::SqlSupportsColumnAliasing, true);
    b.append(SqlInfo::SqlSupportedGrammar, SupportedSqlGrammar::SqlCoreGrammar as i32);
    b.append(SqlInfo::SqlTransactionsSupported, false);
    // The dialect: DataFusion's SQL (PostgreSQL-like), read-only.
    b.append(SqlInfo::SqlKeywords, &["SELECT", "WITH", "EXPLAIN", "SHOW", "DESCRIBE"][..]);
    Arc::new(b.build().expect("static SQL info"))
});
