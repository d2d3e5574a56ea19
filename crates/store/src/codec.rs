//! Byte encodings: bincode 2 (standard config) for records, and a one-byte tag in
//! front of every blob saying how it is stored.

use std::io::Read;

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};
use crate::pack::Dictionaries;

const RAW: u8 = 0;
const ZSTD: u8 = 1;
/// zstd with a dictionary: the tag, the dictionary's number (u32 little-endian), the frame.
const ZSTD_DICTIONARY: u8 = 2;
/// zstd level: 3 is zstd's default, a good speed/ratio point for JSON text.
const ZSTD_LEVEL: i32 = 3;
/// Below this size compression rarely pays for its frame header.
const MIN_COMPRESS: usize = 64;

pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(value, bincode::config::standard()).expect("in-memory encoding cannot fail")
}

/// Decodes a record. A damaged length prefix must not make the decoder allocate what
/// the input could never hold (bincode trusts it, and a claimed length of 2^60 is an
/// abort, not an error): every string and byte string is claimed against a limit of
/// the input's size, rounded up to a power of 16 (so at most 16 times the input).
/// The limit is a const generic in bincode, hence one decoder per size class.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    decode_from(bytes, bytes.len())
}

/// Decodes one value from `reader`, which holds at most `size` bytes, and requires
/// that nothing follows it (a stored value is exactly one encoding).
fn decode_from<T: DeserializeOwned>(mut reader: impl std::io::Read, size: usize) -> Result<T> {
    fn with_limit<T: DeserializeOwned, const LIMIT: usize>(reader: &mut impl std::io::Read) -> Result<T> {
        bincode::serde::decode_from_std_read(reader, bincode::config::standard().with_limit::<LIMIT>())
            .map_err(|e| Error::Corrupt(format!("undecodable record: {e}")))
    }
    let value = match size {
        n if n <= 1 << 12 => with_limit::<T, { 1 << 16 }>(&mut reader),
        n if n <= 1 << 16 => with_limit::<T, { 1 << 20 }>(&mut reader),
        n if n <= 1 << 20 => with_limit::<T, { 1 << 24 }>(&mut reader),
        n if n <= 1 << 24 => with_limit::<T, { 1 << 28 }>(&mut reader),
        n if n <= 1 << 28 => with_limit::<T, { 1 << 32 }>(&mut reader),
        _ => with_limit::<T, { 1 << 40 }>(&mut reader),
    }?;
    let mut rest = [0u8; 1];
    match reader.read(&mut rest) {
        Ok(0) => Ok(value),
        Ok(_) => Err(Error::Corrupt("undecodable record: bytes follow its end".into())),
        Err(e) => Err(Error::Corrupt(format!("undecodable record: {e}"))),
    }
}

/// Decodes the value a record starts with, ignoring what follows it (a migration reads
/// the head of an old record, whose tail has another layout). Lengths are limited as
/// in [`decode`].
pub(crate) fn decode_head<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    let limit = bincode::config::standard().with_limit::<{ 1 << 32 }>();
    bincode::serde::decode_from_slice(bytes, limit)
        .map(|(value, _)| value)
        .map_err(|e| Error::Corrupt(format!("undecodable record head: {e}")))
}

/// zstd's largest possible expansion: an RLE block is 4 bytes (3 of header, 1 of
/// content) for at most 128 KiB of output, so no valid frame decodes to more than this
/// many times its size (plus one block). A damaged or hostile frame that claims more
/// is refused before it is decoded into memory.
const ZSTD_MAX_RATIO: usize = 32 << 10;

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

/// The bytes of a blob (tag 0 or 1: blobs are never packed with a dictionary).
pub(crate) fn decode_blob(stored: &[u8]) -> Result<Vec<u8>> {
    unpack(stored, &Dictionaries::default())
}

