package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/tailer"
)

// The JSON the pages render. Field names are the page script's contract.

type overviewView struct {
	Actions    bool            `json:"actions"`
	Stale      string          `json:"stale,omitempty"`
	Tailer     *tailerView     `json:"tailer,omitempty"`
	Namespaces []namespaceView `json:"namespaces"`
}

type tailerView struct {
	Repo      string          `json:"repo"`
	Branch    string          `json:"branch"`
	Cursor    string          `json:"cursor"`
	CursorURL string          `json:"cursor_url,omitempty"`
	Lag       int             `json:"lag"`
	Rewrite   *tailer.Rewrite `json:"rewrite,omitempty"`
	Rejected  []rejectedView  `json:"rejected,omitempty"`
	// Open counts the rejections not fixed yet: the badge and the panel
	// show only those; fixed ones stay listed as history.
	Open  int    `json:"open"`
	Error string `json:"error,omitempty"`
}

type rejectedView struct {
	Commit    string    `json:"commit"`
	CommitURL string    `json:"commit_url,omitempty"`
	Author    string    `json:"author"`
	Message   string    `json:"message"`
	At        time.Time `json:"at"`
	First     string    `json:"first"`
	Total     int       `json:"total"`
	// Fixed: a later commit compiled (rejectionFixed).
	Fixed bool `json:"fixed,omitempty"`
	// Namespaces are those the commit was rejected in (tailer.Rejected).
	Namespaces []string `json:"namespaces,omitempty"`
}

type namespaceView struct {
	Name    string      `json:"name"`
	Configs []configRow `json:"configs"`
}

type configRow struct {
	Config     cuecast.ConfigPath `json:"config"`
	Version    uint64             `json:"version"`
	Deleted    bool               `json:"deleted,omitempty"`
	Commit     string             `json:"commit"`
	CommitURL  string             `json:"commit_url,omitempty"`
	Author     string             `json:"author"`
	Message    string             `json:"message"`
	Instances  int                `json:"instances"`
	OnLatest   int                `json:"on_latest"`
	OnIntended int                `json:"on_intended"` // on the version their rollout means them to run now (distributor.Intent), as Coverage
	Coverage   float64            `json:"coverage"`
	Stragglers int                `json:"stragglers"`
	LKG        int                `json:"lkg"`
	Drift      int                `json:"drift"`
	Unhealthy  int                `json:"unhealthy"`
	Failing    int                `json:"failing"`
	Refused    int                `json:"refused"` // refused a forged or unverifiable pointer: not failing, not applied
	// Unknown counts the instances of a region that stopped summarising
	// (distributor.ConfigStatus.Unknown): live as far as anyone knows,
	// their state not.
	Unknown int    `json:"unknown,omitempty"`
	Rollout string `json:"rollout,omitempty"`
	Stage   string `json:"stage,omitempty"`
	Pinned  bool   `json:"pinned,omitempty"`
	// Variant is a variant's dimension values ("env=prod,region=eu"),
	// Variants the number of variants of a config that has them (its own
	// row is its variant index): the overview lists variants under their
	// config (docs/VARIANTS.md).
	Variant  string `json:"variant,omitempty"`
	Variants int    `json:"variants,omitempty"`
}

type configView struct {
	Actions bool `json:"actions"`
	// Edit: the set API is on, so the page offers its edit control.
	Edit       bool                 `json:"edit,omitempty"`
	Stale      string               `json:"stale,omitempty"`
	Tailer     *tailerView          `json:"tailer,omitempty"`
	Row        configRow            `json:"row"`
	Versions   []versionView        `json:"versions"`
	Rollout    *rolloutView         `json:"rollout,omitempty"`
	Stragglers []instanceView       `json:"stragglers"`
	Drift      []instanceView       `json:"drift"`
	LKG        []instanceView       `json:"lkg"`
	Unhealthy  []instanceView       `json:"unhealthy"`
	Refused    []instanceView       `json:"refused"`
	Instances  []instanceView       `json:"instances"`
	More       int                  `json:"more_instances,omitempty"`
	Audit      []rollout.AuditEntry `json:"audit"`
	Chart      string               `json:"chart"`
}

