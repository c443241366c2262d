//! The supervisor's loop driven by a made-up process tree under tokio's
//! paused time: the agent's output goes through real pipes, but its
//! processes, its shim's reports and the signals are the test's, so every
//! instant is exact and nothing waits for real time.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::net::unix::pipe;
use tokio::sync::{Notify, mpsc};
use tokio::time::sleep_until;
use warden_events::Agent;
use warden_process::resources::Applied;
use warden_process::{Containment, ProcessInfo, ResourceEvents, ShimMessage, Signal};

use super::tree::Tree;
use super::{Control, Setup, Supervisor};
use crate::artifacts::RunDir;
use crate::clocks::now;
use crate::limits::Limits;
use crate::pipe::Reader;
use crate::report::Report;
use crate::verdict::Verdict;

/// The agent's pid; its other processes follow. Beyond any pid_max, so
/// that no look into /proc finds a real process under them.
const AGENT: i32 = 5_000_001;
const ORPHAN: i32 = 5_000_002;

/// What happens to the made-up run at an instant.
enum Happening {
    /// The agent exits with `code`: the shim reaps it and reports it.
    Exit(i32),
    /// The shim's channel closes (the shim died).
    ShimGone,
    /// Any other report of the shim.
    Report(ShimMessage),
}

/// The made-up run: its processes, the writing ends of the agent's pipes,
/// what is to happen when, and the signals it got.
struct World {
    alive: Vec<ProcessInfo>,
    /// The processes that keep the agent's pipes open; the pipes close
    /// when the last of them dies.
    pipe_holders: Vec<i32>,
    stdout: Option<pipe::Sender>,
    stderr: Option<pipe::Sender>,
    /// Processes that outlive SIGTERM.
    deaf: Vec<i32>,
    /// Sorted by instant; what a signal causes is due at once.
    script: VecDeque<(Instant, Happening)>,
    shim_gone: bool,
    signals: Vec<(Signal, Vec<i32>)>,
}

impl World {
    fn process(pid: i32, cmdline: &str) -> ProcessInfo {
        ProcessInfo {
            pid,
            cmdline: cmdline.into(),
        }
    }

    fn at(&mut self, at: Instant, what: Happening) {
        let i = self.script.partition_point(|(t, _)| *t <= at);
        self.script.insert(i, (at, what));
    }

    /// `pid` dies: the pipes close with their last holder, and the shim
    /// reports the agent's end (and, once nothing is left, that).
    fn dies(&mut self, pid: i32, code: Option<i32>, signal: Option<i32>) {
        if !self.alive.iter().any(|p| p.pid == pid) {
            return;
        }
        self.alive.retain(|p| p.pid != pid);
        self.pipe_holders.retain(|p| *p != pid);
        if self.pipe_holders.is_empty() {
            self.stdout = None;
            self.stderr = None;
        }
        if pid == AGENT {
            let at = now();
            self.at(at, Happening::Report(ShimMessage::Exited { code, signal }));
        }
        if self.alive.is_empty() {
            let at = now();
            self.at(at, Happening::Report(ShimMessage::Empty));
        }
    }

    /// The next report of the shim, if one is due by now; `Err` with the
    /// instant of the next one otherwise.
    fn due(&mut self) -> Result<Option<ShimMessage>, Option<Instant>> {
        match self.script.front() {
            None if self.shim_gone => Ok(None),
            None => Err(None),
            Some((at, _)) if *at > now() => Err(Some(*at)),
            Some(_) => match self.script.pop_front().map(|(_, h)| h) {
                Some(Happening::Exit(code)) => {
                    self.dies(AGENT, Some(code), None);
                    self.due()
                }
                Some(Happening::ShimGone) => {
                    self.shim_gone = true;
                    self.script.clear();
                    Ok(None)
                }
                Some(Happening::Report(m)) if !self.shim_gone => Ok(Some(m)),
                Some(Happening::Report(_)) | None => self.due(),
            },
        }
    }
}

/// The process tree of the made-up run, as the supervisor holds it.
struct FakeTree {
    world: Arc<Mutex<World>>,
    /// Rung when the test adds to the script.
    changed: Arc<Notify>,
    stdout: Option<Reader>,
    stderr: Option<Reader>,
}

