//! tfdata across real network hosts: the dispatcher, the workers and the
//! reader are real `tfdata` processes, each in its own network namespace with
//! its own address, joined by a switch, all inside a private sandbox
//! (`netns/sandbox.rs`) that nothing else can reach. The scenarios cut links
//! mid-read and heal them, or put a 50 ms delay on every link, and check the
//! elements read as multisets. Each needs root; without it, it prints
//! "SKIPPED: ..." and passes. docs/multi-host-tests.md describes them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;
mod netns;

use std::time::{Duration, Instant};

use common::process::{Process, wait_until};
use netns::cluster::{Cluster, Layout, check_exactly, check_none_lost, counts};
use netns::delay_proxy::DelayProxy;
use netns::sandbox::{self, REPORT_PREFIX};

/// A line for the test's report (shown even when it passes).
fn report(line: &str) {
    println!("{REPORT_PREFIX}{line}");
}

/// Waits for the reader to finish its read; panics with everyone's logs if
/// it fails or takes longer than `limit`.
fn finish_read(cluster: &Cluster, reader: &mut Process, limit: Duration) -> Vec<String> {
    match reader.wait_exit(limit) {
        Some(status) if status.success() => reader.stdout_lines(),
        outcome => panic!(
            "the read ended with {outcome:?} after {} elements\n{}",
            reader.stdout_len(),
            cluster.logs(&[reader])
        ),
    }
}

/// Waits until the reader has read `n` elements; panics after `limit`
/// with everyone's logs.
fn wait_for_elements(cluster: &Cluster, reader: &Process, n: usize, limit: Duration) {
    let what = format!("the reader to read {n} elements");
    wait_until(&what, limit, &cluster.everyone(&[reader]), || {
        (reader.stdout_len() >= n).then_some(())
    });
}

