//! Byte encodings: bincode 2 (standard config) for records, and a one-byte tag in
//! front of every blob saying how it is stored.

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

const RAW: u8 = 0;
const ZSTD: u8 = 1;
/// zstd level: 3 is zstd's default, a good speed/ratio point for JSON text.
const ZSTD_LEVEL: i32 = 3;
/// Below this size compression rarely pays for its frame header.
const MIN_COMPRESS: usize = 64;

pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(value, bincode::config::standard()).expect("in-memory encoding cannot fail")
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map(|(v, _)| v)
        .map_err(|e| Error::Corrupt(format!("undecodable record: {e}")))
}

/// Tag byte + payload: zstd when it makes the blob smaller, raw otherwise.
pub(crate) fn encode_blob(bytes: &[u8]) -> Vec<u8> {
    thread_local! {
        // One compression context per thread, reused: creating a context per blob
        // (zstd::bulk::compress) cost as much as compressing small blobs.
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> = const { std::cell::RefCell::new(None) };
    }
    let compress = |bytes: &[u8]| {
        COMPRESSOR.with_borrow_mut(|slot| {
            let compressor = match slot {
                Some(c) => c,
                None => slot.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL)?),
            };
            compressor.compress(bytes)
        })
    };
    if bytes.len() >= MIN_COMPRESS {
        if let Ok(compressed) = compress(bytes) {
            if compressed.len() + 1 < bytes.len() {
                let mut out = Vec::with_capacity(compressed.len() + 1);
                out.push(ZSTD);
                out.extend_from_slice(&compressed);
                return out;
            }
        }
    }
    let mut out = Vec::with_capacity(bytes.len() + 1);
    out.push(RAW);
    out.extend_from_slice(bytes);
    out
}

pub(crate) fn decode_blob(stored: &[u8]) -> Result<Vec<u8>> {
    match stored.split_first() {
        Some((&RAW, rest)) => Ok(rest.to_vec()),
        Some((&ZSTD, rest)) => {
            zstd::stream::decode_all(rest).map_err(|e| Error::Corrupt(format!("blob does not decompress: {e}")))
        }
        Some((tag, _)) => Err(Error::Corrupt(format!("unknown blob tag {tag}"))),
        None => Err(Error::Corrupt("empty blob entry".into())),
    }
}

/// Compressed bincode, for the large per-episode trace record.
pub(crate) fn encode_compressed<T: Serialize>(value: &T) -> Vec<u8> {
    encode_blob(&encode(value))
}

pub(crate) fn decode_compressed<T: DeserializeOwned>(stored: &[u8]) -> Result<T> {
    decode(&decode_blob(stored)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_raw_and_compressed() {
        for input in [Vec::new(), b"short".to_vec(), vec![b'a'; 10_000]] {
            let stored = encode_blob(&input);
            assert_eq!(decode_blob(&stored).unwrap(), input);
        }
        assert_eq!(encode_blob(&vec![b'a'; 10_000])[0], ZSTD);
        assert_eq!(encode_blob(b"short")[0], RAW);
    }
}
