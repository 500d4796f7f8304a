//! The leader lease on a real local directory and on a real S3 server
//! (moto, started per test by the io tests' harness), with the same
//! scenarios on both: contenders racing for each generation, renewals,
//! expiry and takeover, the deposed leader's fence, and records that must
//! not be taken over.
//!
//! Every contender has its own client (object stores) or its own file
//! handles (local), as separate dispatchers would; contenders race as
//! concurrent tasks on a multi-threaded runtime. The two-process test on a
//! local directory runs this test binary itself as the other contender.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

#[path = "../../tfdata-dataset/tests/io_object_store_moto/mod.rs"]
mod moto;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use moto::Moto;
use tfdata_core::Error;
use tfdata_dispatcher::persistence::leader_lease::storage::Swap;
use tfdata_dispatcher::persistence::leader_lease::{
    Fence, LEASE_NAME, LeaderLease, LeaseConfig, LeaseRecord, LeaseStorage, Role,
};

/// Short leases so that expiry takes a fraction of a second; the margin is
/// generous because two other builds may share the machine's cores.
fn config() -> LeaseConfig {
    LeaseConfig {
        duration: Duration::from_millis(600),
        renew_interval: Duration::from_millis(50),
        safety_margin: Duration::from_millis(200),
    }
}

/// Longest any wait for a lease change may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// Makes contenders (each with its own storage handle) on one lease.
type Contenders = Box<dyn Fn(&str) -> LeaderLease + Send + Sync>;

/// A local directory's lease, and the directory (kept alive).
fn local() -> (tempfile::TempDir, Contenders) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let make: Contenders =
        Box::new(move |addr| LeaderLease::local(path.clone(), addr, config()).unwrap());
    (dir, make)
}

/// A lease at `s3://<bucket>/dispatcher/leader_lease` on a fresh moto, each
/// contender with its own client built by the io layer (so the client
/// configuration dispatchers use is the one checked for conditional puts);
/// `None` when moto is missing (skipped).
fn on_moto(bucket: &str) -> Option<(Moto, Contenders)> {
    let moto = Moto::start()?;
    moto.create_bucket(bucket);
    let options = moto.options();
    let url = format!("s3://{bucket}/dispatcher/{LEASE_NAME}");
    let make: Contenders = Box::new(move |addr| {
        let fs = tfdata_dataset::io::ObjectStoreFileSystem::without_env()
            .with_options(options.clone())
            .unwrap();
        let (store, key) = fs.object_store(&url).unwrap();
        LeaderLease::object_store(store, key, &url, addr, config()).unwrap()
    });
    Some((moto, make))
}

/// The storage of a contender made by `make`, for planting records.
fn storage_of(make: &Contenders) -> LeaseStorage {
    make("probe:0").storage().clone()
}

async fn tick_until_leader(lease: &mut LeaderLease) -> Fence {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Role::Leader(fence) = lease.tick().await.unwrap() {
            return fence;
        }
        assert!(Instant::now() < deadline, "{} never led", lease.holder());
        tokio::time::sleep(lease.config().renew_interval).await;
    }
}

// ---------------------------------------------------------------- scenarios