fn lock(world: &Mutex<World>) -> MutexGuard<'_, World> {
    world.lock().unwrap_or_else(|e| e.into_inner())
}

impl Tree for FakeTree {
    fn agent_pid(&self) -> i32 {
        AGENT
    }

    fn containment(&self) -> Containment {
        Containment::Subreaper
    }

    fn limits_applied(&self) -> &[Applied] {
        &[]
    }

    fn resource_events(&self) -> ResourceEvents {
        ResourceEvents::default()
    }

    fn take_output(&mut self) -> (Option<Reader>, Option<Reader>) {
        (self.stdout.take(), self.stderr.take())
    }

    fn next_message(&mut self) -> impl Future<Output = Option<ShimMessage>> + Send {
        let world = self.world.clone();
        let changed = self.changed.clone();
        async move {
            loop {
                let rung = changed.notified();
                let next = lock(&world).due();
                match next {
                    Ok(m) => return m,
                    Err(Some(at)) => {
                        tokio::select! {
                            () = sleep_until(at.into()) => {}
                            () = rung => {}
                        }
                    }
                    Err(None) => rung.await,
                }
            }
        }
    }

    fn pids(&self) -> Vec<i32> {
        lock(&self.world).alive.iter().map(|p| p.pid).collect()
    }

    fn processes(&self) -> Vec<ProcessInfo> {
        lock(&self.world).alive.clone()
    }

    fn holds_output(&self, pid: i32) -> bool {
        lock(&self.world).pipe_holders.contains(&pid)
    }

    fn pipe_holders(&self) -> Vec<ProcessInfo> {
        let w = lock(&self.world);
        w.alive
            .iter()
            .filter(|p| w.pipe_holders.contains(&p.pid))
            .cloned()
            .collect()
    }

    fn signal_all(&self, signal: Signal) -> Vec<ProcessInfo> {
        let mut w = lock(&self.world);
        let hit = w.alive.clone();
        if !hit.is_empty() {
            w.signals
                .push((signal, hit.iter().map(|p| p.pid).collect()));
        }
        let number = match signal {
            Signal::Term => 15,
            _ => 9,
        };
        for p in &hit {
            if signal == Signal::Term && w.deaf.contains(&p.pid) {
                continue;
            }
            w.dies(p.pid, None, Some(number));
        }
        self.changed.notify_one();
        hit
    }

    fn outside_cgroup(&self, _: i32) -> Option<std::path::PathBuf> {
        None
    }

    fn close(&mut self) -> impl Future<Output = Vec<(ProcessInfo, bool)>> + Send {
        let mut w = lock(&self.world);
        w.shim_gone = true;
        w.alive.clear();
        w.stdout = None;
        w.stderr = None;
        std::future::ready(Vec::new())
    }
}

/// A made-up run under way: what the test does to it, and its end.
struct Run {
    world: Arc<Mutex<World>>,
    changed: Arc<Notify>,
    control: mpsc::UnboundedSender<Control>,
    task: tokio::task::JoinHandle<Report>,
    t0: Instant,
    _dir: tempfile::TempDir,
}