/// Tag, dictionary number and a zstd frame compressed with that dictionary; raw when
/// compression does not make the value smaller.
pub(crate) fn encode_with_dictionary(
    bytes: &[u8],
    dictionary: &'static zstd::dict::EncoderDictionary<'static>,
    number: u32,
) -> Vec<u8> {
    thread_local! {
        // One context per thread and dictionary, as for `encode_blob`. A process uses
        // one dictionary per store it writes, so the list stays short.
        static COMPRESSORS: std::cell::RefCell<Vec<(usize, zstd::bulk::Compressor<'static>)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    let key = dictionary as *const _ as usize;
    let compressed = COMPRESSORS.with_borrow_mut(|list| {
        let at = match list.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                list.push((key, zstd::bulk::Compressor::with_prepared_dictionary(dictionary)?));
                list.len() - 1
            }
        };
        list[at].1.compress(bytes)
    });
    match compressed {
        Ok(compressed) if compressed.len() + 5 < bytes.len() => {
            let mut out = Vec::with_capacity(compressed.len() + 5);
            out.push(ZSTD_DICTIONARY);
            out.extend_from_slice(&number.to_le_bytes());
            out.extend_from_slice(&compressed);
            out
        }
        _ => {
            let mut out = Vec::with_capacity(bytes.len() + 1);
            out.push(RAW);
            out.extend_from_slice(bytes);
            out
        }
    }
}

/// A reader of the plain bytes of a packed value (any tag), bounded by zstd's largest
/// expansion, and that bound.
fn plain_reader<'v>(stored: &'v [u8], dictionaries: &'v Dictionaries) -> Result<(Box<dyn std::io::Read + 'v>, usize)> {
    let undecodable = |e: std::io::Error| Error::Corrupt(format!("value does not decompress: {e}"));
    let cap = |rest: &[u8]| rest.len().saturating_mul(ZSTD_MAX_RATIO).saturating_add(128 << 10);
    match stored.split_first() {
        Some((&RAW, rest)) => Ok((Box::new(rest), rest.len())),
        Some((&ZSTD, rest)) => {
            let decoder = zstd::stream::read::Decoder::new(rest).map_err(undecodable)?;
            Ok((Box::new(std::io::BufReader::new(decoder).take(cap(rest) as u64)), cap(rest)))
        }
        Some((&ZSTD_DICTIONARY, rest)) if rest.len() >= 4 => {
            let (number, frame) = rest.split_at(4);
            let number = u32::from_le_bytes(number.try_into().expect("4 bytes"));
            let dictionary = dictionaries.get(number)?;
            let decoder =
                zstd::stream::read::Decoder::with_prepared_dictionary(frame, dictionary).map_err(undecodable)?;
            Ok((Box::new(std::io::BufReader::new(decoder).take(cap(frame) as u64)), cap(frame)))
        }
        Some((tag, _)) => Err(Error::Corrupt(format!("unknown value tag {tag}"))),
        None => Err(Error::Corrupt("empty value".into())),
    }
}

/// The plain bytes of a packed value (any tag).
pub(crate) fn unpack(stored: &[u8], dictionaries: &Dictionaries) -> Result<Vec<u8>> {
    let (reader, cap) = plain_reader(stored, dictionaries)?;
    let mut out = Vec::new();
    reader
        .take(cap as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::Corrupt(format!("value does not decompress: {e}")))?;
    if out.len() > cap {
        return Err(Error::Corrupt(format!(
            "a value of {} bytes decompresses past zstd's largest expansion",
            stored.len()
        )));
    }
    Ok(out)
}

/// Decodes a packed bincode value straight from its decompressing stream (see
/// `decode_compressed`).
pub(crate) fn decode_packed<T: DeserializeOwned>(stored: &[u8], dictionaries: &Dictionaries) -> Result<T> {
    let (reader, cap) = plain_reader(stored, dictionaries)?;
    decode_from(reader, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inputs the fuzzer found (`tests/fixtures/fuzz-crashes`): each aborted or
    /// panicked before decoding was bounded; each must now be an error.
    #[test]
    fn fuzz_crashes_are_errors() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/fuzz-crashes");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.starts_with("store_records-") {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            assert!(crate::decode_record_bytes(&bytes).is_err(), "{name} decoded as a record");
            assert!(crate::decode_traces(&bytes).is_err(), "{name} decoded as traces");
            seen += 1;
        }
        assert!(seen >= 4, "only {seen} fuzz inputs found in {}", dir.display());
    }

    #[test]
    fn a_length_prefix_past_the_input_is_an_error_not_an_allocation() {
        // A string claiming 2^62 bytes: varint 0xff then 8 bytes.
        let mut bytes = vec![0xffu8];
        bytes.extend_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(decode::<String>(&bytes).is_err());
        // Valid records still decode, large ones included.
        let big = "x".repeat(3 << 20);
        assert_eq!(decode::<String>(&encode(&big)).unwrap(), big);
    }

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