type versionView struct {
	Version     uint64    `json:"version"`
	Commit      string    `json:"commit"`
	CommitURL   string    `json:"commit_url,omitempty"`
	Author      string    `json:"author"`
	Message     string    `json:"message"`
	CommittedAt time.Time `json:"committed_at"`
	CompiledAt  time.Time `json:"compiled_at"`
	Checksum    string    `json:"checksum"`
	Size        int64     `json:"size"`
	Deleted     bool      `json:"deleted,omitempty"`
	Instances   int       `json:"instances"`
	// Carries are the commits that did not compile whose changes the
	// version holds besides its own commit's.
	Carries []cuecast.CommitRef `json:"carries,omitempty"`
}

type instanceView struct {
	Instance  string `json:"instance"`
	Cohort    int    `json:"cohort"`
	Version   uint64 `json:"version"`
	Checksum  string `json:"checksum"`
	Healthy   bool   `json:"healthy"`
	LKG       bool   `json:"lkg,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Refused is the last pointer the instance refused as forged or
	// unverifiable (cuecast.Report.Refused): shown apart from LastError.
	Refused string            `json:"refused,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	At      time.Time         `json:"at"`
	// Count is set on a row made from a region's summary: it stands for
	// Count instances alike, Instance one of them (cuecast.Report.Count).
	Count int `json:"count,omitempty"`
	// Unknown: the row stands for instances of a region whose summary is
	// overdue (distributor.Unheard); nothing is known of their state, so
	// it is neither healthy nor reported at any time.
	Unknown bool `json:"unknown,omitempty"`
}

type rolloutView struct {
	ID        string        `json:"id"`
	Version   uint64        `json:"version"`
	From      uint64        `json:"from"`
	State     rollout.State `json:"state"`
	Active    bool          `json:"active"`
	Stage     string        `json:"stage"`
	Note      string        `json:"note,omitempty"`
	Reason    string        `json:"reason,omitempty"`
	Reverted  bool          `json:"reverted,omitempty"`
	Emergency bool          `json:"emergency,omitempty"`
	Started   time.Time     `json:"started"`
	Updated   time.Time     `json:"updated"`
	// HoldUntil and WaitUntil are the next deadline of a holding or a
	// waiting stage, zero once it has passed (rollout.Rollout.Deadline).
	HoldUntil time.Time      `json:"hold_until,omitzero"`
	WaitUntil time.Time      `json:"wait_until,omitzero"`
	Stages    []stageView    `json:"stages"`
	Stable    uint64         `json:"stable"`
	Pin       *rollout.Pin   `json:"pin,omitempty"`
	Pending   uint64         `json:"pending,omitempty"`
	Log       []rollout.Step `json:"log,omitempty"`
	// Counted says, when the regions were asked for the instances the
	// stages name or select by label and not all of them answered, how
	// the stages were counted instead.
	Counted string `json:"counted,omitempty"`
}

