//! Per-episode values compressed with a zstd dictionary trained on the store's own
//! values (format 3).
//!
//! Most episode values are a few kilobytes, and zstd compresses a small value poorly on
//! its own: it starts each frame knowing nothing. A dictionary trained on the store's
//! first episodes (records, traces, package files) gives every later frame the JSON
//! keys, paths and phrases they share; on small packages it took a third off an
//! episode's own files (3.2 to 2.1 KB; docs/store-format.md §3.10, benches/README.md).
//!
//! A dictionary is stored in the `dictionaries` table, in the same transaction as the
//! first value compressed with it, and never changed: a value names the number of its
//! dictionary in its tag, so a store may hold several (a migration, a later retraining)
//! and every value stays readable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use zstd::dict::{DecoderDictionary, EncoderDictionary};

use crate::codec;
use crate::error::{Error, Result};

/// Dictionary size: zstd's own default for `--train`, past which small values gain little.
const DICTIONARY_BYTES: usize = 64 << 10;
/// Each sample is cut to this many bytes: a dictionary learns from the start of values.
const SAMPLE_BYTES: usize = 16 << 10;
/// Samples kept at most (zstd advises about 100 times the dictionary size).
const SAMPLE_BUDGET: usize = 8 << 20;
/// zstd level with a dictionary: the same speed/ratio point as for blobs.
const LEVEL: i32 = 3;

/// A trained dictionary, ready to compress with.
pub(crate) struct Dictionary {
    pub(crate) number: u32,
    pub(crate) raw: Vec<u8>,
    encoder: &'static EncoderDictionary<'static>,
}

impl Dictionary {
    pub(crate) fn new(number: u32, raw: Vec<u8>) -> Dictionary {
        Dictionary { number, encoder: prepared(&raw), raw }
    }
}

/// The prepared form of a dictionary, made once per process and kept: compression
/// contexts are cached per thread and must borrow it for as long as they live. A
/// process prepares one per store it writes into, so what is kept stays small.
fn prepared(raw: &[u8]) -> &'static EncoderDictionary<'static> {
    static PREPARED: Mutex<Vec<([u8; 32], &'static EncoderDictionary<'static>)>> = Mutex::new(Vec::new());
    let key = *blake3::hash(raw).as_bytes();
    let mut list = PREPARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, found)) = list.iter().find(|(k, _)| *k == key) {
        return found;
    }
    let made: &'static EncoderDictionary<'static> = Box::leak(Box::new(EncoderDictionary::copy(raw, LEVEL)));
    list.push((key, made));
    made
}

#[derive(Default)]
struct Samples {
    values: Vec<Vec<u8>>,
    bytes: usize,
    /// Training ran (whatever its result): it is tried once per writer.
    tried: bool,
}

/// Compresses the values of one writer: with the store's latest dictionary, or, until
/// there is one, plainly while it collects samples; after `train_after` samples it
/// trains one (on whichever thread offers the last sample) and uses it from then on.
pub(crate) struct Packer {
    current: RwLock<Option<Arc<Dictionary>>>,
    samples: Mutex<Samples>,
    /// The number the trained dictionary gets.
    next_number: u32,
    train_after: usize,
}

impl Packer {
    /// `latest`: the store's newest dictionary, if it has one; `next_number`: the number
    /// after the last stored; `train_after`: samples before training (0: never train).
    pub(crate) fn new(latest: Option<Dictionary>, next_number: u32, train_after: usize) -> Packer {
        let tried = latest.is_some() || train_after == 0;
        Packer {
            current: RwLock::new(latest.map(Arc::new)),
            samples: Mutex::new(Samples { tried, ..Samples::default() }),
            next_number,
            train_after,
        }
    }

    /// The dictionary in use now, if any.
    pub(crate) fn dictionary(&self) -> Option<Arc<Dictionary>> {
        self.current.read().expect("no writer panics holding it").clone()
    }

    /// Compresses `plain` with the current dictionary, or plainly (offering it as a
    /// sample) while there is none.
    pub(crate) fn pack(&self, plain: &[u8]) -> Vec<u8> {
        self.pack_with(plain, self.dictionary().as_deref())
    }

    /// Compresses `plain` with the given dictionary (one this packer had), or plainly,
    /// offering it as a sample then.
    pub(crate) fn pack_with(&self, plain: &[u8], dictionary: Option<&Dictionary>) -> Vec<u8> {
        match dictionary {
            Some(d) => codec::encode_with_dictionary(plain, d.encoder, d.number),
            None => {
                self.offer(plain);
                codec::encode_blob(plain)
            }
        }
    }

    fn offer(&self, plain: &[u8]) {
        let ready = {
            let mut samples = self.samples.lock().expect("no writer panics holding it");
            if samples.tried || samples.bytes >= SAMPLE_BUDGET || plain.is_empty() {
                return;
            }
            let cut = &plain[..plain.len().min(SAMPLE_BYTES)];
            samples.bytes += cut.len();
            samples.values.push(cut.to_vec());
            if samples.values.len() < self.train_after {
                return;
            }
            samples.tried = true;
            std::mem::take(&mut samples.values)
        };
        // Training takes a fraction of a second; the other threads go on meanwhile.
        // Too few or too alike samples make zstd refuse: then there is no dictionary.
        // A dictionary larger than a tenth of its samples learns nothing more from them.
        let total: usize = ready.iter().map(Vec::len).sum();
        if let Ok(raw) = zstd::dict::from_samples(&ready, DICTIONARY_BYTES.min(total / 10).max(1 << 10)) {
            *self.current.write().expect("no writer panics holding it") =
                Some(Arc::new(Dictionary::new(self.next_number, raw)));
        }
    }
}

/// The dictionaries of a snapshot, by number, for decoding.
#[derive(Default)]
pub struct Dictionaries(HashMap<u32, DecoderDictionary<'static>>);

impl Dictionaries {
    pub(crate) fn insert(&mut self, number: u32, raw: &[u8]) {
        self.0.insert(number, DecoderDictionary::copy(raw));
    }

    pub(crate) fn get(&self, number: u32) -> Result<&DecoderDictionary<'static>> {
        self.0.get(&number).ok_or_else(|| {
            Error::Corrupt(format!("a value names compression dictionary {number}, which the store does not hold"))
        })
    }
}

/// Decodes stored episode values, with the dictionaries they may name. Cheap to clone
/// and shareable between threads, so values read under a snapshot can be decoded in
/// parallel.
#[derive(Clone, Default)]
pub struct Decoder(pub(crate) Arc<Dictionaries>);

impl Decoder {
    /// A decoder for values that name no dictionary (format-2 values, tests, fuzzing).
    pub fn without_dictionaries() -> Decoder {
        Decoder::default()
    }

    /// Decodes bytes from [`crate::Snapshot::traces_bytes`].
    pub fn traces(&self, bytes: &[u8]) -> Result<epistore_package::Episode> {
        codec::decode_packed(bytes, &self.0)
    }

    /// Decodes bytes from [`crate::Snapshot::record_bytes`].
    pub fn record(&self, bytes: &[u8]) -> Result<crate::EpisodeRecord> {
        codec::decode_packed(bytes, &self.0)
    }

    /// The plain bytes of a packed value.
    pub(crate) fn plain(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        codec::unpack(bytes, &self.0)
    }
}
