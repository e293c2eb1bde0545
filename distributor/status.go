package distributor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// Reports returns the live reports on cfg (every config when cfg is ""):
// the last report of each instance, for as long as it is younger than four
// heartbeats. They are sorted by config, then instance.
func (d *Distributor) Reports(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Report, error) {
	if cfg != "" {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("read reports: %w", err)
		}
	}
	out, err := d.readReports(ctx, reportFilter(cfg))
	if err != nil {
		return nil, fmt.Errorf("read reports of %q: %w", cfg, err)
	}
	slices.SortFunc(out, func(a, b cuecast.Report) int {
		return cmp.Or(cmp.Compare(a.Config, b.Config), cmp.Compare(a.Instance, b.Instance))
	})
	return out, nil
}

// readReports walks the last message of each report subject with an ordered
// (ephemeral, server-cleaned) consumer.
func (d *Distributor) readReports(ctx context.Context, filter string) ([]cuecast.Report, error) {
	cons, err := d.reports.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("create reader: %w", err)
	}
	defer func() {
		// An ordered consumer is ephemeral; deleting it frees the server now
		// rather than after its inactivity threshold.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if info := cons.CachedInfo(); info != nil {
			_ = d.reports.DeleteConsumer(dctx, info.Name)
		}
	}()
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read reader info: %w", err)
	}
	// Reports keep arriving while we read, so a subject can be delivered
	// twice (its last message, then a newer one): keep the newest.
	bySubject := map[string]cuecast.Report{}
	collect := func() []cuecast.Report {
		out := make([]cuecast.Report, 0, len(bySubject))
		for _, r := range bySubject {
			out = append(out, r)
		}
		return out
	}
	if info.NumPending == 0 {
		return nil, nil
	}
	remaining := int(info.NumPending)
	for {
		// Asking for no more than is pending makes Fetch return as soon as
		// they arrived instead of waiting out FetchMaxWait.
		batch, err := cons.Fetch(max(1, min(remaining, 512)), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, fmt.Errorf("fetch reports: %w", err)
		}
		n := 0
		done := false
		for m := range batch.Messages() {
			n++
			remaining--
			var r cuecast.Report
			if err := json.Unmarshal(m.Data(), &r); err != nil {
				d.log.Warn("skipping undecodable report", "subject", m.Subject(), "err", err)
			} else {
				bySubject[m.Subject()] = r
			}
			if meta, err := m.Metadata(); err == nil && meta.NumPending == 0 {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("fetch reports: %w", err)
		}
		if done || n == 0 {
			return collect(), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// ConfigStatus is the fleet's view of one config.
type ConfigStatus struct {
	Config cuecast.ConfigPath `json:"config"`
	// Latest is the newest version (a tombstone when the config was removed).
	Latest cuecast.Version `json:"latest"`
	// Instances is the number of live instances reporting on the config.
	Instances int `json:"instances"`
	// OnLatest counts the instances applying Latest.
	OnLatest int `json:"on_latest"`
	// Behind counts the instances on an older version (stragglers included).
	Behind int `json:"behind"`
	// Unhealthy counts the instances whose health provider says unhealthy.
	Unhealthy int `json:"unhealthy"`
	// Failing counts the instances whose last apply failed (LastError set).
	Failing int `json:"failing"`
	// Stragglers are the instances still behind Latest longer than
	// Options.StragglerAfter after it was published.
	Stragglers []cuecast.Report `json:"stragglers,omitempty"`
	// LastKnownGood are the instances serving their last-known-good file
	// because they could not confirm it with the distributor.
	LastKnownGood []cuecast.Report `json:"last_known_good,omitempty"`
	// Coverage is OnLatest / Instances (1 when no instance reports).
	Coverage float64 `json:"coverage"`
}

// Status computes coverage for the given configs (every config when none is
// given): how many live instances run the latest version, which stragglers
// lag behind, and which serve their last-known-good file. A config named
// explicitly with no version returns an error wrapping cuecast.ErrNotFound.
func (d *Distributor) Status(ctx context.Context, cfgs ...cuecast.ConfigPath) ([]ConfigStatus, error) {
	var err error
	if len(cfgs) == 0 {
		if cfgs, err = d.Configs(ctx); err != nil {
			return nil, fmt.Errorf("compute status: %w", err)
		}
	}
	var reports []cuecast.Report
	if len(cfgs) == 1 {
		reports, err = d.Reports(ctx, cfgs[0])
	} else {
		reports, err = d.Reports(ctx, "")
	}
	if err != nil {
		return nil, fmt.Errorf("compute status: %w", err)
	}
	byConfig := map[cuecast.ConfigPath][]cuecast.Report{}
	for _, r := range reports {
		byConfig[r.Config] = append(byConfig[r.Config], r)
	}
	now := time.Now()
	out := make([]ConfigStatus, 0, len(cfgs))
	for _, cfg := range cfgs {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("compute status: %w", err)
		}
		sv, err := d.latest(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("compute status of %s: %w", cfg, err)
		}
		out = append(out, d.summarize(sv, byConfig[cfg], now))
	}
	return out, nil
}

func (d *Distributor) summarize(latest storedVersion, reports []cuecast.Report, now time.Time) ConfigStatus {
	st := ConfigStatus{Config: latest.Config, Latest: latest.Version, Instances: len(reports), Coverage: 1}
	published := latest.At
	for _, r := range reports {
		switch {
		case r.Version == latest.Version.Version && r.Checksum == latest.Checksum:
			st.OnLatest++
		case r.Version < latest.Version.Version:
			st.Behind++
			if now.Sub(published) > d.o.StragglerAfter {
				st.Stragglers = append(st.Stragglers, r)
			}
		}
		if !r.Healthy {
			st.Unhealthy++
		}
		if r.LastError != "" {
			st.Failing++
		}
		if r.LastKnownGood {
			st.LastKnownGood = append(st.LastKnownGood, r)
		}
	}
	if st.Instances > 0 {
		st.Coverage = float64(st.OnLatest) / float64(st.Instances)
	}
	return st
}