/// Three contenders start together; the leader of each generation is then
/// stopped (it stops ticking, as a dead process) and the other two race for
/// the next. Exactly one holder per generation, generations 1, 2, 3 in
/// order, and the stopped leader's fence fails once it is replaced.
async fn one_leader_per_generation(make: Contenders) {
    let leaders: Arc<Mutex<BTreeMap<u64, BTreeSet<String>>>> = Arc::default();
    let start = Arc::new(tokio::sync::Barrier::new(3));
    let mut stops = BTreeMap::new();
    let mut tasks = Vec::new();
    for i in 0..3 {
        let stop = Arc::new(AtomicBool::new(false));
        let mut lease = make(&format!("10.0.0.{i}:5050"));
        stops.insert(lease.holder().to_string(), Arc::clone(&stop));
        let (leaders, start) = (Arc::clone(&leaders), Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let mut last_fence = None;
            while !stop.load(Ordering::SeqCst) {
                match lease.tick().await.unwrap() {
                    Role::Leader(fence) => {
                        leaders
                            .lock()
                            .unwrap()
                            .entry(fence.generation())
                            .or_default()
                            .insert(lease.holder().to_string());
                        last_fence = Some(fence);
                    }
                    Role::Follower { .. } => {}
                }
                tokio::time::sleep(lease.config().renew_interval).await;
            }
            (lease, last_fence)
        }));
    }
    let mut stopped = Vec::new();
    for generation in 1..=3u64 {
        let deadline = Instant::now() + PATIENCE;
        let holder = loop {
            if let Some(holders) = leaders.lock().unwrap().get(&generation) {
                break holders.iter().next().unwrap().clone();
            }
            assert!(
                Instant::now() < deadline,
                "no leader of generation {generation}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        if generation < 3 {
            stops[&holder].store(true, Ordering::SeqCst);
            stopped.push(holder);
        }
    }
    for stop in stops.values() {
        stop.store(true, Ordering::SeqCst);
    }
    let mut finished = Vec::new();
    for task in tasks {
        finished.push(task.await.unwrap());
    }
    let leaders = leaders.lock().unwrap().clone();
    assert_eq!(
        leaders.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3],
        "{leaders:?}"
    );
    for (generation, holders) in &leaders {
        assert_eq!(holders.len(), 1, "generation {generation}: {holders:?}");
    }
    // The stopped leaders' last fences are dead: they were not renewed,
    // and a newer generation exists.
    for (lease, fence) in &finished {
        if stopped.iter().any(|h| h == lease.holder()) {
            let fence = fence.as_ref().unwrap();
            assert!(fence.generation() < 3);
            let err = fence.check().unwrap_err();
            assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
        }
    }
}

/// A leader that keeps renewing keeps the lease for many durations; the
/// follower sees it, with its address, and never takes over.
async fn renewals_keep_the_lease(make: Contenders) {
    let mut leader = make("leader:1");
    let mut follower = make("follower:2");
    let fence = tick_until_leader(&mut leader).await;
    assert_eq!(fence.generation(), 1);
    let until = Instant::now() + 4 * config().duration;
    let mut renewals = 0;
    while Instant::now() < until {
        match leader.tick().await.unwrap() {
            Role::Leader(f) => assert_eq!(f.generation(), 1),
            role => panic!("the leader lost the lease: {role:?}"),
        }
        renewals += 1;
        fence.check().unwrap();
        leader.check_still_leader().unwrap();
        match follower.tick().await.unwrap() {
            Role::Follower {
                leader: Some(record),
                takeover_in,
            } => {
                assert_eq!(record.holder, leader.holder());
                assert_eq!(record.address, "leader:1");
                assert_eq!(record.generation, 1);
                assert!(takeover_in <= config().duration);
            }
            role => panic!("the follower took over a renewed lease: {role:?}"),
        }
        assert!(follower.check_still_leader().is_err());
        tokio::time::sleep(config().renew_interval).await;
    }
    assert!(renewals > 10, "{renewals}");
}