impl Run {
    /// Starts the supervisor on an agent alone in its tree, with `limits`
    /// and `others` beside it (which hold the pipes too).
    fn start(agent: Agent, limits: Limits, others: &[ProcessInfo]) -> Run {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = RunDir::create(&tmp.path().join("run")).expect("the run directory");
        let t0 = now();
        let (out_tx, out_rx) = pipe::pipe().expect("a pipe");
        let (err_tx, err_rx) = pipe::pipe().expect("a pipe");
        let mut alive = vec![World::process(AGENT, "agent --work")];
        alive.extend(others.iter().cloned());
        let world = Arc::new(Mutex::new(World {
            pipe_holders: alive.iter().map(|p| p.pid).collect(),
            alive,
            stdout: Some(out_tx),
            stderr: Some(err_tx),
            deaf: Vec::new(),
            script: VecDeque::new(),
            shim_gone: false,
            signals: Vec::new(),
        }));
        let changed = Arc::new(Notify::new());
        let tree = FakeTree {
            world: world.clone(),
            changed: changed.clone(),
            stdout: Some(Box::pin(out_rx)),
            stderr: Some(Box::pin(err_rx)),
        };
        let supervisor = Supervisor::new(setup(agent, limits, tmp.path(), t0), dir, None);
        let (control, control_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(supervisor.run(tree, control_rx));
        Run {
            world,
            changed,
            control,
            task,
            t0,
            _dir: tmp,
        }
    }

    fn secs(&self, s: f64) -> Instant {
        self.t0 + Duration::from_secs_f64(s)
    }

    /// Makes `what` happen `s` seconds after the start.
    fn at(&self, s: f64, what: Happening) {
        lock(&self.world).at(self.secs(s), what);
        self.changed.notify_one();
    }

    /// Writes `lines` to the agent's stdout, `s` seconds after the start.
    async fn says(&self, s: f64, lines: &[&str]) {
        sleep_until(self.secs(s).into()).await;
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let w = lock(&self.world);
        let out = w.stdout.as_ref().expect("stdout is open");
        assert_eq!(out.try_write(text.as_bytes()).ok(), Some(text.len()));
    }

    /// Sends `c` to the supervisor `s` seconds after the start.
    async fn control(&self, s: f64, c: Control) {
        sleep_until(self.secs(s).into()).await;
        self.control.send(c).expect("the supervisor listens");
    }

    fn deaf_to_sigterm(&self, pid: i32) {
        lock(&self.world).deaf.push(pid);
    }

    /// The report, and the events of `events.jsonl`.
    async fn end(&mut self) -> (Report, Vec<serde_json::Value>) {
        let report = (&mut self.task).await.expect("the supervisor ends");
        let text =
            std::fs::read_to_string(report.run_dir.join("events.jsonl")).expect("events.jsonl");
        let events = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("an event"))
            .collect();
        (report, events)
    }

    fn signals(&self) -> Vec<(Signal, Vec<i32>)> {
        lock(&self.world).signals.clone()
    }
}

fn setup(agent: Agent, limits: Limits, cwd: &Path, started: Instant) -> Setup {
    Setup {
        run_id: "test-run".into(),
        agent,
        command: vec!["agent".into(), "--work".into()],
        cwd: cwd.to_path_buf(),
        limits,
        started,
        started_at: SystemTime::now(),
        redactor: warden_events::Redactor::new(Vec::new()),
        sandbox: warden_sandbox::Sandbox::Host,
        containment_extra: None,
        on_kill: None,
        git: None,
        output: None,
        env_dropped: Vec::new(),
        shared: crate::plan::Shared::default(),
        container: None,
        codex_home: None,
    }
}

fn limits() -> Limits {
    Limits {
        timeout: Some(Duration::from_secs(100)),
        stall_timeout: Some(Duration::from_secs(60)),
        startup_timeout: Some(Duration::from_secs(30)),
        completion_timeout: Some(Duration::from_secs(10)),
        kill_grace: Duration::from_secs(3),
        drain_grace: Duration::from_secs(5),
        ..Limits::default()
    }
}

fn kinds(events: &[serde_json::Value]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .filter(|k| *k != "status" && *k != "lines")
        .collect()
}

fn secs_of(report: &Report) -> f64 {
    report.duration_ms as f64 / 1000.0
}

