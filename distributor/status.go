package distributor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// Reports returns the live reports on cfg (every config when cfg is ""):
// the last report of each instance, for as long as it is younger than four
// heartbeats, and for each region that summarises its instances (a tree,
// docs/SCALING.md) one report per group of its last summary
// (Summary.Reports; cuecast.Report.Count says how many instances each
// stands for). They are sorted by config, then instance.
func (d *Distributor) Reports(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Report, error) {
	if cfg != "" {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("read reports: %w", err)
		}
	}
	return d.liveReports(ctx, reportFilter(cfg), summaryFilter(cfg), fmt.Sprintf("%q", cfg))
}

// NamespaceReports returns the live report of every instance on every
// config of namespace ns, by config, then instance: one read where many of
// its configs are wanted (a read per config makes the server count the
// pending reports of each).
func (d *Distributor) NamespaceReports(ctx context.Context, ns string) ([]cuecast.Report, error) {
	if !cuecast.ValidSegment(ns) {
		return nil, fmt.Errorf("read reports of namespace %q: %w: a namespace must match [a-z0-9][a-z0-9_-]*", ns, cuecast.ErrInvalidPath)
	}
	return d.liveReports(ctx, cuecast.ReportPrefix+"."+ns+".>", cuecast.SummaryPrefix+".*."+ns+".>", fmt.Sprintf("namespace %q", ns))
}

// liveReports is Reports and NamespaceReports: the instances' reports on
// the subjects reports matches and the regions' summaries on summaries, by
// config, then instance; of names what was read in an error.
func (d *Distributor) liveReports(ctx context.Context, reports, summaries, of string) ([]cuecast.Report, error) {
	out, err := d.readReports(ctx, reports)
	if err != nil {
		return nil, fmt.Errorf("read reports of %s: %w", of, err)
	}
	sums, err := d.readSummaries(ctx, summaries)
	if err != nil {
		return nil, fmt.Errorf("read summaries of %s: %w", of, err)
	}
	out = append(out, sums...)
	slices.SortFunc(out, func(a, b cuecast.Report) int {
		return cmp.Or(cmp.Compare(a.Config, b.Config), cmp.Compare(a.Instance, b.Instance))
	})
	return out, nil
}

// readReports reads the report of each instance on filter by batched
// direct gets ({"seq":N,"batch":B,"next_by_subj":filter} until the
// server's end-of-batch status says nothing is pending): the report stream
// keeps one message per subject, so that is each instance's latest. No
// consumer: the operator's account reaches the report stream by direct get
// only (docs/SECURITY.md), and a consumer's deliver subject is one more
// subject its creator chooses.
//
// A report whose body disagrees with its subject is skipped (DecodeReport).
// Reports keep arriving while we read, so a subject can be read twice (its
// report, then a newer one stored further on): the newest wins.
func (d *Distributor) readReports(ctx context.Context, filter string) ([]cuecast.Report, error) {
	return readLast(ctx, d, filter, "reports", "skipping reports whose body disagrees with their subject",
		func(m *jetstream.RawStreamMsg) (cuecast.Report, error) { return DecodeReport(m.Subject, m.Data) })
}

// readLast reads the messages of the report stream on filter (as
// readReports says) and returns, for each subject, the newest that decode
// accepts. Those it refuses are logged in one warn line; what names the
// messages in an error.
func readLast[T any](ctx context.Context, d *Distributor, filter, what, warn string, decode func(*jetstream.RawStreamMsg) (T, error)) ([]T, error) {
	bySubject := map[string]T{}
	skipped, firstSkipped := 0, error(nil)
	err := d.reportsRd.Each(ctx, filter, func(m *jetstream.RawStreamMsg) error {
		v, err := decode(m)
		if err != nil {
			skipped++
			firstSkipped = cmp.Or(firstSkipped, err)
			return nil
		}
		bySubject[m.Subject] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", what, err)
	}
	if skipped > 0 {
		// One line per read, not per message: the stored ones stay until
		// they expire, and status, the dashboard and the controller read
		// them again and again meanwhile.
		d.log.Warn(warn, "filter", filter, "skipped", skipped, "err", firstSkipped)
	}
	out := make([]T, 0, len(bySubject))
	for _, v := range bySubject {
		out = append(out, v)
	}
	return out, nil
}

// readSummaries reads the regions' summaries on filter as readReports
// reads reports, and returns their reports (Summary.Reports): Unheard for
// a summary stored more than LostHeartbeats heartbeats ago, whose region
// has stopped summarising (the stream drops it after LiveHeartbeats).
func (d *Distributor) readSummaries(ctx context.Context, filter string) ([]cuecast.Report, error) {
	sums, err := d.storedSummaries(ctx, filter)
	if err != nil {
		return nil, err
	}
	lost := time.Now().Add(-d.reportTTL() * LostHeartbeats / LiveHeartbeats)
	var out []cuecast.Report
	for _, st := range sums {
		out = append(out, st.Summary.Reports(st.Stored.Before(lost))...)
	}
	return out, nil
}

// StoredSummary is a region's summary as the report stream holds it.
type StoredSummary struct {
	Summary
	// Stored is when the hub stored it: its age, by the hub's clock.
	Stored time.Time
}

// storedSummaries reads the last summary on each subject matching filter.
func (d *Distributor) storedSummaries(ctx context.Context, filter string) ([]StoredSummary, error) {
	out, err := readLast(ctx, d, filter, "summaries", "skipping summaries that disagree with their subject",
		func(m *jetstream.RawStreamMsg) (StoredSummary, error) {
			s, err := DecodeSummary(m.Subject, m.Data)
			return StoredSummary{Summary: s, Stored: m.Time}, err
		})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b StoredSummary) int { return cmp.Compare(a.Region, b.Region) })
	return out, nil
}

