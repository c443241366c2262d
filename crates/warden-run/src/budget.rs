//! Budgets: how much a run, a session or a batch may spend, in cost (USD,
//! as the agent reports it), tokens (`tokens.total`: every token the model
//! read or wrote, cache included) and turns (model calls), and the pure
//! arithmetic that says when 80% of one is spent and when it is exceeded.
//!
//! A run enforces its own [`Budget`] (`Limits::budget`) and the budgets it
//! shares with the runs before it ([`SharedBudget`]: its session's, its
//! batch's, each with what was spent against it before the run started).
//! A budget is *exceeded* when what was reached goes past its limit: the
//! model call that crossed it has been made and paid for, which is why
//! `--max-turns 3` lets three turns finish and ends the run at the fourth.
//! A session or batch starts no further run once nothing is left of a
//! budget (reached ≥ limit), since that run would exceed it at its first
//! call.
//!
//! ```no_run
//! use warden_run::budget::Usd;
//! use warden_run::{Agent, RunRequest};
//! let mut request = RunRequest::agent(Agent::Pi, "Fix the failing test");
//! request.limits.budget.max_cost_usd = Usd::from_dollars(0.50);
//! request.session.iterations = 10;
//! request.session.budget.max_turns = Some(200);
//! // A cost budget for a CLI that reports no cost is refused here.
//! request.check().unwrap();
//! ```

use serde::{Deserialize, Serialize};

pub use warden_events::{BudgetKind, BudgetScope};

/// The share of a budget at which a `budget_warning` is given.
pub const WARN_AT: f64 = 0.8;

/// A sum in US dollars, kept as whole micro-dollars, so that the types
/// that hold a limit stay `Eq`. Written as a number of dollars (`0.5`).
/// What was spent is a sum of the agent's floats: it is compared with a
/// limit in whole micro-dollars too ([`passes`], [`reaches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Usd(u64);

/// The most a budget can say: a million million dollars.
const MOST_DOLLARS: f64 = 1e12;

impl Usd {
    /// `dollars`, if it is a finite sum of at least 0 and at most 10^12.
    pub fn from_dollars(dollars: f64) -> Option<Usd> {
        (dollars.is_finite() && (0.0..=MOST_DOLLARS).contains(&dollars))
            .then(|| Usd((dollars * 1e6).round() as u64))
    }

    pub fn dollars(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl Serialize for Usd {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let dollars = f64::deserialize(d)?;
        Usd::from_dollars(dollars).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{dollars} is not a sum of dollars from 0 to {MOST_DOLLARS}"
            ))
        })
    }
}

impl schemars::JsonSchema for Usd {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Usd".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "US dollars",
            "type": "number",
            "minimum": 0.0,
        })
    }
}

/// The most a run (or a session, or a batch) may spend; `None` is no
/// limit.
#[non_exhaustive]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// USD, as the agent reports its cost (`cost_usd`).
    pub max_cost_usd: Option<Usd>,
    /// `tokens.total`: input, cache read, cache write and output.
    pub max_tokens: Option<u64>,
    /// Model calls (`turns`).
    pub max_turns: Option<u64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.limits().next().is_none()
    }

    /// Each limit set, in the budget's unit.
    pub fn limits(&self) -> impl Iterator<Item = (BudgetKind, f64)> {
        [
            (BudgetKind::Cost, self.max_cost_usd.map(Usd::dollars)),
            (BudgetKind::Tokens, self.max_tokens.map(|n| n as f64)),
            (BudgetKind::Turns, self.max_turns.map(|n| n as f64)),
        ]
        .into_iter()
        .filter_map(|(k, l)| Some((k, l?)))
    }
}

/// A sum of amounts spent (dollars, tokens, turns): `a + b`, where a value
/// that is no amount (negative, infinite, not a number: what a forged
/// report or stream says) adds nothing, and a sum too large for a float
/// stops at the largest. Never below `a` when `a` is an amount, never
/// `NaN`, so a report never writes `null` for it.
pub fn add_spent(a: f64, b: f64) -> f64 {
    (spent_or_zero(a) + spent_or_zero(b)).min(f64::MAX)
}