/// A leader paused past its lease: its fence fails on its own clock before
/// anyone could take over, a follower takes generation 2, and when the old
/// leader resumes its renewal finds the lease taken and reports the new
/// leader; its fence stays dead.
async fn a_paused_leader_is_fenced(make: Contenders) {
    let mut old = make("old:1");
    let mut new = make("new:2");
    let old_fence = tick_until_leader(&mut old).await;
    let paused_at = Instant::now();
    // The follower must see the record unchanged for a whole duration
    // (ticks starting now); the old leader's fence expires first.
    let deadline = Instant::now() + PATIENCE;
    let new_fence = loop {
        if let Role::Leader(fence) = new.tick().await.unwrap() {
            break fence;
        }
        assert!(Instant::now() < deadline, "the follower never took over");
        tokio::time::sleep(config().renew_interval).await;
    };
    assert!(
        paused_at.elapsed() >= config().duration,
        "took over after {:?}",
        paused_at.elapsed()
    );
    assert_eq!(new_fence.generation(), 2);
    new_fence.check().unwrap();
    let err = old_fence.check().unwrap_err().to_string();
    assert!(err.contains("not renewed in time"), "{err}");

    // The old leader resumes: its renewal is refused by the store.
    match old.tick().await.unwrap() {
        Role::Follower {
            leader: Some(record),
            ..
        } => {
            assert_eq!(record.holder, new.holder());
            assert_eq!(record.generation, 2);
        }
        role => panic!("the deposed leader still leads: {role:?}"),
    }
    let err = old_fence.check().unwrap_err().to_string();
    assert!(err.contains("found the lease replaced"), "{err}");
    assert!(old.check_still_leader().is_err());
    assert!(old.fence().is_none());
    // And the new leader is unaffected.
    assert!(matches!(new.tick().await.unwrap(), Role::Leader(_)));
    new_fence.check().unwrap();
}

/// Records the lease cannot read are refused with a clear error and left
/// as they are, however long they stay unchanged; so is a record whose
/// generation cannot be incremented.
async fn bad_records_are_refused_and_kept(make: Contenders) {
    let storage = storage_of(&make);
    let location = storage.location();
    let garbage = Bytes::from_static(b"{\"holder\": \"mallory\", \"generation\": \"lots\"}");
    assert!(matches!(
        storage.swap(None, garbage.clone()).await.unwrap(),
        Swap::Written(_)
    ));
    let mut contender = make("c:1");
    let started = Instant::now();
    while started.elapsed() < 2 * config().duration {
        let err = contender.tick().await.unwrap_err();
        assert!(matches!(err, Error::DataLoss { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&location), "{msg}");
        assert!(msg.contains("\"format\""), "{msg}");
        tokio::time::sleep(config().renew_interval).await;
    }
    assert_eq!(storage.read().await.unwrap().unwrap().bytes, garbage);

    // A valid record at the largest generation: followed while fresh, then
    // refused rather than wrapped around to 0 or overwritten.
    let current = storage.read().await.unwrap().unwrap();
    let max = LeaseRecord::new("mallory", "m:1", u64::MAX, 0, config().duration);
    let max = Bytes::from(max.encode());
    assert!(matches!(
        storage
            .swap(Some(&current.version), max.clone())
            .await
            .unwrap(),
        Swap::Written(_)
    ));
    let mut contender = make("c:2");
    let deadline = Instant::now() + PATIENCE;
    let err = loop {
        match contender.tick().await {
            Ok(Role::Follower { leader, .. }) => {
                assert_eq!(leader.unwrap().generation, u64::MAX);
            }
            Ok(Role::Leader(f)) => panic!("took over generation {}", f.generation()),
            Err(e) => break e,
        }
        assert!(Instant::now() < deadline, "never refused");
        tokio::time::sleep(config().renew_interval).await;
    };
    assert!(err.to_string().contains("maximum"), "{err}");
    assert_eq!(storage.read().await.unwrap().unwrap().bytes, max);
}

/// The compare-and-swap itself: create only when absent, replace only the
/// version read; and of 8 contenders replacing the same version at once,
/// exactly one succeeds, round after round — where the store is atomic
/// (`atomic`). moto checks a condition and stores the object as two steps
/// of a threaded server, so two racing replacements of one version can
/// both pass its check (seen once in CI); S3 itself is atomic. On moto the
/// race only checks that some replacement wins and that the record is one
/// of the winners'.
async fn swaps_are_conditional_and_atomic(make: Contenders, atomic: bool) {
    let storage = storage_of(&make);
    let a = Bytes::from_static(b"a");
    let Swap::Written(va) = storage.swap(None, a.clone()).await.unwrap() else {
        panic!("creating the record conflicted");
    };
    assert!(matches!(
        storage.swap(None, Bytes::from_static(b"b")).await.unwrap(),
        Swap::Conflict
    ));
    assert_eq!(storage.read().await.unwrap().unwrap().bytes, a);
    let Swap::Written(vb) = storage
        .swap(Some(&va), Bytes::from_static(b"b"))
        .await
        .unwrap()
    else {
        panic!("replacing the version read conflicted");
    };
    assert!(matches!(
        storage
            .swap(Some(&va), Bytes::from_static(b"c"))
            .await
            .unwrap(),
        Swap::Conflict
    ));
    let read = storage.read().await.unwrap().unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"b"));
    assert_eq!(read.version, vb);

    let contenders: Vec<LeaseStorage> = (0..8).map(|_| storage_of(&make)).collect();
    for round in 0..15 {
        let current = storage.read().await.unwrap().unwrap().version;
        let start = Arc::new(tokio::sync::Barrier::new(contenders.len()));
        let tasks: Vec<_> = contenders
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (s, current, start) = (s.clone(), current.clone(), Arc::clone(&start));
                tokio::spawn(async move {
                    start.wait().await;
                    let mine = Bytes::from(format!("round {round} contender {i}"));
                    (mine.clone(), s.swap(Some(&current), mine).await.unwrap())
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            if let (mine, Swap::Written(_)) = task.await.unwrap() {
                winners.push(mine);
            }
        }
        if atomic {
            assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        } else {
            assert!(!winners.is_empty(), "round {round}: no contender won");
        }
        let stored = storage.read().await.unwrap().unwrap().bytes;
        assert!(
            winners.contains(&stored),
            "round {round}: {stored:?} not in {winners:?}"
        );
    }
}

