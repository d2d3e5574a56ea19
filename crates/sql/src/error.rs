#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] epistore_store::Error),
    #[error("{0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    #[error("{0}")]
    Usage(String),
    /// Work given up at its deadline (`serve`'s query time limit).
    #[error("{0}")]
    Deadline(String),
    #[error("{0}")]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    #[error("{0}")]
    Parquet(#[from] datafusion::parquet::errors::ParquetError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