#[tokio::test(start_paused = true)]
async fn an_exit_in_the_same_instant_as_the_run_deadline_wins() {
    // The loop polls its inputs in a random order: run it often enough
    // that the deadline is picked first in some of the runs.
    for _ in 0..16 {
        let l = Limits {
            timeout: Some(Duration::from_secs(10)),
            ..limits()
        };
        let mut run = Run::start(Agent::Exec, l, &[]);
        // The shim's report is there when the run clock fires.
        run.at(10.0, Happening::Exit(0));
        run.says(1.0, &["working"]).await;
        let (report, events) = run.end().await;
        assert_eq!(
            report.verdict,
            Some(Verdict::Succeeded),
            "{}",
            report.reason
        );
        assert_eq!(report.reason, "exited with code 0");
        assert!(!report.ended_by_warden);
        assert_eq!(secs_of(&report), 10.0);
        let kinds = kinds(&events);
        assert!(!kinds.contains(&"terminating"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"finished"), "{kinds:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_shim_that_dies_first_ends_the_run_with_its_exit_unknown() {
    let mut run = Run::start(Agent::Exec, limits(), &[]);
    run.at(2.0, Happening::ShimGone);
    run.says(1.0, &["working"]).await;
    let (report, events) = run.end().await;
    assert_eq!(
        report.verdict,
        Some(Verdict::InternalError),
        "{}",
        report.reason
    );
    assert_eq!(report.reason, "the agent's exit status is unknown");
    let error = report.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("the run's shim exited before the agent did"),
        "{error}"
    );
    assert_eq!(report.exit_code, None);
    // Without its shim the run is killed at once, not after a grace.
    assert_eq!(run.signals(), vec![(Signal::Kill, vec![AGENT])]);
    assert_eq!(secs_of(&report), 2.0);
    assert!(!kinds(&events).contains(&"exited"), "{:?}", kinds(&events));
}

#[tokio::test(start_paused = true)]
async fn a_cancel_during_the_drain_kills_the_holder_and_keeps_the_agents_verdict() {
    let holder = World::process(ORPHAN, "sleep 900");
    let mut run = Run::start(Agent::Exec, limits(), std::slice::from_ref(&holder));
    // An orphan that ignores SIGTERM keeps the pipes open after the exit.
    run.deaf_to_sigterm(ORPHAN);
    run.at(2.0, Happening::Exit(0));
    run.says(1.0, &["working", "done"]).await;
    run.control(3.0, Control::Cancel).await;
    let (report, events) = run.end().await;
    let signals = run.signals();
    assert_eq!(
        report.verdict,
        Some(Verdict::Succeeded),
        "{}",
        report.reason
    );
    assert_eq!(report.exit_code, Some(0));
    assert!(!report.ended_by_warden, "the agent had ended by itself");
    assert_eq!(report.orphans.len(), 1, "{:?}", report.orphans);
    assert_eq!(report.orphans[0].pid, ORPHAN);
    assert!(report.orphans[0].held_pipe);
    assert!(
        report.output_truncated.is_none(),
        "the kill closed the pipes before the drain ran out"
    );
    // SIGTERM to the orphan at the exit; SIGKILL at the cancel, well
    // before the drain window (5 s) would have run out.
    assert_eq!(
        signals,
        vec![(Signal::Term, vec![ORPHAN]), (Signal::Kill, vec![ORPHAN])]
    );
    assert_eq!(secs_of(&report), 3.0);
    let kinds = kinds(&events);
    assert!(!kinds.contains(&"terminating"), "{kinds:?}");
    assert!(kinds.contains(&"orphan"), "{kinds:?}");
}

/// pi's lines: a model call that cost `cost` dollars and said `text`
/// (none: only its usage, which is not work).
fn pi_message(cost: f64, text: Option<&str>) -> String {
    let content = text.map_or(String::new(), |t| {
        format!(r#"{{"type":"text","text":"{t}"}}"#)
    });
    format!(
        r#"{{"type":"message_end","message":{{"role":"assistant","content":[{content}],"stopReason":"stop","usage":{{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{{"total":{cost}}}}}}}}}"#
    )
}

#[tokio::test(start_paused = true)]
async fn a_budget_crossed_in_the_completion_window_counts_as_the_agent_ended() {
    let mut l = limits();
    l.budget.max_cost_usd = crate::budget::Usd::from_dollars(1.0);
    let mut run = Run::start(Agent::Pi, l, &[]);
    run.at(4.0, Happening::Exit(0));
    let first = pi_message(0.5, Some("done"));
    run.says(
        1.0,
        &[
            r#"{"type":"agent_start"}"#,
            r#"{"type":"turn_start"}"#,
            &first,
            r#"{"type":"agent_end","messages":[]}"#,
        ],
    )
    .await;
    // The agent said it is done; the usage it reports after that (no
    // work) crosses the budget.
    let last = pi_message(0.7, None);
    run.says(2.0, &[&last]).await;
    let (report, events) = run.end().await;
    assert_eq!(
        report.verdict,
        Some(Verdict::BudgetExceeded),
        "{}",
        report.reason
    );
    assert!(
        report.reason.contains("counted as the agent ended"),
        "{}",
        report.reason
    );
    assert!(!report.ended_by_warden, "the run was not cut short");
    assert!(!report.forced_completion);
    assert_eq!(report.exit_code, Some(0));
    assert_eq!(secs_of(&report), 4.0, "it ended when the agent exited");
    let kinds = kinds(&events);
    assert!(!kinds.contains(&"terminating"), "{kinds:?}");
    let hit = report.budget_exceeded.expect("the budget exceeded");
    assert!((hit.reached - 1.2).abs() < 1e-9, "{hit:?}");
}

/// Claude Code meeting a 401 while a tool runs.
const CLAUDE_INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#;
const CLAUDE_TOOL: &str = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"make test","timeout":600000}}]},"parent_tool_use_id":null}"#;
const CLAUDE_401: &str = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed","session_id":"s1"}"#;