/// How many elements the reader has read; panics if its read is over (the
/// cut would then not be mid-read).
fn mid_read(reader: &mut Process, n: i64) -> usize {
    let read = reader.stdout_len();
    let running = reader.child.try_wait().unwrap().is_none();
    assert!(
        running && read < n as usize,
        "the read ended ({read} of {n} elements) before the cut: make the dataset larger"
    );
    read
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// A distributed_epoch read loses nothing when a worker is cut off from
/// everyone (dispatcher and reader) mid-epoch for longer than
/// `worker_timeout` and then comes back: the dispatcher declares it lost and
/// hands the splits it held but had not delivered to the other workers, the
/// reader drops its task and finishes with the others, and the healed
/// worker is revived. Elements the cut worker had sent but could not be
/// sure were delivered may arrive twice; the test prints how many.
#[test]
fn a_worker_cut_off_mid_epoch_and_healed_loses_nothing() {
    sandbox::run(
        "a_worker_cut_off_mid_epoch_and_healed_loses_nothing",
        worker_cut_off_mid_epoch,
    );
}

fn worker_cut_off_mid_epoch() {
    let cluster = Cluster::start(Layout {
        workers: 3,
        dispatcher_args: &["--worker-timeout-ms", "2000"],
        delay_proxy: None,
    });
    // Every element is a split; workers lease them by the thousand, so the
    // epoch must be long enough to still be running at the cut.
    let n = 200_000;
    let id = cluster.register(&format!(r#"{{"op": "range", "stop": {n}}}"#));
    let mut reader = cluster.read(&id, "distributed_epoch");
    wait_for_elements(&cluster, &reader, 300, Duration::from_secs(60));
    let w1 = cluster.worker_address(0);
    cluster.wait_status(
        "w1 running a task",
        Duration::from_secs(10),
        &[&reader],
        |s| s.tasks.iter().any(|t| t.worker == w1 && !t.finished),
    );

    cluster.net.unplug(&cluster.worker_hosts[0]);
    let cut = Instant::now();
    let read_at_cut = mid_read(&mut reader, n);
    cluster.wait_status(
        "w1 declared lost",
        Duration::from_secs(20),
        &[&reader],
        |s| s.worker(&w1).is_some_and(|w| w.lost),
    );
    let lost_after = cut.elapsed();
    cluster.net.plug(&cluster.worker_hosts[0]);
    let healed = Instant::now();
    cluster.wait_status("w1 revived", Duration::from_secs(60), &[&reader], |s| {
        s.worker(&w1).is_some_and(|w| !w.lost)
    });
    let revived_after = healed.elapsed();

    let lines = finish_read(&cluster, &mut reader, Duration::from_secs(90));
    let twice = check_none_lost(&counts(&lines), n, 1, "worker cut mid-epoch");
    report(&format!(
        "worker cut off after {read_at_cut} of {n} elements: declared lost {} after the cut, \
         revived {} after the heal; all {n} read, none lost, {twice} twice",
        secs(lost_after),
        secs(revived_after)
    ));
}

/// With TensorFlow's default `worker_timeout` (10 minutes): a worker process
/// SIGKILLed mid-read is declared lost within seconds (the reader finds its
/// port refusing, tells the dispatcher, and the dispatcher's own probes of
/// the worker's host are refused too), and the read finishes with every
/// element exactly once instead of stalling for 10 minutes. A worker whose
/// link is cut for 3 s, and one paused (SIGSTOP) for 3 s, are not declared
/// lost by the same path: their hosts do not refuse (the cut one does not
/// answer at all, the paused one's kernel accepts the connection), and
/// their reads finish exactly once too.
#[test]
fn a_dead_worker_is_declared_lost_in_seconds_and_a_cut_or_paused_one_is_not() {
    sandbox::run(
        "a_dead_worker_is_declared_lost_in_seconds_and_a_cut_or_paused_one_is_not",
        dead_cut_and_paused_workers,
    );
}

fn dead_cut_and_paused_workers() {
    // TensorFlow's defaults: worker_timeout 10 minutes.
    let cluster = Cluster::start(Layout {
        workers: 3,
        dispatcher_args: &[],
        delay_proxy: None,
    });
    let n = 500_000; // still running when the workers fail (splits are leased)
    let id = cluster.register(&format!(r#"{{"op": "range", "stop": {n}}}"#));

    // Killed: noticed in seconds.
    let mut reader = cluster.read(&id, "distributed_epoch");
    wait_for_elements(&cluster, &reader, 300, Duration::from_secs(60));
    let w1 = cluster.worker_address(0);
    cluster.workers[0].signal("KILL");
    let killed = Instant::now();
    let read_at_kill = mid_read(&mut reader, n);
    cluster.wait_status(
        "the killed worker declared lost",
        Duration::from_secs(60),
        &[&reader],
        |s| s.worker(&w1).is_some_and(|w| w.lost),
    );
    let lost_after = killed.elapsed();
    let lines = finish_read(&cluster, &mut reader, Duration::from_secs(90));
    let read_after = killed.elapsed();
    check_exactly(&counts(&lines), n, 1, "worker killed");
    report(&format!(
        "worker SIGKILLed after {read_at_kill} of {n} elements, worker_timeout 10 min: declared \
         lost {} after the kill, the read finished {} after it; {n} elements exactly once",
        secs(lost_after),
        secs(read_after)
    ));

    // Cut off for 3 s, then paused for 3 s: neither declared lost.
    for (what, i) in [("cut off", 1), ("paused", 2)] {
        let address = cluster.worker_address(i);
        let mut reader = cluster.read(&id, "distributed_epoch");
        wait_for_elements(&cluster, &reader, 300, Duration::from_secs(60));
        match what {
            "cut off" => cluster.net.unplug(&cluster.worker_hosts[i]),
            _ => cluster.workers[i].signal("STOP"),
        }
        let started = Instant::now();
        let read_at = mid_read(&mut reader, n);
        // 3 s, and beyond the dispatcher's probes of an overdue worker (it
        // heartbeats every 200 ms: probed after 1 s of silence).
        while started.elapsed() < Duration::from_secs(3) {
            let status = cluster.status();
            assert!(
                status.worker(&address).is_some_and(|w| !w.lost),
                "a worker {what} for less than worker_timeout was declared lost:\n{}\n{}",
                status.text,
                cluster.logs(&[&reader])
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        match what {
            "cut off" => cluster.net.plug(&cluster.worker_hosts[i]),
            _ => cluster.workers[i].signal("CONT"),
        }
        let held = started.elapsed();
        let lines = finish_read(&cluster, &mut reader, Duration::from_secs(90));
        check_exactly(&counts(&lines), n, 1, what);
        let status = cluster.status();
        assert!(
            status.worker(&address).is_some_and(|w| !w.lost),
            "the worker {what} was declared lost after all:\n{}\n{}",
            status.text,
            cluster.logs(&[])
        );
        report(&format!(
            "worker {what} for {} after {read_at} of {n} elements: not declared lost; {n} \
             elements exactly once",
            secs(held)
        ));
    }
}

/// The dispatcher cut off from both workers (blackhole routes; the reader
/// still reaches everyone), during distributed_epoch reads:
/// - for less than `worker_timeout` (5 s): nothing changes. No worker is
///   declared lost, every task stays where it was, heartbeats resume after
///   the heal and the read is exactly once;
/// - for longer: both workers are declared lost, and revived when the link
///   heals; the read that spans it completes with nothing lost.
#[test]
fn the_dispatcher_cut_off_from_the_workers_briefly_and_for_longer() {
    sandbox::run(
        "the_dispatcher_cut_off_from_the_workers_briefly_and_for_longer",
        dispatcher_cut_off_from_the_workers,
    );
}

fn dispatcher_cut_off_from_the_workers() {
    let cluster = Cluster::start(Layout {
        workers: 2,
        // Well above the brief cut: after a heal, TCP retransmits on
        // its back-off schedule (0.2, 0.6, 1.4, 3.0 s ...), so
        // heartbeats may take until about 3 s to get through.
        dispatcher_args: &["--worker-timeout-ms", "5000"],
        delay_proxy: None,
    });
    let workers: Vec<&netns::network::Host> = cluster.worker_hosts.iter().collect();
    let n = 200_000; // long enough to be mid-read at the cut (splits are leased)
    let id = cluster.register(&format!(r#"{{"op": "range", "stop": {n}}}"#));

    // Shorter than worker_timeout.
    let mut reader = cluster.read(&id, "distributed_epoch");
    wait_for_elements(&cluster, &reader, 300, Duration::from_secs(60));
    let running = |s: &netns::cluster::Status| -> Vec<(i64, String)> {
        let mut t: Vec<_> = s
            .tasks
            .iter()
            .filter(|t| !t.finished)
            .map(|t| (t.id, t.worker.clone()))
            .collect();
        t.sort();
        t
    };
    let before = cluster.status();
    cluster.net.partition(&cluster.dispatcher_host, &workers);
    let cut = Instant::now();
    mid_read(&mut reader, n);
    // Held until the dispatcher has heard from neither worker for 1.2 s
    // (so the cut is real), never declaring one lost meanwhile.
    let during = cluster.wait_status(
        "1.2 s without heartbeats",
        Duration::from_secs(10),
        &[&reader],
        |s| {
            s.workers.iter().any(|w| w.lost)
                || s.workers
                    .iter()
                    .all(|w| w.heartbeat_age.is_some_and(|a| a >= 1.2))
        },
    );
    if during.workers.iter().any(|w| w.lost) {
        panic!(
            "a worker was declared lost during a cut shorter than worker_timeout:\n{}\n{}",
            during.text,
            cluster.logs(&[&reader])
        );
    }
    let held = cut.elapsed();
    cluster.net.heal(&cluster.dispatcher_host, &workers);
    let healed = Instant::now();
    let after = cluster.wait_status(
        "heartbeats again",
        Duration::from_secs(30),
        &[&reader],
        |s| {
            s.workers
                .iter()
                .all(|w| !w.lost && w.heartbeat_age.is_some_and(|a| a < 0.5))
        },
    );
    let resumed_after = healed.elapsed();
    let unchanged: Vec<_> = running(&before)
        .into_iter()
        .filter(|t| after.tasks.iter().any(|a| a.id == t.0 && a.worker == t.1))
        .collect();
    assert_eq!(
        unchanged,
        running(&before),
        "tasks moved:\n{}\n{}",
        before.text,
        after.text
    );
    assert!(
        running(&after).iter().all(|t| running(&before).contains(t)),
        "new tasks after a short cut:\n{}\n{}",
        before.text,
        after.text
    );
    let lines = finish_read(&cluster, &mut reader, Duration::from_secs(90));
    check_exactly(&counts(&lines), n, 1, "dispatcher cut briefly");
    report(&format!(
        "dispatcher cut off from the workers for {} (< worker_timeout 5 s): none lost, \
         same tasks, heartbeats back {} after the heal; {n} elements exactly once",
        secs(held),
        secs(resumed_after)
    ));

    // Longer than worker_timeout.
    let mut reader = cluster.read(&id, "distributed_epoch");
    wait_for_elements(&cluster, &reader, 300, Duration::from_secs(60));
    cluster.net.partition(&cluster.dispatcher_host, &workers);
    let cut = Instant::now();
    mid_read(&mut reader, n);
    cluster.wait_status(
        "both workers lost",
        Duration::from_secs(20),
        &[&reader],
        |s| s.workers.iter().all(|w| w.lost),
    );
    let lost_after = cut.elapsed();
    cluster.net.heal(&cluster.dispatcher_host, &workers);
    let healed = Instant::now();
    cluster.wait_status(
        "both workers revived",
        Duration::from_secs(60),
        &[&reader],
        |s| s.workers.iter().all(|w| !w.lost),
    );
    let revived_after = healed.elapsed();
    let lines = finish_read(&cluster, &mut reader, Duration::from_secs(90));
    let twice = check_none_lost(&counts(&lines), n, 1, "dispatcher cut for longer");
    report(&format!(
        "dispatcher cut off from the workers: both declared lost {} after the cut, \
         revived {} after the heal; all {n} read, none lost, {twice} twice",
        secs(lost_after),
        secs(revived_after)
    ));
}

/// The reader unplugged mid-read for 3 s (well within `client_timeout`)
/// and plugged back in: its connections stall and resume, and it reads
/// every element exactly once.
#[test]
fn a_reader_cut_off_and_healed_reads_everything_exactly_once() {
    sandbox::run(
        "a_reader_cut_off_and_healed_reads_everything_exactly_once",
        reader_cut_off,
    );
}

fn reader_cut_off() {
    let cluster = Cluster::start(Layout {
        workers: 2,
        dispatcher_args: &[],
        delay_proxy: None,
    });
    let n = 200_000; // long enough to be mid-read at the cut (splits are leased)
    let id = cluster.register(&format!(r#"{{"op": "range", "stop": {n}}}"#));
    let mut reader = cluster.read(&id, "distributed_epoch");
    wait_for_elements(&cluster, &reader, 300, Duration::from_secs(60));
    cluster.net.unplug(&cluster.reader_host);
    let cut = Instant::now();
    let read_at_cut = mid_read(&mut reader, n);
    // Held 3 s, and until the reader has printed nothing for 1 s: it has
    // used up what it had received and is starved.
    let mut last = (reader.stdout_len(), Instant::now());
    let at_heal = wait_until(
        "the reader starved",
        Duration::from_secs(20),
        &cluster.everyone(&[&reader]),
        || {
            let now = reader.stdout_len();
            if now != last.0 {
                last = (now, Instant::now());
            }
            (cut.elapsed() >= Duration::from_secs(3) && last.1.elapsed() >= Duration::from_secs(1))
                .then_some(now)
        },
    );
    mid_read(&mut reader, n);
    cluster.net.plug(&cluster.reader_host);
    let healed = Instant::now();
    wait_for_elements(&cluster, &reader, at_heal + 1, Duration::from_secs(60));
    let resumed_after = healed.elapsed();
    let lines = finish_read(&cluster, &mut reader, Duration::from_secs(90));
    check_exactly(&counts(&lines), n, 1, "reader cut");
    report(&format!(
        "reader cut off for {} after {read_at_cut} of {n} elements ({at_heal} when healed); \
         reading again {} after the heal; {n} elements exactly once",
        secs(healed - cut),
        secs(resumed_after)
    ));
}

/// Every link through the delay proxy (the hosts' own addresses are
/// blackholed, so there is no other path), read first with no delay and
/// then with 50 ms each way (100 ms added to every round trip). Reads stay
/// correct (multisets checked); the throughput is printed, never asserted.
#[test]
fn reads_over_links_with_50_ms_of_delay() {
    sandbox::run(
        "reads_over_links_with_50_ms_of_delay",
        links_with_50_ms_of_delay,
    );
}

fn links_with_50_ms_of_delay() {
    let proxy = DelayProxy::new(Duration::ZERO);
    let cluster = Cluster::start(Layout {
        workers: 2,
        dispatcher_args: &[],
        delay_proxy: Some(&proxy),
    });
    let status = cluster.status();
    for i in 0..2 {
        assert!(
            status.worker(&cluster.worker_address(i)).is_some(),
            "{}",
            status.text
        );
    }
    // 64 KiB elements sent uncompressed, produced whole by each worker
    // (parallel_epochs): the transfer's throughput.
    let bulk_n = 1500;
    let payload = "x".repeat(64 << 10);
    let bulk = cluster.register(&format!(
        r#"{{"compress": false, "pipeline": {{"op": "zip", "inputs": [
            {{"op": "range", "stop": {bulk_n}}},
            {{"op": "repeat", "count": {bulk_n}, "input": {{"op": "from_tensors",
              "components": [{{"dtype": "string", "values": "{payload}"}}]}}}}]}}}}"#
    ));
    // Small elements, each its own split: one dispatcher round trip
    // (GetSplit) per element.
    let split_n = 100;
    let splits = cluster.register(&format!(r#"{{"op": "range", "stop": {split_n}}}"#));
    for delay_ms in [0, 50] {
        proxy.set_delay(Duration::from_millis(delay_ms));
        for (what, id, mode, n, copies) in [
            (
                "parallel_epochs, 64 KiB elements",
                &bulk,
                "parallel_epochs",
                bulk_n,
                2,
            ),
            (
                "distributed_epoch, a split per element",
                &splits,
                "distributed_epoch",
                split_n,
                1,
            ),
        ] {
            let mut reader = cluster.read(id, mode);
            let lines = finish_read(&cluster, &mut reader, Duration::from_secs(120));
            check_exactly(&counts(&lines), n, copies, what);
            let stats = reader
                .last_log_line("read ")
                .unwrap_or_else(|| "no stats".into());
            report(&format!("{delay_ms} ms each way, {what}: {stats}"));
        }
    }
    for (host, line) in &cluster.lines {
        let connections = line.connections.load(std::sync::atomic::Ordering::SeqCst);
        let up = line.bytes_up.load(std::sync::atomic::Ordering::SeqCst);
        let down = line.bytes_down.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            connections > 0 && up > 0 && down > 0,
            "nothing went through {host}'s delay line"
        );
        report(&format!(
            "delay line to {host}: {connections} connections, {up} bytes in, {down} bytes out"
        ));
    }
}

/// Three dispatchers sharing a work_dir (high availability), each on a host
/// of its own, behind one DNS name that resolves to all three (as a
/// Kubernetes headless Service over them does). Workers and the reader are
/// given that one name; each call goes to one of its addresses, and a
/// standby's UNAVAILABLE moves the caller to the next. The leader is
/// SIGKILLed twice mid-read (and restarted as a standby): the read finishes
/// with every element exactly once (distributed_epoch).
#[test]
fn dispatchers_behind_one_dns_name_fail_over() {
    sandbox::run(
        "dispatchers_behind_one_dns_name_fail_over",
        dispatchers_behind_one_name,
    );
}

fn dispatchers_behind_one_name() {
    use netns::cluster::{DISPATCHER_PORT, FIRST_WORKER_PORT, HEARTBEAT_MS, start_worker};
    const NAME: &str = "dispatchers.tfdata.test";
    const HTTP_PORT: u16 = 8080;
    let mut net = netns::network::Network::new();
    let dispatcher_hosts: Vec<netns::network::Host> = (0..3)
        .map(|i| net.add_host(&format!("d{}", i + 1), 2 + i as u8))
        .collect();
    let worker_hosts: Vec<netns::network::Host> = (0..2)
        .map(|i| net.add_host(&format!("w{}", i + 1), 11 + i as u8))
        .collect();
    let reader_host = net.add_host("reader", 100);
    let addresses: Vec<_> = dispatcher_hosts.iter().map(|h| h.address).collect();
    let _hosts = netns::network::resolve_name(NAME, &addresses);
    let work_dir = tempfile::tempdir().unwrap();
    let work_dir_path = work_dir.path().to_str().unwrap().to_string();
    let start_dispatcher = |host: &netns::network::Host| {
        let advertised = format!("{}:{DISPATCHER_PORT}", host.address);
        let (port, http_port) = (DISPATCHER_PORT.to_string(), HTTP_PORT.to_string());
        let args = [
            "dispatcher",
            "--port",
            &port,
            "--work-dir",
            &work_dir_path,
            "--fault-tolerant-mode",
            "--leader-lease-ms",
            "2000",
            "--advertised-address",
            &advertised,
            "--http-port",
            &http_port,
            "--worker-timeout-ms",
            "10000",
        ];
        Process::spawn(&format!("dispatcher {}", host.name), host.tfdata(&args))
    };
    let mut dispatchers: Vec<Option<Process>> = dispatcher_hosts
        .iter()
        .map(|h| Some(start_dispatcher(h)))
        .collect();
    // The leader: the one dispatcher whose /readyz passes.
    let leader = |dispatchers: &[Option<Process>], limit: Duration| -> usize {
        let deadline = Instant::now() + limit;
        loop {
            let ready: Vec<usize> = (0..dispatchers.len())
                .filter(|i| {
                    dispatchers[*i].is_some()
                        && common::ready(std::net::SocketAddr::from((addresses[*i], HTTP_PORT)))
                })
                .collect();
            assert!(ready.len() <= 1, "several dispatchers ready: {ready:?}");
            if let Some(&i) = ready.first() {
                return i;
            }
            let logs: Vec<String> = dispatchers.iter().flatten().map(|p| p.logs()).collect();
            assert!(
                Instant::now() < deadline,
                "no dispatcher became the leader\n{}",
                logs.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    leader(&dispatchers, Duration::from_secs(30));
    let service = format!("grpc://{NAME}:{DISPATCHER_PORT}");
    let by_name = format!("{NAME}:{DISPATCHER_PORT}");
    let _workers: Vec<Process> = worker_hosts
        .iter()
        .zip(FIRST_WORKER_PORT..)
        .map(|(host, port)| start_worker(host, host.address, port, &by_name))
        .collect();
    // Every element is a split, leased by up to a thousand per GetSplit:
    // the read needs the leader all along, and stalls while there is none.
    let n = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("pipeline.json");
    std::fs::write(&pipeline, format!(r#"{{"op": "range", "stop": {n}}}"#)).unwrap();
    let register = [
        "register",
        "--service",
        &service,
        "--pipeline",
        pipeline.to_str().unwrap(),
    ];
    let mut registering = Process::spawn("register", reader_host.tfdata(&register));
    assert!(
        registering
            .wait_exit(Duration::from_secs(60))
            .is_some_and(|s| s.success()),
        "{}",
        registering.logs()
    );
    let id = registering.stdout_lines()[0].clone();
    let read = [
        "read",
        "--service",
        &service,
        "--dataset-id",
        &id,
        "--processing-mode",
        "distributed_epoch",
        "--task-refresh-interval-ms",
        HEARTBEAT_MS,
    ];
    let mut reader = Process::spawn("reader", reader_host.tfdata(&read));
    let everyone = |dispatchers: &[Option<Process>], reader: &Process| -> String {
        let mut logs: Vec<String> = dispatchers.iter().flatten().map(|p| p.logs()).collect();
        logs.extend(_workers.iter().map(|w| w.logs()));
        logs.push(reader.logs());
        logs.join("\n")
    };
    let mut failovers = Vec::new();
    let mut want = 300;
    for _ in 0..2 {
        let deadline = Instant::now() + Duration::from_secs(60);
        while reader.stdout_len() < want {
            assert!(
                Instant::now() < deadline,
                "the reader did not read {want} elements\n{}",
                everyone(&dispatchers, &reader)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let old = leader(&dispatchers, Duration::from_secs(30));
        let read_at_kill = mid_read(&mut reader, n);
        let killed_at = Instant::now();
        drop(dispatchers[old].take()); // SIGKILL
        let new = leader(&dispatchers, Duration::from_secs(30));
        let took = killed_at.elapsed();
        report(&format!(
            "leader {} SIGKILLed after {read_at_kill} of {n} elements: {} leads after {}",
            dispatcher_hosts[old].name,
            dispatcher_hosts[new].name,
            secs(took)
        ));
        failovers.push(took);
        dispatchers[old] = Some(start_dispatcher(&dispatcher_hosts[old]));
        want = read_at_kill + 1000;
    }
    let status = reader.wait_exit(Duration::from_secs(120));
    assert!(
        status.is_some_and(|s| s.success()),
        "the read ended with {status:?}\n{}",
        everyone(&dispatchers, &reader)
    );
    check_exactly(
        &counts(&reader.stdout_lines()),
        n,
        1,
        "across failovers by name",
    );
    report(&format!(
        "{n} elements exactly once through {NAME} (3 addresses) across {} failovers: {failovers:?}",
        failovers.len()
    ));
}