// Summaries returns the regions' last summaries of cfg in the report
// stream (none on a single server), by region.
func (d *Distributor) Summaries(ctx context.Context, cfg cuecast.ConfigPath) ([]StoredSummary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("read summaries: %w", err)
	}
	out, err := d.storedSummaries(ctx, summaryFilter(cfg))
	if err != nil {
		return nil, fmt.Errorf("read summaries of %s: %w", cfg, err)
	}
	return out, nil
}

// VariantCounts counts, for each base path, the variants listed in st that
// are not deleted: a base path with a count holds their variant index,
// which no instance applies (status and the dashboard show it as such).
func VariantCounts(st []ConfigStatus) map[cuecast.ConfigPath]int {
	n := make(map[cuecast.ConfigPath]int)
	for _, s := range st {
		if s.Config.IsVariant() && !s.Latest.Deleted {
			n[s.Config.Base()]++
		}
	}
	return n
}

// ConfigStatus is the fleet's view of one config.
type ConfigStatus struct {
	Config cuecast.ConfigPath `json:"config"`
	// Latest is the newest version (a tombstone when the config was removed).
	Latest cuecast.Version `json:"latest"`
	// Target is the version the whole fleet is meant to end on as things
	// stand: Latest, unless the rollout controller says otherwise (a pin,
	// a halt moving the fleet back, a rollout of an older version); see
	// Intent. OnTarget counts the instances on it.
	Target   uint64 `json:"target"`
	OnTarget int    `json:"on_target"`
	// Instances is the number of live instances reporting on the config.
	Instances int `json:"instances"`
	// OnLatest counts the instances applying Latest.
	OnLatest int `json:"on_latest"`
	// OnIntended counts the instances on the version intended for each of
	// them now (Intent: its stage, cohort, a halt, a pin); Behind those on
	// an older one than that (stragglers included).
	OnIntended int `json:"on_intended"`
	Behind     int `json:"behind"`
	// Unhealthy counts the instances whose health provider says unhealthy.
	Unhealthy int `json:"unhealthy"`
	// Failing counts the instances whose last apply failed (LastError set).
	Failing int `json:"failing"`
	// Unknown counts the instances whose state nobody knows: those of a
	// region that stopped summarising (LostHeartbeats). They count in
	// Instances and Behind, never as healthy or on a version.
	Unknown int `json:"unknown,omitempty"`
	// Refused are the instances whose last report says they refused a
	// forged or unverifiable pointer (Report.Refused, PROTOCOL.md §5):
	// something is sending them what serve did not sign. Not an apply
	// failure, and not counted in Failing.
	Refused []cuecast.Report `json:"refused,omitempty"`
	// Stragglers are the instances not on the version intended for them
	// longer than Options.StragglerAfter after it became intended.
	Stragglers []cuecast.Report `json:"stragglers,omitempty"`
	// LastKnownGood are the instances serving their last-known-good file
	// because they could not confirm it with the distributor.
	LastKnownGood []cuecast.Report `json:"last_known_good,omitempty"`
	// Coverage is OnIntended / Instances: the share of the fleet where it
	// is meant to be now. It is 0 when no instance reports (nobody is
	// covered; Instances says why), never 1.
	Coverage float64 `json:"coverage"`
}

// Intent is the one rule for "the version this instance is meant to run
// now" (docs/ROLLOUT.md, "What status counts"): it returns that version
// and since when it has been meant, the straggler clock's start. The
// rollout controller's records give one per config (rollout.Record.Intent:
// stage, cohort, halt, pin); without a record, every instance is meant to
// run the latest version since it was published (LatestIntent).
type Intent func(instance string) (version uint64, since time.Time)

// LatestIntent is the Intent of a config no rollout controller governs:
// latest for everyone since published.
func LatestIntent(latest uint64, published time.Time) Intent {
	return func(string) (uint64, time.Time) { return latest, published }
}