type stageView struct {
	Name    string `json:"name"`
	Percent int    `json:"percent"`
	Named   int    `json:"named,omitempty"` // instances named or matched by labels
	// Scope says what the stage covers (rollout.StageScope), as
	// `cuecast rollout status` says it.
	Scope string `json:"scope"`
	// Names and Labels are the stage's own selectors: the instances it
	// names and the labels it matches, shown as such (not "0% + named").
	Names     []string          `json:"names,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Hold      string            `json:"hold,omitempty"`
	Status    string            `json:"status"` // done, current, pending
	Instances int               `json:"instances"`
	OnTarget  int               `json:"on_target"`
	Coverage  float64           `json:"coverage"`
	Unhealthy int               `json:"unhealthy"`
	Failing   int               `json:"failing"`
	Refused   int               `json:"refused"`
}

func (s *Server) stale(snap *snapshot) string {
	if snap.err == "" {
		return ""
	}
	if snap.ok.IsZero() {
		return "cannot read the fleet: " + snap.err
	}
	return "showing the sample of " + rollout.FormatTime(snap.ok) + ": " + snap.err
}

func (s *Server) commitURL(sha string) string {
	if s.o.CommitURL == nil || sha == "" {
		return ""
	}
	return s.o.CommitURL(sha)
}

func (s *Server) row(snap *snapshot, st distributor.ConfigStatus) configRow {
	v := st.Latest
	r := configRow{
		Config: st.Config, Version: v.Version, Deleted: v.Deleted, Commit: v.Commit, CommitURL: s.commitURL(v.Commit),
		Author: v.Author, Message: cuecast.CommitSubject(v.Message), Instances: st.Instances, OnLatest: st.OnLatest,
		OnIntended: st.OnIntended, Coverage: st.Coverage, Stragglers: len(st.Stragglers), LKG: len(st.LastKnownGood),
		Drift: distributor.Weigh(snap.drift[st.Config]), Unhealthy: st.Unhealthy, Failing: st.Failing, Refused: distributor.Weigh(st.Refused),
		Variant: st.Config.VariantLabel(), Unknown: st.Unknown,
	}
	if rec, ok := snap.records[st.Config]; ok {
		if rec.Current != nil {
			r.Rollout, r.Stage = string(rec.Current.State), rec.Current.StageName()
		}
		r.Pinned = rec.Pin != nil
	}
	return r
}

func (s *Server) overview(snap *snapshot) overviewView {
	ov := overviewView{Actions: s.actionsEnabled(), Stale: s.stale(snap), Namespaces: []namespaceView{}}
	// Each config's variants right under it: by base path, then path
	// (payments/checkout-v2 sorts between payments/checkout and its
	// variants otherwise).
	status := slices.Clone(snap.status)
	slices.SortStableFunc(status, func(a, b distributor.ConfigStatus) int {
		return cmp.Or(cmp.Compare(a.Config.Base(), b.Config.Base()), cmp.Compare(a.Config, b.Config))
	})
	variants := distributor.VariantCounts(status)
	for _, st := range status {
		ns := st.Config.Namespace()
		if n := len(ov.Namespaces); n == 0 || ov.Namespaces[n-1].Name != ns {
			ov.Namespaces = append(ov.Namespaces, namespaceView{Name: ns})
		}
		n := &ov.Namespaces[len(ov.Namespaces)-1]
		r := s.row(snap, st)
		if !st.Config.IsVariant() {
			r.Variants = variants[st.Config]
		}
		n.Configs = append(n.Configs, r)
	}
	ov.Tailer = s.tailerView(snap)
	return ov
}

func (s *Server) tailerView(snap *snapshot) *tailerView {
	if s.o.Tailer == nil {
		return nil
	}
	tv := &tailerView{Lag: snap.lag, Error: snap.tailerErr}
	if st := snap.tailer; st != nil {
		tv.Repo, tv.Branch, tv.Cursor, tv.CursorURL, tv.Rewrite = st.Repo, st.Branch, st.Cursor, s.commitURL(st.Cursor), st.Rewrite
		for i := len(st.Rejected) - 1; i >= 0 && len(tv.Rejected) < 5; i-- {
			rj := st.Rejected[i]
			rv := rejectedView{Commit: rj.Commit, CommitURL: s.commitURL(rj.Commit), Author: rj.Author,
				Message: rj.Message, At: rj.At, Total: rj.Total, Fixed: rejectionFixed(st, rj, snap.status), Namespaces: rj.Namespaces}
			if !rv.Fixed {
				tv.Open++
			}
			if len(rj.Errors) > 0 {
				rv.First = rj.Errors[0].Error()
			}
			tv.Rejected = append(tv.Rejected, rv)
		}
	}
	return tv
}

// rejectionFixed says whether a commit compiled after rj was rejected: the
// last commit processed compiled (the tailer's Base is its Cursor), or a
// version was compiled after the rejection, in one of the namespaces it
// was rejected in when it names them (its changes elsewhere, and later
// commits' there, are published meanwhile). The "rejected" badge stayed
// after the fix (issue 17).
func rejectionFixed(st *tailer.State, rj tailer.Rejected, status []distributor.ConfigStatus) bool {
	if st.Cursor != "" && st.Base == st.Cursor {
		return true
	}
	for _, cs := range status {
		if cs.Latest.CompiledAt.After(rj.At) && (len(rj.Namespaces) == 0 || slices.Contains(rj.Namespaces, cs.Latest.Config.Namespace())) {
			return true
		}
	}
	return false
}

func instance(r cuecast.Report) instanceView {
	if distributor.Unheard(r) {
		return instanceView{Instance: r.Instance, Cohort: r.Cohort, Labels: r.Labels, Count: r.Count, Unknown: true}
	}
	return instanceView{Instance: r.Instance, Cohort: r.Cohort, Version: r.Version, Checksum: r.Checksum,
		Healthy: r.Healthy, LKG: r.LastKnownGood, LastError: r.LastError, Refused: r.Refused, Labels: r.Labels, At: r.At, Count: r.Count}
}

func instances(rs []cuecast.Report) []instanceView {
	out := make([]instanceView, 0, len(rs))
	for _, r := range rs {
		out = append(out, instance(r))
	}
	return out
}

// maxInstances is how many instances a config page lists in full.
const maxInstances = 100

// errNoConfig: the page names a config the distributor does not know.
var errNoConfig = errors.New("no such config")

func (s *Server) configView(ctx context.Context, snap *snapshot, cfg cuecast.ConfigPath) (configView, error) {
	st, ok := snap.statusOf(cfg)
	if !ok {
		return configView{}, errNoConfig
	}
	reports := snap.reports[cfg]
	cv := configView{Actions: s.actionsEnabled(), Edit: s.setEnabled(), Stale: s.stale(snap), Row: s.row(snap, st),
		Stragglers: instances(st.Stragglers), Drift: instances(snap.drift[cfg]), LKG: instances(st.LastKnownGood),
		Refused: instances(st.Refused),
		Audit:   []rollout.AuditEntry{}, Tailer: s.tailerView(snap)}
	var unhealthy []cuecast.Report
	for _, r := range reports {
		if !r.Healthy || r.LastError != "" {
			unhealthy = append(unhealthy, r)
		}
	}
	cv.Unhealthy = instances(unhealthy)
	cv.Instances = instances(reports[:min(len(reports), maxInstances)])
	cv.More = distributor.Weigh(reports) - distributor.Weigh(reports[:len(cv.Instances)])

	vl, err := s.versions(ctx, cfg, st.Latest.Version)
	if err != nil {
		return configView{}, err
	}
	onVersion := map[uint64]int{}
	for _, r := range reports {
		onVersion[r.Version] += r.Weight()
	}
	for _, v := range vl.versions[:min(len(vl.versions), 20)] {
		cv.Versions = append(cv.Versions, versionView{Version: v.Version, Commit: v.Commit, CommitURL: s.commitURL(v.Commit),
			Author: v.Author, Message: v.Message, CommittedAt: v.CommittedAt, CompiledAt: v.CompiledAt,
			Checksum: v.Checksum, Size: v.Size, Deleted: v.Deleted, Instances: onVersion[v.Version], Carries: v.Carries})
	}
	if rec, ok := snap.records[cfg]; ok && rec.Current != nil {
		staged := s.stagedReports(ctx, cfg, rec.Current, reports)
		cv.Rollout = rolloutOf(rec, staged.reports, time.Now())
		cv.Rollout.Counted = staged.counted
	}
	if s.o.Rollouts != nil {
		cv.Audit = append(cv.Audit, s.audit(ctx, cfg, snap.records[cfg])...)
	}
	cv.Chart = chartSVG(s.metrics.Propagation(cfg))
	return cv, nil
}

// audit returns the newest 50 audit entries of cfg, newest first. They are
// read again only when the config's rollout record changed: every action and
// every automatic halt rewrites the record.
func (s *Server) audit(ctx context.Context, cfg cuecast.ConfigPath, rec rollout.Record) []rollout.AuditEntry {
	key := auditKey(rec)
	s.mu.Lock()
	ac, ok := s.acache[cfg]
	s.mu.Unlock()
	if ok && ac.key == key {
		return ac.entries
	}
	entries, err := s.o.Rollouts.Audit(ctx, cfg)
	if err != nil {
		s.log.Warn("read audit", "config", cfg, "err", err)
		return ac.entries
	}
	slices.Reverse(entries)
	entries = entries[:min(len(entries), 50)]
	s.mu.Lock()
	s.acache[cfg] = auditCache{key: key, entries: entries}
	s.mu.Unlock()
	return entries
}

type auditCache struct {
	key     string
	entries []rollout.AuditEntry
}

func auditKey(rec rollout.Record) string {
	k := fmt.Sprintf("stable=%d pending=%d", rec.Stable, rec.Pending)
	for _, r := range []*rollout.Rollout{rec.Current, rec.Superseded} {
		if r != nil {
			k += fmt.Sprintf(" %s:%s:%d:%d", r.ID, r.State, r.Stage, r.Updated.UnixNano())
		}
	}
	if p := rec.Pin; p != nil {
		k += fmt.Sprintf(" pin=%d@%d", p.Version, p.At.UnixNano())
	}
	return k
}

// rolloutOf is the view of rec's current rollout at now. Its note and
// deadlines are as of now and its note measured from reports, as the
// counts are (rollout.Rollout.NoteFor and Deadline): the page
// shows the real next event, never a deadline that has passed. The times in
// its note and log are shown as everywhere (rollout.FormatTimes).
func rolloutOf(rec rollout.Record, reports []cuecast.Report, now time.Time) *rolloutView {
	r := rec.Current
	rv := &rolloutView{ID: r.ID, Version: r.Version, From: r.From, State: r.State, Active: r.State.Active(),
		Stage: r.StageName(), Note: rollout.FormatTimes(r.NoteFor(reports, now)), Reason: r.Reason, Reverted: r.Reverted, Emergency: r.Emergency,
		Started: r.Started, Updated: r.Updated,
		Stable: rec.Stable, Pin: rec.Pin, Pending: rec.Pending}
	switch next := r.Deadline(now); r.State {
	case rollout.StateHolding:
		rv.HoldUntil = next
	case rollout.StateWaiting, rollout.StateStaging:
		rv.WaitUntil = next
	}
	if n := len(r.Log); n > 20 {
		rv.Log = slices.Clone(r.Log[n-20:])
	} else {
		rv.Log = slices.Clone(r.Log)
	}
	slices.Reverse(rv.Log)
	for i := range rv.Log {
		rv.Log[i].Detail = rollout.FormatTimes(rv.Log[i].Detail)
	}
	ns := r.Config.Namespace()
	for i, stg := range r.Policy.Stages {
		sv := stageView{Name: stg.Name, Percent: stg.Percent, Named: len(stg.Instances) + len(stg.Labels),
			Scope: rollout.StageScope(stg), Names: stg.Instances, Labels: stg.Labels}
		if stg.Hold > 0 {
			sv.Hold = stg.Hold.String()
		}
		switch {
		case r.State == rollout.StateComplete || i < r.Stage:
			sv.Status = "done"
		case i == r.Stage:
			sv.Status = "current"
		default:
			sv.Status = "pending"
		}
		in := r.StageCohort(i, reports)
		for _, rep := range reports {
			// The controller's rule: a region's summary group by its
			// bucket, its first name standing for none of the others.
			if !in.Includes(ns, rep) {
				continue
			}
			// A region's summary group stands for Count instances.
			n := rep.Weight()
			sv.Instances += n
			if rep.Version == r.Version && (r.Checksum == "" || rep.Checksum == r.Checksum) {
				sv.OnTarget += n
			}
			if !rep.Healthy {
				sv.Unhealthy += n
			}
			if rep.LastError != "" {
				sv.Failing += n
			}
			if rep.Refused != "" {
				sv.Refused += n
			}
		}
		sv.Coverage = 1
		if sv.Instances > 0 {
			sv.Coverage = float64(sv.OnTarget) / float64(sv.Instances)
		}
		rv.Stages = append(rv.Stages, sv)
	}
	return rv
}
