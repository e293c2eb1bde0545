package rollout

import (
	"context"
	"errors"
	"time"

	"github.com/cuecast/cuecast"
)

// State is where a rollout stands.
type State string

// The states of a rollout. Moving, Waiting, Holding and Staging are active:
// the controller steps them. Halted waits for an operator; the others are
// final.
const (
	// StateMoving: the current stage's pointers are being written.
	StateMoving State = "moving"
	// StateWaiting: the stage's pointers are written; waiting until its
	// instances report the version (or Options.ApplyTimeout passes).
	StateWaiting State = "waiting"
	// StateHolding: every instance of the stage applied; holding for the
	// stage's hold time while watching health.
	StateHolding State = "holding"
	// StateStaging: a strict config's version is announced as staged;
	// waiting until every live instance confirms it holds it.
	StateStaging State = "staging"
	// StateHalted: a health breach or an operator stopped the rollout; the
	// cohort was moved back to the previous version.
	StateHalted State = "halted"
	// StateComplete: every stage passed.
	StateComplete State = "complete"
	// StateSuperseded: a newer version started its own rollout.
	StateSuperseded State = "superseded"
	// StateRolledBack: an emergency rollback replaced the rollout.
	StateRolledBack State = "rolled_back"
)

// Active reports whether the controller steps a rollout in state s.
func (s State) Active() bool {
	return s == StateMoving || s == StateWaiting || s == StateHolding || s == StateStaging
}

// Policies tells the controller how a version rolls out: its namespace's
// policy (or the config's own override) and its consistency class, cuecast.Relaxed
// or cuecast.Strict, as the manifest of the version's own commit says, so that a
// policy change rolls out with the commits after it and not with older
// versions still in flight. The controller asks once, when a version's
// rollout starts, and keeps the answer in the rollout's state.
type Policies interface {
	Policy(ctx context.Context, v cuecast.Version) (cuecast.Policy, cuecast.Consistency, error)
}

// Static is a Policies giving every config the same policy and class.
type Static struct {
	P           cuecast.Policy
	Consistency cuecast.Consistency
}

// Policy implements Policies.
func (s Static) Policy(context.Context, cuecast.Version) (cuecast.Policy, cuecast.Consistency, error) {
	p, c := s.P, s.Consistency
	if len(p.Stages) == 0 {
		p = cuecast.DefaultPolicy()
	}
	if c == "" {
		c = cuecast.Relaxed
	}
	return p, c, nil
}

var _ Policies = Static{}

// Rollout is one version's way through its stages. It is stored as JSON in
// the config's Record.
type Rollout struct {
	ID       string             `json:"id"`
	Config   cuecast.ConfigPath `json:"config"`
	Version  uint64             `json:"version"`
	Checksum string             `json:"checksum"`
	Commit   string             `json:"commit,omitempty"`
	Author   string             `json:"author,omitempty"`
	// From is where a halted cohort goes back to: the config's floor when
	// the rollout began (Record.Floor), the newest version the whole fleet
	// ran; 0 when there is none.
	From         uint64              `json:"from"`
	FromChecksum string              `json:"from_checksum,omitempty"`
	Policy       cuecast.Policy      `json:"policy"`
	Consistency  cuecast.Consistency `json:"consistency"`
	// Stage is the index of the current stage in Policy.Stages.
	Stage int   `json:"stage"`
	State State `json:"state"`
	// Cohort is what the current stage covers, cumulative over the stages
	// before it, fixed when its pointers move: buckets, and the instances
	// named or matched by labels outside them (stored as "buckets" and
	// "instances", as before instances existed). A halt moves exactly
	// this cohort back.
	Cohort
	// Moved is everyone the stages before the current one moved: stages
	// are cumulative, so the current stage's cohort includes it even when
	// a label no longer matches an instance it moved.
	Moved        Cohort    `json:"moved,omitzero"`
	StageStarted time.Time `json:"stage_started"`
	// WaitUntil ends StateWaiting (and StateStaging) even when some
	// instances never report; HoldUntil ends StateHolding.
	WaitUntil time.Time `json:"wait_until,omitzero"`
	HoldUntil time.Time `json:"hold_until,omitzero"`
	// EnoughBy ends a holding stage whose cohort has fewer live instances
	// than its min_instances: the stage then passes with those it has
	// (HoldUntil plus Options.ApplyTimeout; zero for a stage without
	// min_instances).
	EnoughBy time.Time `json:"enough_by,omitzero"`
	// Unconfirmed are the instances a waiting stage (or a strict staging)
	// waits for, as of its last evaluation. One that stops reporting stays
	// waited for until the wait times out (then it fails to apply, or
	// blocks the flip), rather than dropping out unnoticed.
	Unconfirmed []string `json:"unconfirmed,omitempty"`
	// DrillFailing holds, for each region whose answer to the drill-down
	// judging this rollout needs has been missing or short (instances
	// left out) since, when that began; a full answer from the region
	// clears it. A region failing for Options.ApplyTimeout halts the
	// stage, as its instances would by not reporting; a shorter failure
	// only holds it (drillShort).
	DrillFailing map[string]time.Time `json:"drill_failing,omitempty"`
	// Note says why an active rollout is not advancing right now.
	Note string `json:"note,omitempty"`
	// Analysis is the current stage's analysis, one entry per metric of
	// the stage's (analysis.go), from its hold's start.
	Analysis []MetricState `json:"analysis,omitempty"`
	// Reason says why it was halted, superseded or rolled back.
	Reason string `json:"reason,omitempty"`
	// Index: the version is a variant index (docs/VARIANTS.md), which no
	// instance applies: every bucket is pointed at it at once and nobody
	// is judged on it (indexRollout).
	Index bool `json:"index,omitempty"`
	// Announced: a strict rollout's staged pointer is published.
	Announced bool `json:"announced,omitempty"`
	// Reverted: the halted cohort's pointers are back on From.
	Reverted  bool      `json:"reverted,omitempty"`
	Emergency bool      `json:"emergency,omitempty"`
	Started   time.Time `json:"started"`
	Updated   time.Time `json:"updated"`
	Log       []Step    `json:"log,omitempty"`
}