#[tokio::test(start_paused = true)]
async fn a_fatal_error_during_a_tool_ends_the_run_after_its_grace() {
    let mut run = Run::start(Agent::Claude, limits(), &[]);
    run.says(1.0, &[CLAUDE_INIT, CLAUDE_TOOL]).await;
    run.says(2.0, &[CLAUDE_401]).await;
    let (report, events) = run.end().await;
    assert_eq!(
        report.verdict,
        Some(Verdict::AgentFailed),
        "{}",
        report.reason
    );
    assert!(
        report
            .reason
            .contains("retrying will not fix (authentication)"),
        "{}",
        report.reason
    );
    assert!(report.ended_by_warden);
    // The open tool's declared limit stretches the stall clock, not the
    // fatal error's grace: SIGTERM goes out 2 s after the error, and the
    // agent ends on it.
    assert_eq!(
        secs_of(&report),
        2.0 + crate::defaults::FATAL_ERROR_GRACE.as_secs_f64()
    );
    assert_eq!(report.signal, Some(15));
    assert_eq!(report.stall_warnings, 0);
    let kinds = kinds(&events);
    assert_eq!(
        kinds.iter().filter(|k| **k == "terminating").count(),
        1,
        "{kinds:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stall_is_warned_of_then_ended_with_sigterm_and_sigkill_after_the_grace() {
    let mut run = Run::start(Agent::Exec, limits(), &[]);
    run.deaf_to_sigterm(AGENT);
    run.says(1.0, &["working"]).await;
    let (report, events) = run.end().await;
    assert_eq!(report.verdict, Some(Verdict::Stalled), "{}", report.reason);
    assert_eq!(report.stall_warnings, 1);
    // Silent from 1 s: the stall clock (60 s) fires at 61 s, SIGKILL
    // follows the kill grace (3 s).
    assert_eq!(
        run.signals(),
        vec![(Signal::Term, vec![AGENT]), (Signal::Kill, vec![AGENT])]
    );
    assert_eq!(secs_of(&report), 64.0);
    assert_eq!(report.signal, Some(9));
    let kinds = kinds(&events);
    let milestones: Vec<&str> = kinds
        .into_iter()
        .filter(|k| ["stall_warning", "terminating", "exited"].contains(k))
        .collect();
    assert_eq!(milestones, ["stall_warning", "terminating", "exited"]);
}

const CLAUDE_RESULT: &str =
    r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s1"}"#;

#[tokio::test(start_paused = true)]
async fn an_agent_that_said_it_is_done_and_hangs_is_ended_with_the_verdict_it_earned() {
    let mut run = Run::start(Agent::Claude, limits(), &[]);
    run.says(1.0, &[CLAUDE_INIT, CLAUDE_RESULT]).await;
    let (report, _) = run.end().await;
    assert_eq!(
        report.verdict,
        Some(Verdict::Succeeded),
        "{}",
        report.reason
    );
    assert!(report.forced_completion);
    assert!(report.ended_by_warden);
    // The completion window (10 s) runs from the last line.
    assert_eq!(secs_of(&report), 11.0);
    assert_eq!(report.hanging.len(), 1, "{:?}", report.hanging);
    assert_eq!(report.hanging[0].pid, AGENT);
}