/// `amount` if it is an amount spent (finite, at least 0), else 0.
fn spent_or_zero(amount: f64) -> f64 {
    if amount.is_finite() && amount >= 0.0 {
        amount
    } else {
        0.0
    }
}

/// What was spent: by a run, or by the runs of a session or batch. Its
/// amounts are never negative: every way of making one drops what is not
/// an amount spent ([`add_spent`]), and one read from a file is checked.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Spent {
    #[serde(deserialize_with = "spent_dollars")]
    pub cost_usd: f64,
    /// `tokens.total`.
    pub tokens: u64,
    pub turns: u64,
}

/// `Spent::cost_usd` as read from a file: an amount of dollars spent.
fn spent_dollars<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let dollars = f64::deserialize(d)?;
    if dollars.is_finite() && dollars >= 0.0 {
        Ok(dollars)
    } else {
        Err(serde::de::Error::custom(format!(
            "`cost_usd` {dollars} is not an amount spent: it must be a finite number of dollars of at least 0"
        )))
    }
}

impl Spent {
    /// What a decoder has counted so far.
    pub(crate) fn of_summary(s: &warden_events::Summary) -> Spent {
        Spent::new(
            s.reported.cost_usd,
            s.reported.tokens.spent(),
            u64::from(s.reported.turns),
        )
    }

    /// A cost that is not an amount spent (negative, infinite, not a
    /// number) counts as none.
    pub(crate) fn new(cost_usd: Option<f64>, tokens: u64, turns: u64) -> Spent {
        Spent {
            cost_usd: spent_or_zero(cost_usd.unwrap_or(0.0)),
            tokens,
            turns,
        }
    }

    /// Adds `other`; see [`add_spent`] for a cost that is not an amount.
    pub fn add(&mut self, other: &Spent) {
        self.cost_usd = add_spent(self.cost_usd, other.cost_usd);
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.turns = self.turns.saturating_add(other.turns);
    }

    /// The same with a cost that is no amount (negative, infinite, not a
    /// number) as none: what a library caller or a request may carry.
    fn checked(&self) -> Spent {
        Spent::default().at_least(self)
    }

    /// The larger of each amount: what was spent never goes down.
    fn at_least(&self, other: &Spent) -> Spent {
        Spent {
            cost_usd: spent_or_zero(self.cost_usd).max(spent_or_zero(other.cost_usd)),
            tokens: self.tokens.max(other.tokens),
            turns: self.turns.max(other.turns),
        }
    }

    /// The amount `kind` counts.
    pub fn of(&self, kind: BudgetKind) -> f64 {
        match kind {
            BudgetKind::Cost => self.cost_usd,
            BudgetKind::Tokens => self.tokens as f64,
            BudgetKind::Turns => self.turns as f64,
        }
    }
}

/// A budget several runs share (a session's, a batch's), and what the runs
/// before this one spent against it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SharedBudget {
    pub scope: BudgetScope,
    pub budget: Budget,
    #[serde(default)]
    pub spent: Spent,
}

impl SharedBudget {
    pub fn new(scope: BudgetScope, budget: Budget, spent: Spent) -> Self {
        Self {
            scope,
            budget,
            spent: spent.checked(),
        }
    }

    /// The first of its limits nothing is left of (reached ≥ limit): no
    /// further run should start against it.
    pub fn used_up(&self) -> Option<BudgetLine> {
        self.budget
            .limits()
            .map(|(kind, limit)| BudgetLine {
                scope: self.scope,
                budget: kind,
                limit,
                spent_before: self.spent.of(kind),
                reached: self.spent.of(kind),
            })
            .find(|l| reaches(l.budget, l.reached, l.limit))
    }