// Step is one line of a rollout's history.
type Step struct {
	At     time.Time `json:"at"`
	Stage  string    `json:"stage,omitempty"`
	State  State     `json:"state"`
	Detail string    `json:"detail,omitempty"`
}

// maxLog bounds a rollout's history.
const maxLog = 64

// StageName is the current stage's name.
func (r *Rollout) StageName() string {
	if r.Stage < 0 || r.Stage >= len(r.Policy.Stages) {
		return ""
	}
	return r.Policy.Stages[r.Stage].Name
}

func (r *Rollout) log(at time.Time, detail string) {
	r.Log = append(r.Log, Step{At: at, Stage: r.StageName(), State: r.State, Detail: detail})
	if len(r.Log) > maxLog {
		r.Log = r.Log[len(r.Log)-maxLog:]
	}
}

// Pin holds a config on a version after an emergency rollback: new versions
// are compiled and published but not rolled out until a commit restores the
// pinned content (same checksum) or an operator unpins.
type Pin struct {
	Version  uint64    `json:"version"`
	Checksum string    `json:"checksum"`
	Actor    string    `json:"actor"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	// Applied: every bucket's pointer names the pinned version.
	Applied bool `json:"applied"`
}

// Record is the controller's state for one config: the last fully rolled-out
// version, the current (or last) rollout and the pin. One KV entry per
// config, written by compare-and-swap.
type Record struct {
	Config         cuecast.ConfigPath `json:"config"`
	Stable         uint64             `json:"stable"`
	StableChecksum string             `json:"stable_checksum,omitempty"`
	// Floor is the newest version every cohort bucket was pointed at at
	// once, as the controller last moved them: set when a stage covering
	// every bucket moves (a last stage, a strict flip), a pin applies, or a
	// halt moves everyone back. A new rollout falls back to it. Stable
	// alone (moved only when a rollout completes) fell back past every
	// superseded rollout, which never completes: a halt of v52 pointed a
	// fleet running v51 at v1 (issue 15, item 12). 0 in records written
	// before it existed: Stable then.
	Floor         uint64   `json:"floor,omitempty"`
	FloorChecksum string   `json:"floor_checksum,omitempty"`
	Current       *Rollout `json:"current,omitempty"`
	// Superseded is the rollout the current one replaced, for status.
	Superseded *Rollout `json:"superseded,omitempty"`
	Pin        *Pin     `json:"pin,omitempty"`
	// Pending is the newest version held back by the pin (0 when none).
	Pending uint64 `json:"pending,omitempty"`
}

// floor is the version a rollout starting now falls back to.
func (rec *Record) floor() (uint64, string) {
	if rec.Floor >= rec.Stable {
		return rec.Floor, rec.FloorChecksum
	}
	return rec.Stable, rec.StableChecksum
}

// Action is an operator's request: what (Verb, on Config; Version for a
// rollback), who, why, and whether it skips holds. Controller.Act carries
// out any of them, with the defaults below; the named methods (Halt,
// Advance, …) take the config and version as arguments and ignore Verb,
// Config and Version.
type Action struct {
	// Verb is what to do (Act).
	Verb Verb
	// Config is the config acted on (Act).
	Config cuecast.ConfigPath
	// Version is where a rollback goes; 0: the version the current
	// rollout falls back to (its From), "the previous version".
	Version uint64
	// Actor is who acts, for the audit stream ("unknown" when empty).
	Actor string
	// Reason is why; every action needs one (ErrNoReason).
	Reason string
	// Emergency makes an advance skip every remaining hold and go to the
	// last stage. A rollback is always an emergency; the other verbs
	// ignore it (they have nothing to skip), so the audit stream marks
	// as emergencies only what skipped something.
	Emergency bool
}

// Errors returned by the operator methods; match them with errors.Is.
var (
	// ErrNoRollout: the config has no rollout to act on.
	ErrNoRollout = errors.New("no rollout")
	// ErrState: the rollout is not in a state the action applies to.
	ErrState = errors.New("rollout state does not allow this")
	// ErrNoReason: operator actions must say why.
	ErrNoReason = errors.New("a reason is required")
	// ErrNotPinned: unpin of a config that is not pinned.
	ErrNotPinned = errors.New("config is not pinned")
	// ErrUnknownVerb: Act was given a Verb it does not know.
	ErrUnknownVerb = errors.New("unknown operator action")
	// ErrNotCarriedOut: an action recorded by a controller without
	// Policies that no running controller carried out in time.
	ErrNotCarriedOut = errors.New("action not carried out")
)