// Intents gives the Intent of each config (nil: LatestIntent) and the
// version its whole fleet is meant to end on (0: the latest).
type Intents func(cfg cuecast.ConfigPath, latest cuecast.Version, published time.Time) (Intent, uint64)

// Status computes coverage for the given configs (every config when none is
// given) against the latest version of each: how many live instances run
// it, which stragglers lag behind, and which serve their last-known-good
// file. A config named explicitly with no version returns an error wrapping
// cuecast.ErrNotFound. StatusWith counts against what the rollout
// controller intends instead; status, the dashboard and the metrics use it.
func (d *Distributor) Status(ctx context.Context, cfgs ...cuecast.ConfigPath) ([]ConfigStatus, error) {
	return d.StatusWith(ctx, nil, cfgs...)
}

// StatusWith is Status with each instance counted against the version
// intents says it is meant to run (nil: the latest, as Status).
func (d *Distributor) StatusWith(ctx context.Context, intents Intents, cfgs ...cuecast.ConfigPath) ([]ConfigStatus, error) {
	st, _, err := d.StatusAndReports(ctx, intents, cfgs...)
	return st, err
}

// StatusAndReports is StatusWith and the live reports it counted (those
// Reports returns for its one config, or for every config), from one read
// of the fleet: a reader that shows both, as the dashboard's pages show a
// config's counts beside its instances, shows counts its list adds up to,
// and reads each report once. Read apart, an instance that applied between
// the reads was counted on one version and listed on the next, and every
// sample read the whole fleet twice (TestSampleReadsTheFleetOnce).
func (d *Distributor) StatusAndReports(ctx context.Context, intents Intents, cfgs ...cuecast.ConfigPath) ([]ConfigStatus, []cuecast.Report, error) {
	if len(cfgs) == 0 {
		// Every config: the reports, then the newest version of each
		// config in one answer (Configs' read), not one read per config
		// (TestStatusReadsEveryLatestAtOnce); beyond the configs one
		// answer holds, each config's latest apart, counted against the
		// same reports. Versions are read after the reports, as below, so
		// that no report is newer than its config's latest.
		reports, err := d.Reports(ctx, "")
		if err != nil {
			return nil, nil, fmt.Errorf("compute status: %w", err)
		}
		latest, err := d.latestOfAll(ctx)
		get := func(cfg cuecast.ConfigPath) (storedVersion, error) { return latest[cfg], nil }
		switch {
		case err == nil:
			cfgs = slices.Sorted(maps.Keys(latest))
		case errors.Is(err, ErrTooManySubjects):
			if cfgs, err = d.Configs(ctx); err != nil {
				return nil, nil, fmt.Errorf("compute status: %w", err)
			}
			get = func(cfg cuecast.ConfigPath) (storedVersion, error) { return d.latest(ctx, cfg) }
		default:
			return nil, nil, fmt.Errorf("compute status: %w", err)
		}
		st, err := d.statusOf(cfgs, reports, intents, get)
		return st, reports, err
	}
	for _, cfg := range cfgs {
		if err := cfg.Validate(); err != nil {
			return nil, nil, fmt.Errorf("compute status: %w", err)
		}
	}
	var reports []cuecast.Report
	var err error
	if len(cfgs) == 1 {
		reports, err = d.Reports(ctx, cfgs[0])
	} else {
		reports, err = d.Reports(ctx, "")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("compute status: %w", err)
	}
	st, err := d.statusOf(cfgs, reports, intents, func(cfg cuecast.ConfigPath) (storedVersion, error) { return d.latest(ctx, cfg) })
	return st, reports, err
}

// statusOf is the status of each of cfgs from reports, each config's
// newest version as latest gives it.
func (d *Distributor) statusOf(cfgs []cuecast.ConfigPath, reports []cuecast.Report, intents Intents, latest func(cuecast.ConfigPath) (storedVersion, error)) ([]ConfigStatus, error) {
	byConfig := map[cuecast.ConfigPath][]cuecast.Report{}
	for _, r := range reports {
		byConfig[r.Config] = append(byConfig[r.Config], r)
	}
	now := time.Now()
	out := make([]ConfigStatus, 0, len(cfgs))
	for _, cfg := range cfgs {
		sv, err := latest(cfg)
		if err != nil {
			return nil, fmt.Errorf("compute status of %s: %w", cfg, err)
		}
		var intent Intent
		var target uint64
		if intents != nil {
			intent, target = intents(cfg, sv.Version, sv.At)
		}
		out = append(out, Summarize(sv.Version, sv.At, byConfig[cfg], intent, target, d.o.StragglerAfter, now))
	}
	return out, nil
}