    /// Each of its limits with what was reached, for a report.
    pub fn lines(&self) -> Vec<BudgetLine> {
        self.budget
            .limits()
            .map(|(kind, limit)| BudgetLine {
                scope: self.scope,
                budget: kind,
                limit,
                spent_before: 0.0,
                reached: self.spent.of(kind),
            })
            .collect()
    }
}

/// One limit of a budget and what was reached against it, as the reports
/// write it (`run.json`'s `budgets` and `budget_exceeded`, and the same in
/// `session.json` and `batch.json`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetLine {
    pub scope: BudgetScope,
    /// What it counts: `cost` (USD), `tokens` (`tokens.total`), `turns`.
    pub budget: BudgetKind,
    pub limit: f64,
    /// For a session's or batch's budget in `run.json`: what the runs
    /// before this one spent against it (counted in `reached`).
    pub spent_before: f64,
    /// What was spent against it, in all (the runs before included).
    pub reached: f64,
}

impl BudgetLine {
    /// `run cost budget $0.50 exceeded: $0.53 spent`.
    pub fn exceeded(&self) -> String {
        format!(
            "{} exceeded: {}",
            self.name_and_limit(),
            spent(self.budget, self.reached)
        )
    }

    /// `session cost budget $1.00 used up: $1.02 spent`.
    pub fn used_up(&self) -> String {
        format!(
            "{} used up: {}",
            self.name_and_limit(),
            spent(self.budget, self.reached)
        )
    }

    /// `82% of the run cost budget $0.50 used: $0.41 spent`. The share is
    /// the one reached, not the 80% the warning waits for: with whole turns
    /// the first count past 80% of a small limit can be all of it
    /// (`100% of the run turn budget 3 used: 3 turns`).
    pub fn warning(&self) -> String {
        format!(
            "{}% of the {} used: {}",
            share(self.budget, self.reached, self.limit),
            self.name_and_limit(),
            spent(self.budget, self.reached)
        )
    }

    /// `run cost budget $0.50`.
    pub fn name_and_limit(&self) -> String {
        let kind = match self.budget {
            BudgetKind::Cost => "cost",
            BudgetKind::Tokens => "token",
            BudgetKind::Turns => "turn",
        };
        format!(
            "{} {kind} budget {}",
            scope_name(self.scope),
            amount(self.budget, self.limit)
        )
    }
}

/// What a view says for a `budget_warning` event: `82% of the run cost
/// budget $0.50 used: $0.41 spent`.
pub fn warning(scope: BudgetScope, kind: BudgetKind, limit: f64, reached: f64) -> String {
    BudgetLine {
        scope,
        budget: kind,
        limit,
        spent_before: 0.0,
        reached,
    }
    .warning()
}

fn scope_name(scope: BudgetScope) -> &'static str {
    match scope {
        BudgetScope::Run => "run",
        BudgetScope::Session => "session",
        BudgetScope::Batch => "batch",
    }
}

/// An amount in its unit: `$0.53`, `1200`.
pub fn amount(kind: BudgetKind, value: f64) -> String {
    match kind {
        // Whole cents as cents; a sum between them (a fraction of a cent
        // is what a short run costs) to a hundredth of a cent.
        BudgetKind::Cost if ((value * 100.0).round() - value * 100.0).abs() < 1e-6 => {
            format!("${value:.2}")
        }
        BudgetKind::Cost => format!("${value:.4}"),
        BudgetKind::Tokens | BudgetKind::Turns => format!("{}", value.round() as u64),
    }
}

/// The whole percent of `limit` that `reached` is, rounded down so that a
/// share short of the limit never reads as 100%; cost compared as the
/// watch compares it, in micro-dollars, so $0.7999999999999999 of $0.80
/// (0.7 + 0.1 in floats) is 100%.
fn share(kind: BudgetKind, reached: f64, limit: f64) -> u64 {
    if limit <= 0.0 {
        return 100;
    }
    (compared(kind, reached) * 100.0 / compared(kind, limit)).floor() as u64
}

