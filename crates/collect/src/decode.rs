//! A request's body as OTLP JSON: decompressed within the size limit, decoded with the
//! protocol's own message definitions (protobuf through prost, JSON through their
//! serde form, which takes an `intValue` as a string or a number), and written out in
//! the OTLP JSON encoding the `*-otel` importers read.

use std::io::Read;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::Value;

/// Which OTLP endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Logs,
    Traces,
    Metrics,
}

/// The body's encoding, by its content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    /// `application/x-protobuf` or `application/json` (parameters such as `charset`
    /// aside); anything else is none.
    pub fn of(content_type: Option<&str>) -> Option<Encoding> {
        let essence = content_type?.split(';').next()?.trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/x-protobuf" | "application/protobuf" => Some(Encoding::Protobuf),
            "application/json" => Some(Encoding::Json),
            _ => None,
        }
    }
}

/// Why a body is refused before it is decoded.
#[derive(Debug, PartialEq)]
pub enum Refused {
    TooLarge(String),
    Unsupported(String),
    Malformed(String),
}

/// The body without its `Content-Encoding` (none or gzip), at most `max` bytes.
pub fn decompress(content_encoding: Option<&str>, body: &[u8], max: usize) -> Result<Vec<u8>, Refused> {
    if body.len() > max {
        return Err(Refused::TooLarge(format!("the body is {} bytes, over the {max} a request may carry", body.len())));
    }
    match content_encoding.map(|e| e.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "identity") => Ok(body.to_vec()),
        Some("gzip" | "x-gzip") => {
            let mut out = Vec::new();
            let mut reader = flate2::read::GzDecoder::new(body).take(max as u64 + 1);
            reader
                .read_to_end(&mut out)
                .map_err(|e| Refused::Malformed(format!("the gzip body does not decompress: {e}")))?;
            if out.len() > max {
                return Err(Refused::TooLarge(format!(
                    "the body decompresses to over the {max} bytes a request may carry"
                )));
            }
            Ok(out)
        }
        Some(other) => {
            Err(Refused::Unsupported(format!("content encoding {other:?}: OTLP/HTTP bodies are gzip or plain")))
        }
    }
}

fn json_of<T: serde::Serialize>(message: &T) -> Result<Value, String> {
    serde_json::to_value(message).map_err(|e| format!("cannot re-encode the request: {e}"))
}

/// The body of `signal` decoded and written out as OTLP JSON.
pub fn decode(signal: Signal, encoding: Encoding, body: &[u8]) -> Result<Value, String> {
    let what = match signal {
        Signal::Logs => "ExportLogsServiceRequest",
        Signal::Traces => "ExportTraceServiceRequest",
        Signal::Metrics => "ExportMetricsServiceRequest",
    };
    let bad = |e: String| {
        format!(
            "the body is not an OTLP {what} in {}: {e}",
            match encoding {
                Encoding::Protobuf => "protobuf",
                Encoding::Json => "JSON",
            }
        )
    };
    match (signal, encoding) {
        (Signal::Logs, Encoding::Protobuf) => {
            json_of(&ExportLogsServiceRequest::decode(body).map_err(|e| bad(e.to_string()))?)
        }
        (Signal::Logs, Encoding::Json) => {
            json_of(&serde_json::from_slice::<ExportLogsServiceRequest>(body).map_err(|e| bad(e.to_string()))?)
        }
        (Signal::Traces, Encoding::Protobuf) => {
            json_of(&ExportTraceServiceRequest::decode(body).map_err(|e| bad(e.to_string()))?)
        }
        (Signal::Traces, Encoding::Json) => {
            json_of(&serde_json::from_slice::<ExportTraceServiceRequest>(body).map_err(|e| bad(e.to_string()))?)
        }
        (Signal::Metrics, Encoding::Protobuf) => {
            json_of(&ExportMetricsServiceRequest::decode(body).map_err(|e| bad(e.to_string()))?)
        }
        (Signal::Metrics, Encoding::Json) => {
            json_of(&serde_json::from_slice::<ExportMetricsServiceRequest>(body).map_err(|e| bad(e.to_string()))?)
        }
    }
}

/// How many items sit at the end of the nested lists `path` (spans, metrics).
pub fn count(request: &Value, path: &[&str]) -> u64 {
    match path.split_first() {
        None => 1,
        Some((key, rest)) => {
            request.get(key).and_then(Value::as_array).into_iter().flatten().map(|v| count(v, rest)).sum()
        }
    }
}

/// A JSON request as protobuf bytes (for the tests and the benchmark's senders).
pub fn logs_protobuf(json: &[u8]) -> Result<Vec<u8>, String> {
    let request: ExportLogsServiceRequest = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    Ok(request.encode_to_vec())
}