// Summarize measures reports, the live reports on latest's config, against
// intent (nil: LatestIntent) at now. target is the version the whole fleet
// is meant to end on (0: latest). An instance is a straggler when it is not
// on its intended version longer than stragglerAfter after that version
// became intended; one on a newer version than intended (an instance a
// halt is moving back) is neither on it nor behind, and a straggler too
// once stragglerAfter has passed.
func Summarize(latest cuecast.Version, published time.Time, reports []cuecast.Report, intent Intent, target uint64, stragglerAfter time.Duration, now time.Time) ConfigStatus {
	if intent == nil {
		intent = LatestIntent(latest.Version, published)
	}
	if target == 0 {
		target = latest.Version
	}
	// A report made from a region's summary stands for r.Weight()
	// instances alike in everything counted here; it is listed once.
	st := ConfigStatus{Config: latest.Config, Latest: latest, Target: target, Instances: Weigh(reports)}
	for _, r := range reports {
		w := r.Weight()
		if Unheard(r) {
			st.Unknown += w
			st.Behind += w
			continue
		}
		want, since := intent(r.Instance)
		if r.Version == latest.Version && r.Checksum == latest.Checksum {
			st.OnLatest += w
		}
		if r.Version == target {
			st.OnTarget += w
		}
		switch {
		case r.Version == want:
			st.OnIntended += w
		case r.Version < want:
			st.Behind += w
			fallthrough
		default:
			if now.Sub(since) > stragglerAfter {
				st.Stragglers = append(st.Stragglers, r)
			}
		}
		if !r.Healthy {
			st.Unhealthy += w
		}
		if r.LastError != "" {
			st.Failing += w
		}
		if r.Refused != "" {
			st.Refused = append(st.Refused, r)
		}
		if r.LastKnownGood {
			st.LastKnownGood = append(st.LastKnownGood, r)
		}
	}
	if st.Instances > 0 {
		st.Coverage = float64(st.OnIntended) / float64(st.Instances)
	}
	return st
}

// Drift says whether r reports content cuecast did not publish, and why:
// a version newer than latest, or a checksum other than the stored one for
// its version (sums: the retained versions' checksums). A version older
// than retention keeps cannot be checked and is not drift; nor is an
// instance with no version yet, or one reporting no checksum. (The CLI
// called a version out of retention drift, the dashboard did not: two
// rules for one word, issue 17, item 7.) The one rule for `cuecast status`, the
// dashboard and cuecast_config_instances_drifted.
//
// Per variant (docs/VARIANTS.md): an instance whose labels declare a value
// of a dimension other than the one of the variant it reports on runs
// another variant's content than its identity says, and is drift too
// (the client labels every report with its dimensions); so is one on a
// variant whose content is not that variant's (the checksum rule).
func Drift(r cuecast.Report, sums map[uint64]string, latest uint64) (string, bool) {
	if r.Version == 0 {
		return "", false
	}
	if why, ok := variantDrift(r); ok {
		return why, true
	}
	if r.Version > latest {
		return fmt.Sprintf("%s reports v%d, newer than the latest v%d (checksum %.12s)", r.Instance, r.Version, latest, r.Checksum), true
	}
	sum, ok := sums[r.Version]
	if !ok || r.Checksum == "" || r.Checksum == sum {
		return "", false
	}
	return fmt.Sprintf("%s reports v%d with checksum %.12s, v%d is %.12s", r.Instance, r.Version, r.Checksum, r.Version, sum), true
}

// Drifted is a report whose content cuecast did not publish, and why
// (Drift).
type Drifted struct {
	cuecast.Report
	Why string
}

// DriftOf applies Drift to a config's live reports against its retained
// versions (Versions; any order) and its latest version, and returns the
// drifted ones sorted by instance. `cuecast status`, the dashboard and
// cuecast_config_instances_drifted all count drift with it.
func DriftOf(reports []cuecast.Report, retained []cuecast.Version, latest uint64) []Drifted {
	sums := make(map[uint64]string, len(retained))
	for _, v := range retained {
		sums[v.Version] = v.Checksum
	}
	var out []Drifted
	for _, r := range reports {
		if why, ok := Drift(r, sums, latest); ok {
			out = append(out, Drifted{Report: r, Why: why})
		}
	}
	slices.SortFunc(out, func(a, b Drifted) int { return cmp.Compare(a.Instance, b.Instance) })
	return out
}

// variantDrift says whether r reports on a variant its own dimension
// labels contradict: an instance declaring env=staging that runs
// payments/checkout/env=prod/region=eu.
func variantDrift(r cuecast.Report) (string, bool) {
	for _, dv := range r.Config.Variant() {
		if v, ok := r.Labels[dv.Dim]; ok && v != dv.Value {
			return fmt.Sprintf("%s declares %s=%s but runs variant %s (v%d)", r.Instance, dv.Dim, v, r.Config.VariantLabel(), r.Version), true
		}
	}
	return "", false
}