/// `$0.53 spent`, `1200 tokens`, `4 turns`.
fn spent(kind: BudgetKind, value: f64) -> String {
    let n = amount(kind, value);
    match kind {
        BudgetKind::Cost => format!("{n} spent"),
        BudgetKind::Tokens => format!("{n} tokens"),
        BudgetKind::Turns => format!("{n} turns"),
    }
}

/// An amount as it is compared with a limit: cost in whole micro-dollars,
/// since a sum of the floats agents report is off by a little
/// (0.10 + 0.20 is 0.30000000000000004, past a limit of 0.30 by 4e-17);
/// tokens and turns are whole numbers already.
fn compared(kind: BudgetKind, value: f64) -> f64 {
    match kind {
        BudgetKind::Cost => (value * 1e6).round(),
        BudgetKind::Tokens | BudgetKind::Turns => value,
    }
}

/// Whether `reached` goes past `limit`: the budget is exceeded.
pub fn passes(kind: BudgetKind, reached: f64, limit: f64) -> bool {
    compared(kind, reached) > compared(kind, limit)
}

/// Whether `reached` is at `limit` or past it: nothing is left.
pub fn reaches(kind: BudgetKind, reached: f64, limit: f64) -> bool {
    compared(kind, reached) >= compared(kind, limit)
}

/// One limit a run watches.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cap {
    scope: BudgetScope,
    kind: BudgetKind,
    limit: f64,
    before: f64,
    warned: bool,
    /// A batch's budget held live with the runs running beside this one
    /// ([`BudgetPool`]): `before` is what all the others have spent.
    pooled: bool,
}

/// What one look at the run's spend found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Check {
    /// Limits whose 80% was reached now (each once per run).
    pub warnings: Vec<BudgetLine>,
    /// The first limit exceeded, when one is (every look, from then on).
    pub exceeded: Option<BudgetLine>,
}

/// The budgets one run enforces, and which of them it has warned of.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Watch {
    caps: Vec<Cap>,
    /// The most the run was seen to have spent: what it has spent never
    /// goes down, whatever a later look says (a running total the agent
    /// lowers gives nothing back).
    highest: Spent,
}

impl Watch {
    /// The run's own budget, with what the earlier attempts at its step
    /// spent against it (`own_before`), and those it shares. A limit whose
    /// 80% was reached before the run started was warned of by an earlier
    /// run: not again.
    /// `pooled`: a batch budget held with the runs running beside this
    /// one, and what they (and the runs before) have spent so far.
    pub(crate) fn new(
        own: &Budget,
        own_before: Spent,
        shared: &[SharedBudget],
        pooled: Option<(Budget, Spent)>,
    ) -> Watch {
        let mut caps: Vec<Cap> = own
            .limits()
            .map(|(kind, limit)| Cap {
                scope: BudgetScope::Run,
                kind,
                limit,
                before: spent_or_zero(own_before.of(kind)),
                warned: reaches(kind, spent_or_zero(own_before.of(kind)), WARN_AT * limit),
                pooled: false,
            })
            .collect();
        let pooled =
            pooled.map(|(budget, spent)| SharedBudget::new(BudgetScope::Batch, budget, spent));
        for (s, is_pooled) in shared
            .iter()
            .map(|s| (s, false))
            .chain(pooled.iter().map(|s| (s, true)))
        {
            caps.extend(s.budget.limits().map(|(kind, limit)| {
                // Never below zero, whatever the request that carried it
                // said.
                let before = spent_or_zero(s.spent.of(kind));
                Cap {
                    scope: s.scope,
                    kind,
                    limit,
                    before,
                    warned: reaches(kind, before, WARN_AT * limit),
                    pooled: is_pooled,
                }
            }));
        }
        Watch {
            caps,
            highest: Spent::default(),
        }
    }

