//! Readers during ingest: another process ingests while this one takes snapshots;
//! every snapshot holds whole episodes only, and counts never go backwards.

use std::process::Stdio;
use std::time::{Duration, Instant};

use epistore_store::Store;

use crate::util::*;

#[test]
fn a_reader_during_ingest_sees_whole_episodes_only() {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    let total = 300;
    many_packages(work.path(), total);
    // Create the store first so the reader has something to open.
    assert!(store.ingest(&[&dataset()]).status.success());

    let mut child = store
        .command()
        .args(["ingest", "--quiet", "--chunk", "4"])
        .arg(work.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = Store::open_read_only(store.path()).expect("a reader opens while a writer holds the store");
    let mut last = 0u64;
    let mut distinct_counts = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let running = child.try_wait().unwrap().is_none();
        let snapshot = reader.snapshot().unwrap();
        let count = snapshot.episode_count().unwrap();
        assert!(count >= last, "count went backwards: {count} < {last}");
        last = count;
        distinct_counts.insert(count);
        let logged: usize = snapshot.ingest_log().unwrap().iter().map(|b| b.episodes.len()).sum();
        assert_eq!(logged as u64, count, "ingest log and episodes disagree within one snapshot");
        snapshot
            .for_each_episode(|record| {
                for (file, bytes) in record.files.iter().zip(snapshot.files(&record)?) {
                    assert_eq!(bytes.len() as u64, file.size);
                }
                assert!(snapshot.episode_traces(&record.id)?.is_some(), "episode without traces");
                Ok(true)
            })
            .unwrap();
        if !running || Instant::now() > deadline {
            break;
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success());
    let final_count = reader.snapshot().unwrap().episode_count().unwrap();
    assert_eq!(final_count, (total + 4) as u64);
    assert!(distinct_counts.len() >= 3, "the reader saw too few intermediate states: {distinct_counts:?}");
}

/// `serve --max-queries 1`: while one query streams, the next waits for its slot (and
/// is refused when its deadline passes first); once the first is gone, queries run at
/// once again. The memory budget is one pool for all of them.
#[test]
fn serve_runs_at_most_max_queries_at_once() {
    use arrow_flight_59::flight_service_client::FlightServiceClient;
    use arrow_flight_59::sql::{CommandStatementQuery, ProstMessageExt, TicketStatementQuery};
    use arrow_flight_59::{FlightDescriptor, Ticket};
    use prost::Message;

    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let (mut child, addr) = store.serve(&["--max-queries", "1", "--query-timeout-secs", "3"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let connect = || async {
            let channel =
                tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
            FlightServiceClient::new(channel)
        };
        let mut first = connect().await;
        let mut second = connect().await;
        // Tickets come from GetFlightInfo, signed; one a client writes itself is refused.
        let mut planner = connect().await;
        let mut tickets = std::collections::HashMap::new();
        for sql in ["SELECT * FROM range(100000000)", "SELECT 1 AS a"] {
            let command = CommandStatementQuery { query: sql.into(), transaction_id: None };
            let descriptor = FlightDescriptor::new_cmd(command.as_any().encode_to_vec());
            let info = planner.get_flight_info(descriptor).await.unwrap().into_inner();
            tickets.insert(sql, info.endpoint[0].ticket.clone().unwrap());
        }
        let ticket = |sql: &str| tickets[sql].clone();
        let forged = Ticket::new(
            TicketStatementQuery { statement_handle: b"SELECT 2 AS forged".to_vec().into() }.as_any().encode_to_vec(),
        );
        let refused = planner.do_get(forged).await.expect_err("a forged ticket ran");
        assert!(refused.message().contains("not issued by this server"), "{refused}");
        // A long result, read one message and then held open.
        let mut held = first.do_get(ticket("SELECT * FROM range(100000000)")).await.unwrap().into_inner();
        assert!(held.message().await.unwrap().is_some());
        let started = Instant::now();
        match second.do_get(ticket("SELECT 1 AS a")).await {
            Err(status) => assert!(status.message().contains("time limit"), "{status}"),
            Ok(_) => assert!(started.elapsed() >= Duration::from_millis(2500), "ran beside a held query"),
        }
        drop(held);
        let started = Instant::now();
        let mut stream = second.do_get(ticket("SELECT 1 AS a")).await.unwrap().into_inner();
        while stream.message().await.unwrap().is_some() {}
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    });
    let _ = child.kill();
    let _ = child.wait();
}

/// `serve`'s memory limit covers results too: a batch (with its encoded copy) that does
/// not fit in the pool ends its stream with `ResourceExhausted` naming the limit, the
/// server stays up, and what a stream held is given back (ten results of a third of
/// the pool each run one after the other). A function that would build more than one
/// call may (`repeat` of 2 GB) is refused before it builds anything.
#[test]
fn serve_charges_results_to_its_memory_limit() {
    use arrow_flight_59::flight_service_client::FlightServiceClient;
    use arrow_flight_59::sql::{CommandStatementQuery, ProstMessageExt};
    use arrow_flight_59::FlightDescriptor;
    use prost::Message;

    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let (mut child, addr) = store.serve(&["--memory-limit-mib", "64", "--query-timeout-secs", "60"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let channel =
            tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
        let mut client =
            FlightServiceClient::new(channel).max_decoding_message_size(256 << 20).max_encoding_message_size(64 << 20);
        // Bytes of the results of `sql`, or the status that ended its stream.
        let mut run = async |sql: &str| -> Result<usize, tonic::Status> {
            let command = CommandStatementQuery { query: sql.into(), transaction_id: None };
            let descriptor = FlightDescriptor::new_cmd(command.as_any().encode_to_vec());
            let info = client.get_flight_info(descriptor).await?.into_inner();
            let mut stream = client.do_get(info.endpoint[0].ticket.clone().unwrap()).await?.into_inner();
            let mut bytes = 0;
            while let Some(message) = stream.message().await? {
                bytes += message.data_body.len();
            }
            Ok(bytes)
        };
        // 40 MB, 80 MB with its encoding: more than the 64 MiB pool.
        let status = run("SELECT repeat('x', 40000000) AS big").await.expect_err("a result past the pool was sent");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status}");
        assert!(status.message().contains("--memory-limit-mib") && status.message().contains("64 MiB"), "{status}");
        // 10 MB each (20 with the encoding): fits, and is given back after each stream.
        for _ in 0..10 {
            let bytes = run("SELECT repeat('x', 10000000) AS part").await.expect("a result within the pool");
            assert!(bytes >= 10_000_000, "{bytes}");
        }
        let status = run("SELECT repeat('x', 2000000000) AS bomb").await.expect_err("a 2 GB string was built");
        assert!(status.message().contains("repeat would build 1907 MiB"), "{status}");
    });
    assert!(child.try_wait().unwrap().is_none(), "the server exited");
    let _ = child.kill();
    let _ = child.wait();
}