// -------------------------------------------------------------- local dirs

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_swaps_are_conditional_and_atomic() {
    let (_dir, make) = local();
    swaps_are_conditional_and_atomic(make, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_one_leader_per_generation() {
    let (_dir, make) = local();
    one_leader_per_generation(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_renewals_keep_the_lease() {
    let (_dir, make) = local();
    renewals_keep_the_lease(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_a_paused_leader_is_fenced() {
    let (_dir, make) = local();
    a_paused_leader_is_fenced(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_bad_records_are_refused_and_kept() {
    let (_dir, make) = local();
    bad_records_are_refused_and_kept(make).await;
}

// ------------------------------------------------------------ S3 (moto)

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_swaps_are_conditional_and_atomic() {
    let Some((_moto, make)) = on_moto("cas") else {
        return;
    };
    swaps_are_conditional_and_atomic(make, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_one_leader_per_generation() {
    let Some((_moto, make)) = on_moto("race") else {
        return;
    };
    one_leader_per_generation(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_renewals_keep_the_lease() {
    let Some((_moto, make)) = on_moto("renew") else {
        return;
    };
    renewals_keep_the_lease(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_paused_leader_is_fenced() {
    let Some((_moto, make)) = on_moto("pause") else {
        return;
    };
    a_paused_leader_is_fenced(make).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_bad_records_are_refused_and_kept() {
    let Some((_moto, make)) = on_moto("bad") else {
        return;
    };
    bad_records_are_refused_and_kept(make).await;
}

// ------------------------------------------- two real processes, SIGSTOP

/// Set in the child processes of the two-process test: the lease
/// directory.
const CHILD_DIR: &str = "TFDATA_LEASE_TEST_CHILD_DIR";

/// How long each child contends before exiting.
const CHILD_RUN: Duration = Duration::from_secs(30);

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// The child's side (runs only when spawned by the parent test, which
/// sets [`CHILD_DIR`]): contend for the lease, printing before each tick
/// whether the last fence still holds, and each generation won, with the
/// wall clock (both processes are on this host).
#[tokio::test]
#[ignore = "run as a child process by local_two_processes_and_a_sigstopped_leader"]
async fn lease_child_process() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let mut lease = LeaderLease::local(dir, "child:1", config()).unwrap();
    let mut fence: Option<Fence> = None;
    let until = Instant::now() + CHILD_RUN;
    while Instant::now() < until {
        if let Some(f) = &fence {
            println!(
                "lease {} check {} {}",
                unix_ms(),
                f.generation(),
                f.check().is_ok()
            );
        }
        match lease.tick().await {
            Ok(Role::Leader(f)) => {
                println!("lease {} leader {}", unix_ms(), f.generation());
                fence = Some(f);
            }
            Ok(Role::Follower { .. }) => println!("lease {} follower", unix_ms()),
            Err(e) => println!("lease {} error {e}", unix_ms()),
        }
        tokio::time::sleep(config().renew_interval).await;
    }
}

/// One child process's output lines (`lease …`), collected as they come.
struct Child {
    process: std::process::Child,
    lines: Arc<Mutex<Vec<(u128, String)>>>,
}

impl Child {
    fn spawn(dir: &std::path::Path) -> Child {
        use std::io::BufRead;
        let mut process = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "lease_child_process",
                "--include-ignored",
                "--nocapture",
            ])
            .env(CHILD_DIR, dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = process.stdout.take().unwrap();
        let lines: Arc<Mutex<Vec<(u128, String)>>> = Arc::default();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Some(rest) = line.strip_prefix("lease ") else {
                    continue;
                };
                let (ms, what) = rest.split_once(' ').unwrap();
                sink.lock()
                    .unwrap()
                    .push((ms.parse().unwrap(), what.to_string()));
            }
        });
        Child { process, lines }
    }

    fn led(&self, generation: u64) -> bool {
        let want = format!("leader {generation}");
        self.lines.lock().unwrap().iter().any(|(_, l)| *l == want)
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.process.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Two dispatcher processes on one local directory: one leads generation
/// 1 and is SIGSTOPped; the other takes generation 2; the stopped one is
/// resumed and its very first fence check fails, it never leads 1 again,
/// and it follows.
#[test]
fn local_two_processes_and_a_sigstopped_leader() {
    let dir = tempfile::tempdir().unwrap();
    let children = [Child::spawn(dir.path()), Child::spawn(dir.path())];
    wait_for("a leader of generation 1", || {
        children.iter().any(|c| c.led(1))
    });
    let (old, new) = if children[0].led(1) {
        (&children[0], &children[1])
    } else {
        (&children[1], &children[0])
    };
    assert!(!new.led(1), "both processes led generation 1");
    // Stop it just after a renewal, in its sleep: a process stopped inside
    // the few milliseconds it holds the lock file would (correctly) block
    // everyone's writes, which is not what this test is about.
    let renewals = || {
        old.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, l)| l == "leader 1")
            .count()
    };
    let seen = renewals();
    wait_for("a renewal", || renewals() > seen);
    old.signal("STOP");
    wait_for("the other process to take generation 2", || new.led(2));
    let resumed_at = unix_ms();
    old.signal("CONT");
    wait_for("the resumed process to tick", || {
        old.lines
            .lock()
            .unwrap()
            .iter()
            .any(|(ms, l)| *ms > resumed_at && l.starts_with("follower"))
    });
    let after: Vec<String> = old
        .lines
        .lock()
        .unwrap()
        .iter()
        .filter(|(ms, _)| *ms > resumed_at)
        .map(|(_, l)| l.clone())
        .collect();
    let first_check = after.iter().find(|l| l.starts_with("check"));
    assert_eq!(
        first_check.map(String::as_str),
        Some("check 1 false"),
        "{after:?}"
    );
    assert!(!after.iter().any(|l| l.starts_with("leader")), "{after:?}");
    assert!(!old.led(2) && !new.led(1));
}