    /// What the other runs of a pooled batch budget have spent by now
    /// (never less than they were seen to have spent before).
    pub(crate) fn others_spent(&mut self, others: &Spent) {
        for cap in self.caps.iter_mut().filter(|c| c.pooled) {
            cap.before = cap.before.max(spent_or_zero(others.of(cap.kind)));
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.caps.is_empty()
    }

    fn line(cap: &Cap, run: &Spent) -> BudgetLine {
        BudgetLine {
            scope: cap.scope,
            budget: cap.kind,
            limit: cap.limit,
            spent_before: cap.before,
            reached: add_spent(cap.before, run.of(cap.kind)),
        }
    }

    /// Looks at what the run has spent so far.
    pub(crate) fn check(&mut self, run: &Spent) -> Check {
        self.highest = self.highest.at_least(run);
        let run = self.highest;
        let mut found = Check::default();
        for cap in &mut self.caps {
            let line = Self::line(cap, &run);
            if !cap.warned && reaches(cap.kind, line.reached, WARN_AT * cap.limit) {
                cap.warned = true;
                // Crossed in one step: the end says it, not a warning.
                if !passes(cap.kind, line.reached, cap.limit) {
                    found.warnings.push(line);
                }
            }
            if passes(cap.kind, line.reached, cap.limit) && found.exceeded.is_none() {
                found.exceeded = Some(line);
            }
        }
        found
    }

    /// Every limit with what was reached, for the report.
    pub(crate) fn lines(&self, run: &Spent) -> Vec<BudgetLine> {
        let run = self.highest.at_least(run);
        self.caps.iter().map(|c| Self::line(c, &run)).collect()
    }
}

/// What the runs of a batch on this machine spend together, as each
/// reports it: every run publishes its own spending as it changes, and is
/// woken when another's changes, so that a batch's budget holds the runs
/// that run at the same time together (the one whose spending passes it
/// and every other then running end `budget_exceeded`).
#[derive(Debug)]
pub struct BudgetPool {
    budget: Budget,
    state: std::sync::Mutex<PoolState>,
    changed: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct PoolState {
    /// What runs outside the pool spent (those a resumed batch kept).
    base: Spent,
    /// Each run's latest spending, by run id (kept after it ends).
    runs: std::collections::HashMap<String, Spent>,
    /// The limits whose 80% warning a run has given: once for the batch,
    /// not once by each run running when it was crossed.
    warned: Vec<BudgetKind>,
}

impl BudgetPool {
    pub fn new(budget: Budget, base: Spent) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            budget,
            state: std::sync::Mutex::new(PoolState {
                base: base.checked(),
                runs: std::collections::HashMap::new(),
                warned: Vec::new(),
            }),
            changed: tokio::sync::watch::channel(0).0,
        })
    }

    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Everything spent against it so far, but by `except`.
    fn sum(&self, except: Option<&str>) -> Spent {
        let s = self.state.lock().expect("lock");
        let mut total = s.base;
        for (id, spent) in &s.runs {
            if Some(id.as_str()) != except {
                total.add(spent);
            }
        }
        total
    }

    /// Whether the warning for `kind` is this run's to give: the first
    /// to ask gets it, every later one does not.
    pub(crate) fn first_warning(&self, kind: BudgetKind) -> bool {
        let mut s = self.state.lock().expect("lock");
        if s.warned.contains(&kind) {
            return false;
        }
        s.warned.push(kind);
        true
    }

    /// Everything spent against it so far.
    pub fn total(&self) -> Spent {
        self.sum(None)
    }

    /// What every run but `run` spent.
    pub(crate) fn others(&self, run: &str) -> Spent {
        self.sum(Some(run))
    }

    /// The budget with what was spent so far, as a shared budget.
    pub fn shared(&self) -> SharedBudget {
        SharedBudget::new(BudgetScope::Batch, self.budget, self.total())
    }

    /// Records what `run` has spent by now (never less than it published
    /// before); the other runs are woken when it changed.
    pub(crate) fn publish(&self, run: &str, spent: Spent) {
        let mut s = self.state.lock().expect("lock");
        let old = s.runs.get(run).copied();
        let spent = old.unwrap_or_default().at_least(&spent);
        s.runs.insert(run.to_string(), spent);
        drop(s);
        if old != Some(spent) {
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Changes whenever a run's spending does.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spent(cost_usd: f64, tokens: u64, turns: u64) -> Spent {
        Spent {
            cost_usd,
            tokens,
            turns,
        }
    }

    fn budget(cost: Option<f64>, tokens: Option<u64>, turns: Option<u64>) -> Budget {
        Budget {
            max_cost_usd: cost.map(|c| Usd::from_dollars(c).unwrap()),
            max_tokens: tokens,
            max_turns: turns,
        }
    }

    #[test]
    fn dollars_are_kept_exactly_and_bad_sums_refused() {
        assert_eq!(Usd::from_dollars(0.5).unwrap().dollars(), 0.5);
        assert_eq!(Usd::from_dollars(0.1).unwrap(), Usd(100_000));
        assert_eq!(Usd::from_dollars(-1.0), None);
        assert_eq!(Usd::from_dollars(f64::NAN), None);
        assert_eq!(Usd::from_dollars(f64::INFINITY), None);
        let b: Budget = serde_json::from_str(r#"{"max_cost_usd":0.25}"#).unwrap();
        assert_eq!(b.max_cost_usd, Usd::from_dollars(0.25));
        assert_eq!(serde_json::to_string(&b.max_cost_usd).unwrap(), "0.25");
        assert!(serde_json::from_str::<Budget>(r#"{"max_cost_usd":-2}"#).is_err());
    }

    #[test]
    fn a_budget_is_exceeded_past_its_limit_not_at_it() {
        let mut w = Watch::new(&budget(None, None, Some(3)), Spent::default(), &[], None);
        assert_eq!(w.check(&spent(0.0, 0, 3)).exceeded, None, "3 of 3 turns");
        let hit = w.check(&spent(0.0, 0, 4)).exceeded.expect("4 of 3 turns");
        assert_eq!(
            (hit.budget, hit.limit, hit.reached),
            (BudgetKind::Turns, 3.0, 4.0)
        );
        assert_eq!(hit.exceeded(), "run turn budget 3 exceeded: 4 turns");
    }

    #[test]
    fn the_warning_comes_once_at_80_percent() {
        let mut w = Watch::new(&budget(Some(0.5), None, None), Spent::default(), &[], None);
        assert!(w.check(&spent(0.39, 0, 0)).warnings.is_empty());
        let c = w.check(&spent(0.41, 0, 0));
        assert_eq!(c.warnings.len(), 1);
        assert_eq!(
            c.warnings[0].warning(),
            "82% of the run cost budget $0.50 used: $0.41 spent"
        );
        assert!(w.check(&spent(0.45, 0, 0)).warnings.is_empty(), "once");
        let hit = w.check(&spent(0.53, 0, 0)).exceeded.unwrap();
        assert_eq!(
            hit.exceeded(),
            "run cost budget $0.50 exceeded: $0.53 spent"
        );
    }

    #[test]
    fn the_warning_says_the_share_reached() {
        // 80% of 3 turns is 2.4: the first whole count past it is all 3.
        let mut w = Watch::new(&budget(None, None, Some(3)), Spent::default(), &[], None);
        assert!(w.check(&spent(0.0, 0, 2)).warnings.is_empty());
        let c = w.check(&spent(0.0, 0, 3));
        assert_eq!(
            c.warnings[0].warning(),
            "100% of the run turn budget 3 used: 3 turns"
        );
        assert_eq!(
            warning(BudgetScope::Run, BudgetKind::Tokens, 1000.0, 999.0),
            "99% of the run token budget 1000 used: 999 tokens",
            "short of the limit is never 100%"
        );
        assert_eq!(
            warning(BudgetScope::Session, BudgetKind::Cost, 0.8, 0.7 + 0.1),
            "100% of the session cost budget $0.80 used: $0.80 spent"
        );
    }

    #[test]
    fn a_sum_of_costs_at_the_limit_is_at_it_not_past_it() {
        // 0.10 + 0.20 is 0.30000000000000004 in floats.
        let mut run = spent(0.10, 0, 0);
        run.add(&spent(0.20, 0, 0));
        let mut w = Watch::new(&budget(Some(0.3), None, None), Spent::default(), &[], None);
        assert_eq!(w.check(&run).exceeded, None, "$0.30 of $0.30");
        // 0.7 + 0.1 is 0.7999999999999999: all of $0.80 is used up.
        let mut session = spent(0.7, 0, 0);
        session.add(&spent(0.1, 0, 0));
        let s = SharedBudget::new(BudgetScope::Session, budget(Some(0.8), None, None), session);
        assert!(s.used_up().is_some(), "$0.80 of $0.80");
        assert!(
            passes(BudgetKind::Cost, 0.300001, 0.3),
            "a micro-dollar past"
        );
    }

    #[test]
    fn a_jump_past_the_limit_is_an_end_not_a_warning() {
        let mut w = Watch::new(&budget(None, Some(1000), None), Spent::default(), &[], None);
        let c = w.check(&spent(0.0, 5000, 0));
        assert!(c.warnings.is_empty());
        assert_eq!(c.exceeded.unwrap().reached, 5000.0);
    }

    #[test]
    fn a_shared_budget_counts_what_the_runs_before_spent() {
        let session = SharedBudget::new(
            BudgetScope::Session,
            budget(Some(1.0), None, None),
            spent(0.7, 0, 0),
        );
        let mut w = Watch::new(&Budget::default(), Spent::default(), &[session], None);
        let c = w.check(&spent(0.15, 0, 0));
        assert_eq!(c.warnings.len(), 1, "0.85 of 1.00");
        assert_eq!(c.warnings[0].spent_before, 0.7);
        let hit = w.check(&spent(0.32, 0, 0)).exceeded.unwrap();
        assert_eq!(hit.scope, BudgetScope::Session);
        assert!((hit.reached - 1.02).abs() < 1e-9, "{hit:?}");
        assert_eq!(
            hit.exceeded(),
            "session cost budget $1.00 exceeded: $1.02 spent"
        );
    }

    #[test]
    fn a_shared_budget_warned_of_before_is_not_warned_of_again() {
        let s = SharedBudget::new(
            BudgetScope::Batch,
            budget(None, None, Some(10)),
            spent(0.0, 0, 9),
        );
        let mut w = Watch::new(&Budget::default(), Spent::default(), &[s], None);
        assert!(w.check(&spent(0.0, 0, 1)).warnings.is_empty());
    }

    #[test]
    fn the_first_limit_exceeded_is_named_and_the_run_limit_comes_first() {
        let s = SharedBudget::new(
            BudgetScope::Session,
            budget(None, Some(100), None),
            spent(0.0, 90, 0),
        );
        let mut w = Watch::new(&budget(None, Some(50), None), Spent::default(), &[s], None);
        let hit = w.check(&spent(0.0, 60, 0)).exceeded.unwrap();
        assert_eq!(hit.scope, BudgetScope::Run);
        assert_eq!(w.lines(&spent(0.0, 60, 0))[1].reached, 150.0);
    }

    #[test]
    fn a_pooled_budget_counts_what_the_runs_beside_spend_as_it_changes() {
        let pool = BudgetPool::new(budget(Some(0.35), None, None), spent(0.0, 0, 0));
        pool.publish("a", spent(0.22, 0, 2));
        let mut w = Watch::new(
            &Budget::default(),
            Spent::default(),
            &[],
            Some((pool.budget(), pool.others("b"))),
        );
        w.others_spent(&pool.others("b"));
        assert_eq!(w.check(&spent(0.11, 0, 1)).exceeded, None, "0.33 of 0.35");
        pool.publish("a", spent(0.33, 0, 3));
        w.others_spent(&pool.others("b"));
        let hit = w.check(&spent(0.11, 0, 1)).exceeded.expect("0.44 of 0.35");
        assert_eq!(hit.scope, BudgetScope::Batch);
        assert!(
            close(hit.spent_before, 0.33) && close(hit.reached, 0.44),
            "{hit:?}"
        );
        assert!(close(pool.total().cost_usd, 0.33));
        pool.publish("b", spent(0.11, 0, 1));
        assert!(
            pool.shared().used_up().is_some(),
            "0.44 of 0.35: none starts"
        );
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn nothing_left_of_a_shared_budget_stops_the_next_run() {
        let s = SharedBudget::new(
            BudgetScope::Session,
            budget(None, None, Some(6)),
            spent(0.0, 0, 6),
        );
        let line = s.used_up().expect("6 of 6 turns: nothing left");
        assert_eq!(line.used_up(), "session turn budget 6 used up: 6 turns");
        let s = SharedBudget::new(
            BudgetScope::Session,
            budget(None, None, Some(6)),
            spent(0.0, 0, 5),
        );
        assert_eq!(s.used_up(), None);
    }

    #[test]
    fn what_a_run_spent_never_goes_down_whatever_a_later_look_says() {
        let mut w = Watch::new(&budget(Some(0.5), None, None), Spent::default(), &[], None);
        assert_eq!(w.check(&spent(0.4, 0, 0)).exceeded, None);
        // A later look says less (a forged running total): still $0.40.
        assert_eq!(w.check(&spent(-99.0, 0, 0)).exceeded, None);
        assert!(close(w.lines(&spent(0.0, 0, 0))[0].reached, 0.4));
        let hit = w.check(&spent(0.2, 0, 0)).exceeded;
        assert_eq!(hit, None, "0.2 is below 0.4: no new spending");
        let hit = w.check(&spent(0.6, 0, 0)).exceeded.expect("0.6 of 0.5");
        assert!(close(hit.reached, 0.6), "{hit:?}");
    }

    #[test]
    fn an_amount_that_is_no_amount_adds_nothing_and_reached_is_always_a_number() {
        let mut total = spent(1.0, 5, 1);
        for bad in [-100.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            total.add(&spent(bad, 0, 0));
            assert_eq!(total.cost_usd, 1.0, "{bad}");
        }
        let mut huge = spent(f64::MAX, 0, 0);
        huge.add(&spent(f64::MAX, 0, 0));
        assert_eq!(huge.cost_usd, f64::MAX, "stops at the largest");
        // Carried in a request: a negative amount spent before is none.
        let s = SharedBudget::new(
            BudgetScope::Batch,
            budget(Some(1.0), None, None),
            spent(-97.8, 0, 0),
        );
        assert_eq!(s.lines()[0].reached, 0.0);
        let mut w = Watch::new(&Budget::default(), Spent::default(), &[s], None);
        let line = &w.lines(&spent(f64::MAX, 0, 0))[0];
        assert!(line.reached.is_finite() && line.reached >= 0.0, "{line:?}");
        let text = serde_json::to_string(&w.lines(&spent(f64::MAX, 0, 0))).unwrap();
        assert!(!text.contains("null"), "{text}");
        assert_eq!(w.check(&spent(f64::NAN, 0, 0)).exceeded, None);
        // Read from a file: refused, naming the value.
        let e = serde_json::from_str::<Spent>(r#"{"cost_usd":-1000}"#).unwrap_err();
        assert!(
            e.to_string().contains("-1000 is not an amount spent"),
            "{e}"
        );
    }

    #[test]
    fn a_pooled_run_that_publishes_less_keeps_what_it_published() {
        let pool = BudgetPool::new(budget(Some(1.0), None, None), spent(-5.0, 0, 0));
        pool.publish("a", spent(0.6, 0, 1));
        pool.publish("a", spent(-97.8, 0, 0));
        let total = pool.total();
        assert!(close(total.cost_usd, 0.6) && total.turns == 1, "{total:?}");
        assert!(pool.shared().lines()[0].reached >= 0.6);
    }
}
